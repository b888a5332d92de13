import CJPEG
import ImageLoaderSupport

/// JPEG through libjpeg-turbo: baseline and progressive, every subsampling, restart
/// markers, grayscale, CMYK and Adobe-inverted YCCK (converted to RGB here), with
/// the EXIF orientation and the ICC profile (APP2, across chunks) read.
enum JPEGDecoder: FormatDecoder {
    static let format = ImageFormat.jpeg

    static func info(_ reader: ByteReader, limits: DecodingLimits) throws -> ImageInfo {
        let session = try JPEGReadSession(reader, limits: limits)
        try session.readHeader()
        return info(session, session.metadata())
    }

    /// The header's facts, from a session that has read it.
    static func info(
        _ session: JPEGReadSession, _ metadata: (orientation: Orientation, iccProfile: [UInt8]?)
    ) -> ImageInfo {
        ImageInfo(
            format: .jpeg, width: session.imageWidth, height: session.imageHeight, hasAlpha: false,
            orientation: metadata.orientation, iccProfile: metadata.iccProfile, isGrayscale: session.isGrayscale)
    }

    static func decode(_ reader: ByteReader, options: DecodingOptions) throws -> RasterImage {
        try decode(reader, options: options) { _, _, _ in 1 }
    }

    /// Decodes at 1/`scaleDenominator` of the size (1, 2, 4 or 8), scaled in the DCT;
    /// the denominator is chosen from the header (width, height, orientation), read once.
    static func decode(
        _ reader: ByteReader, options: DecodingOptions,
        scaleDenominator: (_ width: Int, _ height: Int, _ orientation: Orientation) throws -> Int
    ) throws -> RasterImage {
        if case .index(let n) = options.frames, n != 0 {
            throw ImageDecodingError(.frameOutOfRange(index: n, count: 1), format: .jpeg)
        }
        let session = try JPEGReadSession(reader, limits: options.limits)
        try session.readHeader()
        try options.limits.check(width: session.imageWidth, height: session.imageHeight, format: .jpeg)
        let metadata = session.metadata()
        let denominator = try scaleDenominator(session.imageWidth, session.imageHeight, metadata.orientation)
        // A progressive file at 1/8 from only the scans it needs; else libjpeg.
        let eighth =
            denominator == 8 && !options.allowsTruncatedData
            ? try eighth(reader, session: session, limits: options.limits) : nil
        if eighth == nil {
            try session.start(scaleDenominator: denominator, allowsTruncatedData: options.allowsTruncatedData)
        }
        let (width, height) =
            eighth.map { ($0.image.outputWidth, $0.image.outputHeight) } ?? (session.outputWidth, session.outputHeight)
        let bytesPerRow = width * 4
        let pixels = try PixelBuffer.make(count: bytesPerRow * height) { base in
            let target = ImageBufferTarget(base, bytesPerRow: bytesPerRow)
            if let eighth {
                eighth.image.writeRows(into: target, colorSpace: eighth.colorSpace)
            } else {
                try readRows(
                    reader, session: session, scale: denominator, into: target, limits: options.limits,
                    allowsTruncatedData: options.allowsTruncatedData)
            }
        }
        return RasterImage(
            validatedWidth: width, height: height, bytesPerRow: bytesPerRow, frames: [.init(pixels: pixels)],
            alphaMode: .straight, loopCount: 1, orientation: metadata.orientation,
            iccProfile: metadata.iccProfile, format: .jpeg, hasAlpha: false)
    }
}

extension JPEGDecoder {
    /// Every row of `session` (started at 1/`scale`, no rows read) into `target`: in
    /// strips on several cores where the file allows (``strips(_:session:scale:into:limits:)``,
    /// never for data allowed to end early), the rest by `session` itself.
    static func readRows(
        _ reader: ByteReader, session: JPEGReadSession, scale: Int, into target: any RowTarget,
        limits: DecodingLimits, allowsTruncatedData: Bool
    ) throws {
        let given =
            allowsTruncatedData ? 0 : try strips(reader, session: session, scale: scale, into: target, limits: limits)
        guard given < session.outputHeight else { return }
        try session.readRows(into: target, allowsTruncatedData: allowsTruncatedData, from: given)
    }

    /// Decodes a large baseline file with restart markers in strips on the cores
    /// ``ResizeParallelism`` allows (``JPEGStrips``), at 1/`scale`, into `target`.
    /// Returns the rows given to `target` (from the first): all of them, or fewer, for
    /// `session` (started at that scale, no rows read) to decode the rest, when the file
    /// does not take that path, only one core may be used or a strip fails.
    static func strips(
        _ reader: ByteReader, session: JPEGReadSession, scale: Int, into target: any RowTarget,
        limits: DecodingLimits
    ) throws -> Int {
        let cores = ResizeParallelism.cores
        guard cores > 1, session.stripLayout != nil, JPEGStrips.mayDecode(scale: scale, into: target) else {
            return 0
        }
        return try reader.withContiguousBytes { bytes in
            guard let strips = JPEGStrips.plan(bytes, session: session) else { return 0 }
            return strips.decode(
                scale: scale, width: session.outputWidth, height: session.outputHeight, into: target, cores: cores,
                limits: limits)
        }
    }

    /// A progressive file's 1/8 image from only the scans that size needs
    /// (``JPEGEighthImage``), with how its components make colour; `nil` when that path
    /// does not read the file, which libjpeg then decodes as it always did.
    static func eighth(_ reader: ByteReader, session: JPEGReadSession, limits: DecodingLimits) throws
        -> (image: JPEGEighthImage, colorSpace: JPEGEighthImage.ColorSpace)?
    {
        guard let colorSpace = session.eighthColorSpace else { return nil }
        return try reader.withContiguousBytes { bytes in
            guard
                let eighth = JPEGEighthImage.read(
                    bytes, maxScans: limits.maxProgressiveScans, maxWorkingBytes: limits.maxWorkingBytes),
                eighth.width == session.imageWidth, eighth.height == session.imageHeight,
                eighth.components.count == (colorSpace == .grey ? 1 : 3)
            else { return nil }
            return (eighth, colorSpace)
        }
    }
}

/// One libjpeg decompression: owns the C state and turns its failures into ``ImageDecodingError``.
final class JPEGReadSession {
    private let state: UnsafeMutablePointer<cjpeg_decoder>
    private let reader: ByteReader
    private var inputBuffer: UnsafeMutableRawBufferPointer?
    private static let inputBufferSize = 64 << 10
    private let limits: DecodingLimits

    init(_ reader: ByteReader, limits: DecodingLimits) throws {
        self.reader = reader
        self.limits = limits
        state = .allocate(capacity: 1)
        let read: cjpeg_read_fn = { context, buffer, capacity in
            size_t(ByteReader.from(context).read(into: buffer!, count: Int(capacity)))
        }
        let status: Int32
        if let memory = reader.memory {
            status = cjpeg_decoder_init(
                state, memory.baseAddress!.assumingMemoryBound(to: UInt8.self), memory.count, nil, nil, nil, 0)
        } else {
            let buffer = UnsafeMutableRawBufferPointer.allocate(
                byteCount: JPEGReadSession.inputBufferSize, alignment: 16)
            inputBuffer = buffer
            status = cjpeg_decoder_init(
                state, nil, 0, read, reader.context, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self),
                buffer.count)
        }
        state.pointee.max_scans = Int32(clamping: limits.maxProgressiveScans)
        // On failure deinit releases the state and buffer: every stored property is set.
        guard status == 0 else { throw failure() }
        // libjpeg's own bound on its memory pool: past it, a full-image buffer fails
        // ("backing store not supported") instead of being allocated.
        state.pointee.cinfo.mem.pointee.max_memory_to_use = limits.maxWorkingBytes
    }

    deinit {
        cjpeg_decoder_destroy(state)
        state.deallocate()
        inputBuffer?.deallocate()
    }

    var imageWidth: Int { Int(state.pointee.cinfo.image_width) }
    var imageHeight: Int { Int(state.pointee.cinfo.image_height) }
    var outputWidth: Int { Int(state.pointee.cinfo.output_width) }
    var outputHeight: Int { Int(state.pointee.cinfo.output_height) }
    var reachedEndOfData: Bool { state.pointee.reached_end_of_data != 0 }

    /// Whether the file has one component (grey).
    var isGrayscale: Bool { state.pointee.cinfo.jpeg_color_space == JCS_GRAYSCALE }

    /// How a progressive file's DC scans make colour (``JPEGEighthImage``), as libjpeg
    /// decided it from the header; `nil` when that path does not read the file.
    var eighthColorSpace: JPEGEighthImage.ColorSpace? {
        let cinfo = state.pointee.cinfo
        guard cinfo.progressive_mode != 0, cinfo.arith_code == 0, cinfo.data_precision == 8 else { return nil }
        switch (cinfo.jpeg_color_space, cinfo.num_components) {
        case (JCS_GRAYSCALE, 1): return .grey
        case (JCS_YCbCr, 3): return .ycbcr
        case (JCS_RGB, 3): return .rgb
        default: return nil
        }
    }

    /// A file of one sequential Huffman-coded scan of every component (8-bit, not CMYK)
    /// with restart markers: its MCUs across and down, an MCU's height in pixels, and
    /// the MCUs in a restart interval (``JPEGStrips``); `nil` for any other file.
    var stripLayout: (mcusWide: Int, mcusHigh: Int, mcuHeight: Int, interval: Int)? {
        let cinfo = state.pointee.cinfo
        guard cinfo.progressive_mode == 0, cinfo.arith_code == 0, cinfo.data_precision == 8, !isCMYK,
            cinfo.restart_interval > 0, cinfo.num_components >= 1, cinfo.comps_in_scan == cinfo.num_components,
            imageWidth > 0, imageHeight > 0
        else { return nil }
        let interval = Int(cinfo.restart_interval)
        guard cinfo.comps_in_scan > 1 else { return ((imageWidth + 7) / 8, (imageHeight + 7) / 8, 8, interval) }
        let (mcuWidth, mcuHeight) = (8 * Int(cinfo.max_h_samp_factor), 8 * Int(cinfo.max_v_samp_factor))
        guard mcuWidth > 0, mcuHeight > 0 else { return nil }
        return (
            (imageWidth + mcuWidth - 1) / mcuWidth, (imageHeight + mcuHeight - 1) / mcuHeight, mcuHeight, interval
        )
    }

    /// The warnings libjpeg gave (damaged data it decoded around, for one).
    var warnings: Int { Int(state.pointee.warnings) }

    /// The libjpeg colour space of the file.
    var isCMYK: Bool {
        let space = state.pointee.cinfo.jpeg_color_space
        return space == JCS_CMYK || space == JCS_YCCK
    }

    func failure() -> ImageDecodingError {
        if state.pointee.exceeded_max_scans != 0 {
            return ImageDecodingError(.tooManyScans(limit: Int(state.pointee.max_scans)), format: .jpeg)
        }
        let message = CString.decode(&state.pointee.message)
        let reason: ImageDecodingError.Reason =
            reachedEndOfData ? .truncated : .corrupt
        return ImageDecodingError(reason, format: .jpeg, message: "libjpeg: \(message)")
    }

    func readHeader() throws {
        guard cjpeg_read_header(state) == 0 else { throw failure() }
    }

    /// Chooses the output: RGBA straight from libjpeg, or CMYK converted here.
    /// `scaleDenominator` asks libjpeg's DCT scaling for 1/2, 1/4 or 1/8 size.
    func start(scaleDenominator: Int = 1, keepingCMYK: Bool = false, allowsTruncatedData: Bool = false) throws {
        try checkCoefficientBuffer(allowsTruncatedData: allowsTruncatedData)
        keepsCMYK = keepingCMYK && isCMYK
        state.pointee.cinfo.out_color_space = isCMYK ? JCS_CMYK : JCS_EXT_RGBA
        state.pointee.cinfo.scale_num = 1
        state.pointee.cinfo.scale_denom = UInt32(scaleDenominator)
        guard cjpeg_start_decompress(state) == 0 else { throw failure() }
        guard state.pointee.cinfo.output_components == 4 else {
            throw ImageDecodingError(.unsupported, format: .jpeg, message: "unexpected output layout")
        }
    }

    /// A progressive (or multi-scan) file is decoded through a buffer of every DCT
    /// coefficient of the image, 128 bytes a block, which libjpeg allocates (and
    /// zeroes) when decompression starts, before reading a single scan. It is checked
    /// here, from the header: against the working-memory limit, and against the data,
    /// since the first scan spends at least one bit on every block of a component, so
    /// data shorter than that ends before the image does.
    private func checkCoefficientBuffer(allowsTruncatedData: Bool) throws {
        let cinfo = state.pointee.cinfo
        let count = Int(cinfo.num_components)
        guard cinfo.progressive_mode != 0 || Int(cinfo.comps_in_scan) < count, count > 0,
            let components = cinfo.comp_info
        else { return }
        var bytes: Int? = 0
        var fewestBlocks = Int.max
        for index in 0..<count {
            let component = components[index]
            func roundedUp(_ value: JDIMENSION, _ factor: Int32) -> Int? {
                let factor = max(1, Int(factor))
                return Checked.add(Int(value), factor - 1).map { $0 / factor * factor }
            }
            let blocks = roundedUp(component.width_in_blocks, component.h_samp_factor)
                .flatMap { width in
                    roundedUp(component.height_in_blocks, component.v_samp_factor).flatMap {
                        Checked.multiply(width, $0)
                    }
                }
            fewestBlocks = min(fewestBlocks, blocks ?? .max)
            bytes = bytes.flatMap { total in
                blocks.flatMap { Checked.multiply($0, 128) }.flatMap { Checked.add(total, $0) }
            }
        }
        try limits.checkWorking(bytes: bytes, format: .jpeg, what: "progressive JPEG coefficients")
        if !allowsTruncatedData, reader.size < fewestBlocks / 8 {
            throw ImageDecodingError(
                .truncated, format: .jpeg,
                message: "\(reader.size) bytes cannot hold the first scan of \(fewestBlocks) blocks")
        }
    }

    /// Reads up to `count` rows, the first at `first`, each `bytesPerRow` after the last.
    /// Returns how many arrived; fewer than asked means the image is complete.
    func readRows(_ first: UnsafeMutablePointer<UInt8>, count: Int, bytesPerRow: Int) throws -> Int {
        var rows = (0..<count).map { Optional(first + $0 * bytesPerRow) }
        var done = 0
        while done < count && Int(state.pointee.cinfo.output_scanline) < outputHeight {
            var got: UInt32 = 0
            let status = rows.withUnsafeMutableBufferPointer { rows in
                cjpeg_read_scanlines(state, rows.baseAddress! + done, UInt32(count - done), &got)
            }
            guard status == 0 else { throw failure() }
            if got == 0 { break }
            if isCMYK && !keepsCMYK {
                convertCMYK(first + done * bytesPerRow, rows: Int(got), bytesPerRow: bytesPerRow)
            }
            done += Int(got)
        }
        return done
    }

    /// Reads the whole output into `target`, from row `first` on (the rows before it
    /// read and dropped: `target` has them already). Data that ends early is an error
    /// unless allowed (libjpeg then makes up flat colour for the rest).
    func readRows(into target: RowTarget, allowsTruncatedData: Bool, from first: Int = 0) throws {
        if first > 0 {
            let scratch = UnsafeMutablePointer<UInt8>.allocate(capacity: outputWidth * 4)
            defer { scratch.deallocate() }
            for _ in 0..<min(first, outputHeight) {
                guard try readRows(scratch, count: 1, bytesPerRow: outputWidth * 4) == 1 else { break }
            }
        }
        var y = Int(state.pointee.cinfo.output_scanline)
        while y < outputHeight {
            let count = min(16, target.maxRows, outputHeight - y)
            let got = try readRows(target.rows(y, count: count), count: count, bytesPerRow: target.bytesPerRow)
            if got == 0 { break }
            target.commit(y, count: got)
            y += got
        }
        if y < outputHeight { target.fillMissing(y, count: outputHeight - y) }
        if reachedEndOfData && !allowsTruncatedData {
            throw ImageDecodingError(.truncated, format: .jpeg, message: "libjpeg: premature end of data")
        }
    }

    /// Whether CMYK rows are handed over as stored (for a colour-managed conversion)
    /// instead of converted to RGB here.
    private(set) var keepsCMYK = false

    /// Adobe files (and every YCCK file) store the inks inverted.
    var cmykIsInverted: Bool { state.pointee.cinfo.saw_Adobe_marker != 0 }

    /// CMYK to RGB in place, `(255 - C) * (255 - K) / 255`. Adobe files (and every
    /// YCCK file) store the inks inverted, which libjpeg leaves as it found them.
    private func convertCMYK(_ base: UnsafeMutablePointer<UInt8>, rows: Int, bytesPerRow: Int) {
        let inverted = cmykIsInverted
        for y in 0..<rows {
            ColorConversion.cmykToRGBA(base + y * bytesPerRow, count: outputWidth, inverted: inverted)
        }
    }

    /// The orientation from EXIF (APP1) and the ICC profile reassembled from its APP2
    /// chunks, as the shim's marker readers kept them.
    func metadata() -> (orientation: Orientation, iccProfile: [UInt8]?) {
        let decoder = state.pointee
        var orientation: Orientation?
        if let exif = decoder.exif {
            orientation = EXIF.orientation(in: UnsafeBufferPointer(start: exif, count: decoder.exif_length))
        }
        var profile: [UInt8]?
        let count = Int(decoder.icc_declared_count)
        if decoder.icc_inconsistent == 0, count > 0 {
            withUnsafeBytes(of: decoder.icc_chunks) { chunks in
                withUnsafeBytes(of: decoder.icc_lengths) { lengths in
                    let pointers = chunks.bindMemory(to: UnsafeMutablePointer<UInt8>?.self)
                    let sizes = lengths.bindMemory(to: Int.self)
                    guard (1...count).allSatisfy({ pointers[$0] != nil }) else { return }
                    var joined: [UInt8] = []
                    joined.reserveCapacity((1...count).reduce(0) { $0 + sizes[$1] })
                    for sequence in 1...count {
                        joined += UnsafeBufferPointer(start: pointers[sequence], count: sizes[sequence])
                    }
                    profile = joined
                }
            }
        }
        return (orientation ?? .up, profile)
    }
}
