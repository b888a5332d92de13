import CTIFF
import ImageLoaderSupport

/// TIFF through libtiff: strips and tiles, contiguous or separate planes, every
/// codec libtiff has (none, LZW, deflate, PackBits, JPEG, ...), 1 to 16 bits,
/// gray, RGB, palette and CMYK with or without alpha, converted to RGBA here.
/// Other layouts (YCbCr without JPEG, CIELab, ...) go through libtiff's
/// TIFFRGBAImage. The first page by default; any page, or all, on request.
enum TIFFDecoder: FormatDecoder {
    static let format = ImageFormat.tiff

    static func info(_ reader: ByteReader, limits: DecodingLimits) throws -> ImageInfo {
        try info(TIFFFile(reader, limits: limits), limits: limits)
    }

    /// The first page's facts and the page count; leaves the first page selected.
    static func info(_ file: TIFFFile, limits: DecodingLimits) throws -> ImageInfo {
        let pages = try file.pageCount(limits: limits)
        let page = try file.page()
        return ImageInfo(
            format: .tiff, width: page.width, height: page.height, frameCount: pages, hasAlpha: page.alpha != nil,
            orientation: page.orientation, iccProfile: page.iccProfile,
            isGrayscale: { if case .gray = page.color { true } else { false } }())
    }

    static func decode(_ reader: ByteReader, options: DecodingOptions) throws -> RasterImage {
        let file = try TIFFFile(reader, limits: options.limits)
        switch options.frames {
        case .first:
            return try file.decodePage(options: options)
        case .index(let n):
            let count = try file.pageCount(limits: options.limits)
            guard n >= 0, n < count else {
                throw ImageDecodingError(.frameOutOfRange(index: n, count: count), format: .tiff)
            }
            try file.select(page: n)
            return try file.decodePage(options: options)
        case .all, .prefix:
            let pages = try decodeAll(file, options: options)
            let first = pages[0]
            guard pages.allSatisfy({ $0.width == first.width && $0.height == first.height }) else {
                throw ImageDecodingError(
                    .unsupported, format: .tiff, message: "pages differ in size; decode them with decodePages")
            }
            let frames = pages.map {
                $0.alphaMode == first.alphaMode ? $0.frames[0] : $0.converted(to: first.alphaMode).frames[0]
            }
            return first.with(frames: frames)
        }
    }

    /// Every page as its own image.
    static func decodePages(_ reader: ByteReader, options: DecodingOptions) throws -> [RasterImage] {
        try decodeAll(TIFFFile(reader, limits: options.limits), options: options)
    }

    private static func decodeAll(_ file: TIFFFile, options: DecodingOptions) throws -> [RasterImage] {
        var count = try file.pageCount(limits: options.limits)
        if case .prefix(let n) = options.frames { count = min(count, max(1, n)) }
        var pages: [RasterImage] = []
        var total = 0
        for index in 0..<count {
            try file.select(page: index)
            let page = try file.page()
            try options.limits.check(width: page.width, height: page.height, format: .tiff)
            total += page.width * page.height * 4
            if total > options.limits.maxTotalBytes {
                throw ImageDecodingError(
                    .tooManyBytes(bytes: total, limit: options.limits.maxTotalBytes), format: .tiff)
            }
            pages.append(try file.decodePage(options: options))
        }
        return pages
    }
}

extension RasterImage {
    func converted(to mode: AlphaMode) -> RasterImage {
        mode == .premultiplied ? premultiplied() : straightAlpha()
    }
}

/// The layout of one TIFF page (directory), as far as decoding needs it.
struct TIFFPage {
    enum Color {
        case gray(whiteIsZero: Bool)
        case rgb
        case palette
        case cmyk
    }

    var width: Int
    var height: Int
    var bitsPerSample: Int
    var samplesPerPixel: Int
    var separatePlanes: Bool
    var photometric: UInt16
    var compression: UInt16
    var sampleFormat: UInt16
    var inkSet: UInt16
    /// The alpha sample's index and whether colours are premultiplied by it.
    var alpha: (index: Int, associated: Bool)?
    var orientation: Orientation
    var iccProfile: [UInt8]?
    var tiled: Bool

    /// How the decoder's own path reads this page, or `nil` for TIFFRGBAImage.
    var color: Color? {
        guard sampleFormat == UInt16(SAMPLEFORMAT_UINT) else { return nil }
        guard [1, 2, 4, 8, 16].contains(bitsPerSample) else { return nil }
        let color: Color
        let channels: Int
        switch Int32(photometric) {
        case PHOTOMETRIC_MINISWHITE: (color, channels) = (.gray(whiteIsZero: true), 1)
        case PHOTOMETRIC_MINISBLACK: (color, channels) = (.gray(whiteIsZero: false), 1)
        case PHOTOMETRIC_RGB: (color, channels) = (.rgb, 3)
        // JPEG-compressed YCbCr: libtiff's codec converts it to RGB (JPEGCOLORMODE_RGB).
        case PHOTOMETRIC_YCBCR where Int32(compression) == COMPRESSION_JPEG && bitsPerSample == 8:
            (color, channels) = (.rgb, 3)
        case PHOTOMETRIC_PALETTE where bitsPerSample <= 8: (color, channels) = (.palette, 1)
        case PHOTOMETRIC_SEPARATED where Int32(inkSet) == INKSET_CMYK: (color, channels) = (.cmyk, 4)
        default: return nil
        }
        guard samplesPerPixel >= channels, samplesPerPixel <= 8 else { return nil }
        if case .rgb = color, bitsPerSample < 8 { return nil }
        return color
    }
}

/// A libtiff handle over a ``ByteReader``, with its messages collected (never printed).
final class TIFFFile {
    private let handle: UnsafeMutablePointer<ctiff_handle>
    private let reader: ByteReader
    /// The limits the strip and tile buffers are checked against.
    let limits: DecodingLimits
    private var tiff: OpaquePointer { handle.pointee.tiff }

    init(_ reader: ByteReader, limits: DecodingLimits) throws {
        if let failure = LazyLibraries.tiffFailure {
            throw ImageDecodingError(.unsupported, format: .tiff, message: failure)
        }
        self.reader = reader
        self.limits = limits
        handle = .allocate(capacity: 1)
        handle.initialize(to: ctiff_handle())
        handle.pointee.size = UInt64(reader.size)
        handle.pointee.context = reader.context
        if let memory = reader.memory {
            handle.pointee.memory = memory.baseAddress!.assumingMemoryBound(to: UInt8.self)
        } else {
            handle.pointee.read_at = { context, offset, buffer, count in
                size_t(ByteReader.from(context).read(at: Int(offset), into: buffer!, count: Int(count)))
            }
        }
        // No single libtiff buffer may exceed the working-memory limit (it also keeps
        // libtiff's own strip and directory buffers in bounds).
        let cap = UInt64(max(1 << 20, limits.maxWorkingBytes))
        // On failure deinit closes and frees the handle: every stored property is set.
        guard ctiff_open(handle, cap) == 0 else { throw failure(.corrupt) }
    }

    deinit {
        ctiff_close(handle)
        handle.deallocate()
    }

    private var message: String {
        CString.decode(&handle.pointee.message)
    }

    private func failure(_ reason: ImageDecodingError.Reason) -> ImageDecodingError {
        let truncated = handle.pointee.reached_end_of_data != 0
        return ImageDecodingError(truncated ? .truncated : reason, format: .tiff, message: "libtiff: \(message)")
    }

    func pageCount(limits: DecodingLimits) throws -> Int {
        // libtiff's own count walks the whole chain, however long: ours stops past the limit.
        guard directoryCount(upTo: limits.maxFrames) <= limits.maxFrames else {
            throw ImageDecodingError(.tooManyFrames(limit: limits.maxFrames), format: .tiff)
        }
        let count = Int(TIFFNumberOfDirectories(tiff))
        try select(page: 0)
        return max(count, 1)
    }

    /// The directories in the chain from the header, counted up to `limit + 1` at most,
    /// each visited once (a loop ends the count, as it ends libtiff's). Reads only each
    /// directory's entry count and next offset; a chain that leaves the data ends there
    /// (libtiff reports what is wrong with it).
    func directoryCount(upTo limit: Int) -> Int {
        func read(_ count: Int, at offset: UInt64) -> [UInt8]? {
            guard let start = Int(exactly: offset), count <= 8 else { return nil }
            var bytes = [UInt8](repeating: 0, count: count)
            let got = bytes.withUnsafeMutableBytes { reader.read(at: start, into: $0.baseAddress!, count: count) }
            return got == count ? bytes : nil
        }
        guard let header = read(8, at: 0), header[0] == header[1], header[0] == 0x49 || header[0] == 0x4D else {
            return 0
        }
        let little = header[0] == 0x49
        func number(_ bytes: [UInt8]) -> UInt64 {
            (little ? bytes.reversed() : bytes).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        }
        let big = number(Array(header[2..<4])) == 43
        var next: UInt64
        if big {
            guard let first = read(8, at: 8) else { return 0 }
            next = number(first)
        } else {
            next = number(Array(header[4..<8]))
        }
        var seen: Set<UInt64> = []
        while next != 0, seen.insert(next).inserted {
            if seen.count > limit { break }
            guard let countBytes = read(big ? 8 : 2, at: next) else { break }
            let (entry, header) = big ? (UInt64(20), UInt64(8)) : (UInt64(12), UInt64(2))
            let (entries, overflow) = number(countBytes).multipliedReportingOverflow(by: entry)
            let (length, overflowAgain) = entries.addingReportingOverflow(header)
            let (end, overflowOnceMore) = next.addingReportingOverflow(length)
            guard !overflow, !overflowAgain, !overflowOnceMore, let offset = read(big ? 8 : 4, at: end) else { break }
            next = number(offset)
        }
        return seen.count
    }

    func select(page: Int) throws {
        guard TIFFSetDirectory(tiff, tdir_t(page)) == 1 else { throw failure(.corrupt) }
    }

    func page() throws -> TIFFPage {
        func u16(_ tag: Int32, defaulted: Bool = true) -> UInt16? {
            var value: UInt16 = 0
            let found =
                defaulted
                ? ctiff_get_uint16_defaulted(tiff, UInt32(tag), &value) : ctiff_get_uint16(tiff, UInt32(tag), &value)
            return found == 1 ? value : nil
        }
        var width: UInt32 = 0
        var height: UInt32 = 0
        guard ctiff_get_uint32(tiff, UInt32(TIFFTAG_IMAGEWIDTH), &width) == 1,
            ctiff_get_uint32(tiff, UInt32(TIFFTAG_IMAGELENGTH), &height) == 1
        else { throw ImageDecodingError(.corrupt, format: .tiff, message: "no image size") }
        guard let photometric = u16(TIFFTAG_PHOTOMETRIC, defaulted: false) ?? u16(TIFFTAG_PHOTOMETRIC) else {
            throw ImageDecodingError(.corrupt, format: .tiff, message: "no photometric interpretation")
        }
        let samples = Int(u16(TIFFTAG_SAMPLESPERPIXEL) ?? 1)
        var extraCount: UInt16 = 0
        var extraTypes: UnsafePointer<UInt16>? = nil
        var alpha: (Int, Bool)?
        if ctiff_get_extra_samples(tiff, &extraCount, &extraTypes) == 1, extraCount > 0, let extraTypes,
            Int(extraCount) < samples
        {
            let type = Int32(extraTypes[0])
            if type == EXTRASAMPLE_ASSOCALPHA || type == EXTRASAMPLE_UNASSALPHA {
                alpha = (samples - Int(extraCount), type == EXTRASAMPLE_ASSOCALPHA)
            }
        }
        var iccData: UnsafePointer<UInt8>? = nil
        var iccLength: UInt32 = 0
        var icc: [UInt8]?
        if ctiff_get_icc_profile(tiff, &iccData, &iccLength) == 1, let iccData, iccLength > 0 {
            icc = Array(UnsafeBufferPointer(start: iccData, count: Int(iccLength)))
        }
        return TIFFPage(
            width: Int(width), height: Int(height),
            bitsPerSample: Int(u16(TIFFTAG_BITSPERSAMPLE) ?? 1),
            samplesPerPixel: samples,
            separatePlanes: Int32(u16(TIFFTAG_PLANARCONFIG) ?? 1) == PLANARCONFIG_SEPARATE,
            photometric: photometric,
            compression: u16(TIFFTAG_COMPRESSION) ?? 1,
            sampleFormat: u16(TIFFTAG_SAMPLEFORMAT) ?? 1,
            inkSet: u16(TIFFTAG_INKSET) ?? 1,
            alpha: alpha,
            orientation: Orientation(tagValue: Int(u16(TIFFTAG_ORIENTATION) ?? 1)),
            iccProfile: icc,
            tiled: TIFFIsTiled(tiff) != 0)
    }

    /// Decodes the selected page.
    func decodePage(options: DecodingOptions) throws -> RasterImage {
        let page = try page()
        try options.limits.check(width: page.width, height: page.height, format: .tiff)
        let alphaMode: AlphaMode
        let pixels: [UInt8]
        var truncated = false
        if page.color != nil {
            alphaMode = page.alpha?.associated == true ? .premultiplied : .straight
            pixels = try PixelBuffer.make(count: page.width * page.height * 4) { base in
                truncated = try readRows(
                    page, into: ImageBufferTarget(base, bytesPerRow: page.width * 4),
                    allowsTruncatedData: options.allowsTruncatedData)
            }
        } else {
            (pixels, alphaMode) = try decodeWithRGBAImage(page)
        }
        return RasterImage(
            validatedWidth: page.width, height: page.height, bytesPerRow: page.width * 4,
            frames: [.init(pixels: pixels)], alphaMode: alphaMode, loopCount: 1, orientation: page.orientation,
            iccProfile: page.iccProfile, format: .tiff, hasAlpha: page.alpha != nil || truncated)
    }

    /// Reads the selected page, which the decoder's own path handles (`page.color` is
    /// set), into `target` as RGBA rows. Returns whether the data ended early (allowed
    /// only with `allowsTruncatedData`; the missing rows are then transparent).
    func readRows(_ page: TIFFPage, into target: RowTarget, allowsTruncatedData: Bool) throws -> Bool {
        guard let color = page.color else {
            throw ImageDecodingError(.unsupported, format: .tiff, message: "layout not read row by row")
        }
        let converter = try TIFFRowConverter(page: page, color: color, colormap: colormap(page))
        if Int32(page.photometric) == PHOTOMETRIC_YCBCR { _ = ctiff_set_jpeg_color_mode_rgb(tiff) }
        var bands = try TIFFBandReader(file: self, page: page, limits: limits)
        var y = 0
        while y < page.height {
            let band: TIFFBandReader.Band
            do {
                band = try bands.readBand(startingAt: y)
            } catch let error as ImageDecodingError where allowsTruncatedData && error.reason == .truncated {
                target.fillMissing(y, count: page.height - y)
                return true
            }
            for row in 0..<band.rows {
                converter.convert(band.planes(row), into: target.rows(y + row, count: 1))
                target.commit(y + row, count: 1)
            }
            y += band.rows
        }
        return false
    }

    private func colormap(_ page: TIFFPage) -> [UInt8]? {
        guard case .palette = page.color else { return nil }
        var red: UnsafePointer<UInt16>? = nil
        var green: UnsafePointer<UInt16>? = nil
        var blue: UnsafePointer<UInt16>? = nil
        guard ctiff_get_colormap(tiff, &red, &green, &blue) == 1, let red, let green, let blue else { return nil }
        let count = 1 << page.bitsPerSample
        // Entries are 16-bit; libtiff and other readers take the high byte. Some old
        // writers store 8-bit values instead: a map without any value over 255 is read as such.
        let eightBit = (0..<count).allSatisfy { red[$0] < 256 && green[$0] < 256 && blue[$0] < 256 }
        var map = [UInt8](repeating: 0, count: 256 * 3)
        for i in 0..<count {
            for (channel, values) in [red, green, blue].enumerated() {
                map[i * 3 + channel] = UInt8(truncatingIfNeeded: eightBit ? values[i] : values[i] >> 8)
            }
        }
        return map
    }

    /// Layouts the own path does not read: libtiff converts them (its output is premultiplied).
    private func decodeWithRGBAImage(_ page: TIFFPage) throws -> ([UInt8], AlphaMode) {
        var image = TIFFRGBAImage()
        var message = [CChar](repeating: 0, count: 1024)
        guard TIFFRGBAImageOK(tiff, &message) == 1, TIFFRGBAImageBegin(&image, tiff, 0, &message) == 1 else {
            let text = CString.decode(message)
            throw ImageDecodingError(.unsupported, format: .tiff, message: "libtiff: \(text)")
        }
        defer { TIFFRGBAImageEnd(&image) }
        // Rows as stored: the orientation stays metadata.
        image.req_orientation = UInt16(ORIENTATION_TOPLEFT)
        image.orientation = UInt16(ORIENTATION_TOPLEFT)
        let hasAlpha = image.alpha != 0
        let pixels = try PixelBuffer.make(count: page.width * page.height * 4) { base in
            // ABGR words are R, G, B, A bytes on a little-endian machine.
            let status = base.withMemoryRebound(to: UInt32.self, capacity: page.width * page.height) {
                TIFFRGBAImageGet(&image, $0, UInt32(page.width), UInt32(page.height))
            }
            guard status == 1 else { throw failure(.corrupt) }
            #if _endian(big)
            for i in 0..<page.width * page.height {
                (base + i * 4).withMemoryRebound(to: UInt32.self, capacity: 1) { $0.pointee = $0.pointee.byteSwapped }
            }
            #endif
        }
        return (pixels, hasAlpha ? .premultiplied : .straight)
    }

    // MARK: Raw access for TIFFBandReader

    var isTiled: Bool { TIFFIsTiled(tiff) != 0 }
    var tileSize: Int { Int(TIFFTileSize(tiff)) }

    func uint32Tag(_ tag: Int32) -> Int? {
        var value: UInt32 = 0
        return ctiff_get_uint32_defaulted(tiff, UInt32(tag), &value) == 1 ? Int(value) : nil
    }

    func readStrip(_ index: Int, into buffer: UnsafeMutableRawPointer, size: Int) throws -> Int {
        try checkBounds(of: index)
        let got = TIFFReadEncodedStrip(tiff, UInt32(index), buffer, tmsize_t(size))
        guard got >= 0 else { throw stripFailure(index) }
        return Int(got)
    }

    /// Row `row` of `plane`, read through the strip's codec a row at a time.
    func readScanline(_ row: Int, plane: Int, into buffer: UnsafeMutableRawPointer) throws {
        let strip = Int(TIFFComputeStrip(tiff, UInt32(row), UInt16(plane)))
        try checkBounds(of: strip)
        guard TIFFReadScanline(tiff, buffer, UInt32(row), UInt16(plane)) == 1 else { throw stripFailure(strip) }
    }

    func readTile(x: Int, y: Int, plane: Int, into buffer: UnsafeMutableRawPointer, size: Int) throws {
        let index = TIFFComputeTile(tiff, UInt32(x), UInt32(y), 0, UInt16(plane))
        try checkBounds(of: Int(index))
        guard TIFFReadEncodedTile(tiff, index, buffer, tmsize_t(size)) >= 0 else { throw stripFailure(Int(index)) }
    }

    /// Whether a strip or tile's bytes lie past the end of the data.
    private func extendsPastEnd(_ index: Int) -> Bool {
        let offset = TIFFGetStrileOffset(tiff, UInt32(index))
        let count = TIFFGetStrileByteCount(tiff, UInt32(index))
        let (end, overflow) = offset.addingReportingOverflow(count)
        return overflow || end > UInt64(reader.size)
    }

    /// A strip or tile that claims bytes past the end of the data is truncated, even
    /// where libtiff would decode what is there.
    private func checkBounds(of index: Int) throws {
        guard extendsPastEnd(index) else { return }
        throw ImageDecodingError(
            .truncated, format: .tiff, message: "strip or tile \(index) extends past the end of the data")
    }

    private func stripFailure(_ index: Int) -> ImageDecodingError {
        if extendsPastEnd(index) { handle.pointee.reached_end_of_data = 1 }
        return failure(.corrupt)
    }
}
