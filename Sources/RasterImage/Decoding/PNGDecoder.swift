import CPNG
import ImageLoaderSupport

/// PNG through libpng: every colour type and bit depth, palettes with tRNS,
/// 16-bit scaled to 8 with rounding, Adam7 interlacing; iCCP and eXIf read.
enum PNGDecoder: FormatDecoder {
    static let format = ImageFormat.png

    static func info(_ reader: ByteReader, limits: DecodingLimits) throws -> ImageInfo {
        let session = try PNGReadSession(reader, limits: limits)
        return info(try session.readHeader())
    }

    /// The header's facts (an orientation in an eXIf after the image data is not known yet).
    static func info(_ header: PNGReadSession.Header) -> ImageInfo {
        ImageInfo(
            format: .png, width: header.width, height: header.height, hasAlpha: header.hasAlpha,
            orientation: header.orientation ?? .up, iccProfile: header.iccProfile, isGrayscale: header.isGrayscale)
    }

    static func decode(_ reader: ByteReader, options: DecodingOptions) throws -> RasterImage {
        let session = try PNGReadSession(reader, limits: options.limits)
        let header = try session.readHeader()
        try options.limits.check(width: header.width, height: header.height, format: .png)
        if case .index(let n) = options.frames, n != 0 {
            throw ImageDecodingError(.frameOutOfRange(index: n, count: 1), format: .png)
        }
        // Before the image's memory is taken: libpng may be needed to read it.
        try session.checkRowBuffers()
        let (width, height) = (header.width, header.height)
        let bytesPerRow = width * 4
        var read = (orientation: Orientation.up, truncated: false)
        let pixels = try PixelBuffer.make(count: bytesPerRow * height) { base in
            // Interlaced passes fill a row a few pixels at a time: start from transparent.
            if header.interlaced { base.initialize(repeating: 0, count: bytesPerRow * height) }
            read = try readImage(
                reader, session: session, header: header, limits: options.limits,
                into: ImageBufferTarget(base, bytesPerRow: bytesPerRow),
                allowsTruncatedData: options.allowsTruncatedData)
        }
        return RasterImage(
            validatedWidth: width, height: height, bytesPerRow: bytesPerRow, frames: [.init(pixels: pixels)],
            alphaMode: .straight, loopCount: 1, orientation: read.orientation, iccProfile: header.iccProfile,
            format: .png, hasAlpha: header.hasAlpha || read.truncated)
    }

    /// Reads the image's rows into `target` (8-bit RGBA): through ``PNGImageData`` when
    /// it takes the image, otherwise through libpng, from the start if the first try
    /// declined. Returns the orientation (an eXIf may come after the image data) and
    /// whether the data ended early (allowed only with `allowsTruncatedData`).
    static func readImage(
        _ reader: ByteReader, session: PNGReadSession, header: PNGReadSession.Header, limits: DecodingLimits,
        into target: RowTarget, allowsTruncatedData: Bool
    ) throws -> (orientation: Orientation, truncated: Bool) {
        var session = session
        if let data = session.plainImageData(header) {
            if let trailer = data.read(reader, limits: limits, into: target) {
                return (header.orientation ?? trailer.orientation ?? .up, false)
            }
            reader.seek(to: 0)
            session = try PNGReadSession(reader, limits: limits)
            _ = try session.readHeader()
        }
        let passes = try session.startRGBA8()
        let truncated = try readRows(
            session, passes: passes, height: header.height, into: target, allowsTruncatedData: allowsTruncatedData)
        return (try finish(session, header: header, truncated: truncated, allowsTruncatedData), truncated)
    }

    /// Reads every row of every pass into `target`. Returns whether the data ended early
    /// (allowed only with `allowsTruncatedData`; the missing rows are then transparent).
    static func readRows(
        _ session: PNGReadSession, passes: Int, height: Int, into target: RowTarget, allowsTruncatedData: Bool
    ) throws -> Bool {
        for pass in 0..<passes {
            for y in 0..<height {
                do {
                    try session.readRow(into: target.rows(y, count: 1))
                } catch let error as ImageDecodingError where allowsTruncatedData && error.reason == .truncated {
                    // Interlaced rows were cleared before the first pass; plain ones are missing from here.
                    if passes == 1 { target.fillMissing(y, count: height - y) }
                    return true
                }
                if pass == passes - 1 { target.commit(y, count: 1) }
            }
        }
        return false
    }

    /// Reads the chunks after the image data; returns the orientation (an eXIf may come late).
    static func finish(
        _ session: PNGReadSession, header: PNGReadSession.Header, truncated: Bool, _ allowsTruncatedData: Bool
    ) throws -> Orientation {
        guard !truncated else { return header.orientation ?? .up }
        do {
            try session.readEnd()
        } catch let error as ImageDecodingError where allowsTruncatedData && error.reason == .truncated {
            return header.orientation ?? .up
        }
        return header.orientation ?? session.trailingOrientation() ?? .up
    }
}

/// One libpng read: owns the C state and turns its failures into ``ImageDecodingError``.
final class PNGReadSession {
    struct Header {
        var width: Int
        var height: Int
        var hasAlpha: Bool
        var interlaced: Bool
        /// Colour type 0 or 4: grey, with or without alpha.
        var isGrayscale: Bool = false
        var orientation: Orientation?
        var iccProfile: [UInt8]?
    }

    private let state: UnsafeMutablePointer<cpng_reader>
    private let reader: ByteReader
    private let limits: DecodingLimits

    /// `limits.maxWorkingBytes` bounds every allocation libpng makes.
    init(_ reader: ByteReader, limits: DecodingLimits) throws {
        self.reader = reader
        self.limits = limits
        state = .allocate(capacity: 1)
        let read: cpng_read_fn = { context, buffer, count in
            size_t(ByteReader.from(context).read(into: buffer!, count: Int(count)))
        }
        // On failure deinit releases the state: every stored property is set.
        if cpng_reader_init(state, read, reader.context, max(1 << 20, limits.maxWorkingBytes)) != 0 {
            throw ImageDecodingError(.corrupt, format: .png, message: "libpng could not start")
        }
    }

    deinit {
        cpng_reader_destroy(state)
        state.deallocate()
    }

    /// The largest allocation libpng asked for, and how many it was refused.
    var largestAllocationRequest: Int { Int(state.pointee.largest_request) }
    var refusedAllocations: Int { Int(state.pointee.refused_allocations) }

    private var png: png_structp { state.pointee.png }
    private var info: png_infop { state.pointee.info }

    private func failure() -> ImageDecodingError {
        let message = CString.decode(&state.pointee.message)
        let reason: ImageDecodingError.Reason = state.pointee.reached_end_of_data != 0 ? .truncated : .corrupt
        return ImageDecodingError(reason, format: .png, message: "libpng: \(message)")
    }

    func readHeader() throws -> Header {
        guard cpng_read_info(state) == 0 else { throw failure() }
        let colorType = Int32(png_get_color_type(png, info))
        let hasTRNS = png_get_valid(png, info, PNG_INFO_tRNS) != 0
        return Header(
            width: Int(png_get_image_width(png, info)),
            height: Int(png_get_image_height(png, info)),
            hasAlpha: colorType & PNG_COLOR_MASK_ALPHA != 0 || hasTRNS,
            interlaced: png_get_interlace_type(png, info) != PNG_INTERLACE_NONE,
            isGrayscale: colorType & PNG_COLOR_MASK_COLOR == 0,
            orientation: exifOrientation(in: info),
            iccProfile: iccProfile())
    }

    /// Throws unless libpng's row buffers for 8-bit RGBA output fit the working memory
    /// (see ``startRGBA8()``).
    func checkRowBuffers() throws {
        let width = Int(png_get_image_width(png, info))
        let libpngRow = Checked.add(width, 7).flatMap { Checked.multiply($0, 8) }.flatMap { Checked.add($0, 1) }
        let bytes = libpngRow.flatMap { Checked.multiply($0, 2) }.flatMap { Checked.add($0, width * 4) }
        try limits.checkWorking(bytes: bytes, format: .png, what: "row buffers")
    }

    /// The image data, when ``PNGImageData`` can read it: 8 bits a sample, not interlaced.
    /// A tRNS colour is compared on its low byte and palette entries past the PLTE are
    /// opaque black, as libpng's expansion does.
    func plainImageData(_ header: Header) -> PNGImageData? {
        guard !header.interlaced, png_get_bit_depth(png, info) == 8 else { return nil }
        var transparentAlpha: png_bytep? = nil
        var transparentCount: Int32 = 0
        var transparentColor: png_color_16p? = nil
        let hasTRNS = png_get_tRNS(png, info, &transparentAlpha, &transparentCount, &transparentColor) != 0
        let key = hasTRNS ? transparentColor?.pointee : nil
        let samples: PNGImageData.Samples
        switch Int32(png_get_color_type(png, info)) {
        case PNG_COLOR_TYPE_GRAY:
            samples = .gray(transparent: key.map { UInt8(truncatingIfNeeded: $0.gray) })
        case PNG_COLOR_TYPE_GRAY_ALPHA:
            samples = .grayAlpha
        case PNG_COLOR_TYPE_RGB:
            samples = .rgb(
                transparent: key.map {
                    SIMD3(
                        UInt8(truncatingIfNeeded: $0.red), UInt8(truncatingIfNeeded: $0.green),
                        UInt8(truncatingIfNeeded: $0.blue))
                })
        case PNG_COLOR_TYPE_RGB_ALPHA:
            samples = .rgba
        case PNG_COLOR_TYPE_PALETTE:
            var palette: png_colorp? = nil
            var count: Int32 = 0
            guard png_get_PLTE(png, info, &palette, &count) != 0, let palette else { return nil }
            var entries = [SIMD4<UInt8>](repeating: SIMD4(0, 0, 0, 255), count: 256)
            for i in 0..<min(Int(count), 256) {
                entries[i] = SIMD4(palette[i].red, palette[i].green, palette[i].blue, 255)
            }
            if hasTRNS, let transparentAlpha {
                for i in 0..<min(Int(transparentCount), 256) { entries[i][3] = transparentAlpha[i] }
            }
            samples = .palette(entries)
        default:
            return nil
        }
        return PNGImageData(width: header.width, height: header.height, samples: samples)
    }

    /// Requests 8-bit RGBA rows; returns the number of interlace passes.
    /// libpng allocates its row buffers here: two rows (the current one and the previous,
    /// for the filters) of up to 8 bytes a pixel (16-bit RGBA), the width rounded up to 8,
    /// and the caller reads into a row of 4 bytes a pixel. They are checked against the
    /// working memory first: a 100,000,000 x 1 image would need 1.6 GB of them.
    func startRGBA8() throws -> Int {
        try checkRowBuffers()
        var passes: Int32 = 1
        guard cpng_set_rgba8_output(state, &passes) == 0 else { throw failure() }
        return Int(passes)
    }

    func readRow(into row: UnsafeMutablePointer<UInt8>) throws {
        guard cpng_read_row(state, row) == 0 else { throw failure() }
    }

    func readEnd() throws {
        guard cpng_read_end(state) == 0 else { throw failure() }
    }

    /// An eXIf chunk after the image data.
    func trailingOrientation() -> Orientation? {
        exifOrientation(in: state.pointee.end_info)
    }

    private func exifOrientation(in info: png_infop?) -> Orientation? {
        var count: png_uint_32 = 0
        var exif: png_bytep? = nil
        guard png_get_eXIf_1(png, info, &count, &exif) != 0, let exif, count > 0 else { return nil }
        return EXIF.orientation(in: UnsafeBufferPointer(start: exif, count: Int(count)))
    }

    private func iccProfile() -> [UInt8]? {
        var name: png_charp? = nil
        var compression: Int32 = 0
        var profile: png_bytep? = nil
        var length: png_uint_32 = 0
        guard png_get_iCCP(png, info, &name, &compression, &profile, &length) != 0, let profile, length > 0 else {
            return nil
        }
        return Array(UnsafeBufferPointer(start: profile, count: Int(length)))
    }
}
