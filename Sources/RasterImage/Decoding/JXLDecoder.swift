import CJXL
import ImageLoaderSupport

/// JPEG XL through libjxl: lossy (VarDCT) and lossless (modular), recompressed JPEGs,
/// codestreams and containers, stills and animations (coalesced frames with durations
/// and a loop count). libjxl renders 8-bit RGBA itself, rounding from its float
/// pipeline; alpha comes straight. The orientation field is kept, not applied, and
/// given as the image's ``Orientation``. Colour: none for sRGB, the encoding as a
/// profile (``ColorSignal`` for PQ and HLG), or the file's ICC profile.
///
/// Thumbnails use libjxl's progressive detail: a VarDCT image's DC (1/8 of each side)
/// is rendered as soon as it is decoded, and the rest of the file is never decoded,
/// when 1/8 still leaves the resize twice the thumbnail (as JPEG's DCT scaling does).
///
/// Everything libjxl allocates through its memory manager is counted and capped at
/// ``DecodingLimits/maxWorkingBytes``; its image planes, which libjxl 0.7 allocates
/// on its own, are estimated from the header before it starts (see
/// ``workingBytesPerPixel(extraChannels:animated:)``). It runs on the calling thread,
/// and its failure traces are kept off standard error (``LibjxlDiagnostics``).
enum JXLDecoder: FormatDecoder {
    static let format = ImageFormat.jxl

    static func info(_ reader: ByteReader, limits: DecodingLimits) throws -> ImageInfo {
        try LibjxlDiagnostics.decoding {
            try reader.withContiguousBytes { bytes in try info(bytes, limits: limits) }
        }
    }

    /// The header's facts and the frame count (an animation's frame headers are read, not its pixels).
    static func info(_ bytes: UnsafeRawBufferPointer, limits: DecodingLimits) throws -> ImageInfo {
        let session = try JXLSession(
            bytes, limits: limits,
            events: JXL_DEC_BASIC_INFO.rawValue | JXL_DEC_COLOR_ENCODING.rawValue | JXL_DEC_FRAME.rawValue)
        var frames = 0
        while let event = try session.next() {
            if event == JXL_DEC_FRAME {
                frames += 1
                guard frames <= limits.maxFrames else {
                    throw ImageDecodingError(.tooManyFrames(limit: limits.maxFrames), format: .jxl)
                }
                // A still image is known to be one frame without reading further.
                if !session.isAnimated { break }
            }
        }
        let info = session.basicInfo
        return ImageInfo(
            format: .jxl, width: Int(info.xsize), height: Int(info.ysize), frameCount: max(1, frames),
            hasAlpha: info.alpha_bits > 0, orientation: session.orientation,
            loopCount: session.isAnimated ? Int(info.animation.num_loops) : 1, iccProfile: session.iccProfile)
    }

    static func decode(_ reader: ByteReader, options: DecodingOptions) throws -> RasterImage {
        try LibjxlDiagnostics.decoding {
            try reader.withContiguousBytes { bytes in
                try decode(bytes, limits: options.limits, frames: options.frames, progressive: false)
            }
        }
    }

    static func thumbnail(_ reader: ByteReader, _ request: ThumbnailRequest) throws -> RasterImage {
        try LibjxlDiagnostics.decoding { try shrinkingThumbnail(reader, request) }
    }

    private static func shrinkingThumbnail(_ reader: ByteReader, _ request: ThumbnailRequest) throws -> RasterImage {
        try reader.withContiguousBytes { bytes in
            // Options chosen from the header need the frame count: a read of the frame headers first.
            let options = try request.options(try info(bytes, limits: request.limits))
            guard case .first = options.frames else {
                return try decode(bytes, limits: request.limits, frames: options.frames, progressive: false)
                    .thumbnail(limits: request.limits, options: options)
            }
            // The DC (1/8) suffices when it leaves at least twice the thumbnail on both sides.
            let probe = try JXLSession(bytes, limits: request.limits, events: JXL_DEC_BASIC_INFO.rawValue)
            _ = try probe.next()
            let (width, height) = (Int(probe.basicInfo.xsize), Int(probe.basicInfo.ysize))
            let geometry = try ThumbnailGeometry(
                sourceWidth: width, sourceHeight: height, orientation: probe.orientation, options: options,
                limits: request.limits)
            let factor = ShrinkFactor.choose(
                width: width, height: height, target: geometry, mode: options.shrinkOnLoad, choices: [8])
            let image = try decode(bytes, limits: request.limits, frames: .first, progressive: factor == 8)
            return try image.thumbnail(limits: request.limits, options: options)
        }
    }

    /// Decodes the frames `frames` selects; with `progressive`, only as far as the
    /// first frame's DC where the file has one (the image keeps its full size: libjxl
    /// upsamples the DC into it).
    static func decode(
        _ bytes: UnsafeRawBufferPointer, limits: DecodingLimits, frames selection: FrameSelection, progressive: Bool
    ) throws -> RasterImage {
        var events =
            JXL_DEC_BASIC_INFO.rawValue | JXL_DEC_COLOR_ENCODING.rawValue | JXL_DEC_FRAME.rawValue
            | JXL_DEC_FULL_IMAGE.rawValue
        if progressive { events |= JXL_DEC_FRAME_PROGRESSION.rawValue }
        let session = try JXLSession(bytes, limits: limits, events: events)
        if progressive { JxlDecoderSetProgressiveDetail(session.decoder, kDC) }
        var frames: [RasterImage.Frame] = []
        var index = -1
        var duration = Duration.zero
        var buffer: UnsafeMutableRawBufferPointer?
        defer { buffer?.deallocate() }
        let lastNeeded = selection.lastNeededIndex ?? Int.max
        var frameBytes = 0
        decoding: while let event = try session.next() {
            switch event {
            case JXL_DEC_BASIC_INFO:
                let info = session.basicInfo
                let (width, height) = (Int(info.xsize), Int(info.ysize))
                try limits.check(width: width, height: height, format: .jxl)
                frameBytes = width * height * 4
                // libjxl's own planes and caches, checked before it allocates them.
                let perPixel = workingBytesPerPixel(
                    extraChannels: Int(info.num_extra_channels), animated: info.have_animation != 0)
                try limits.checkWorking(
                    bytes: Checked.multiply(width * height, perPixel), format: .jxl, what: "libjxl's image planes")
            case JXL_DEC_FRAME:
                index += 1
                guard index < limits.maxFrames else {
                    throw ImageDecodingError(.tooManyFrames(limit: limits.maxFrames), format: .jxl)
                }
                try limits.checkTotal(
                    pixels: Checked.multiply(index + 1, frameBytes / 4), format: .jxl)
                if index > lastNeeded { break decoding }
                var header = JxlFrameHeader()
                if JxlDecoderGetFrameHeader(session.decoder, &header) == JXL_DEC_SUCCESS, session.isAnimated {
                    let info = session.basicInfo.animation
                    let milliseconds =
                        info.tps_numerator == 0
                        ? 0 : Double(header.duration) * 1000 * Double(info.tps_denominator) / Double(info.tps_numerator)
                    duration = .milliseconds(Int(min(max(milliseconds, 0), 86_400_000)))
                }
                // Frames before the one asked for are decoded too (later ones may build on
                // them), into the one buffer; only returned frames count as output.
                if selection.returns(index) {
                    try limits.check(frames: frames.count + 1, frameBytes: frameBytes, format: .jxl)
                }
            case JXL_DEC_NEED_IMAGE_OUT_BUFFER:
                var format = JXLSession.pixelFormat
                var size = 0
                guard JxlDecoderImageOutBufferSize(session.decoder, &format, &size) == JXL_DEC_SUCCESS,
                    size == frameBytes
                else {
                    throw ImageDecodingError(.corrupt, format: .jxl, message: "libjxl: unexpected buffer size")
                }
                if buffer == nil { buffer = .allocate(byteCount: size, alignment: 64) }
                guard
                    JxlDecoderSetImageOutBuffer(session.decoder, &format, buffer!.baseAddress, size) == JXL_DEC_SUCCESS
                else {
                    throw ImageDecodingError(.corrupt, format: .jxl, message: "libjxl: cannot set the output")
                }
            case JXL_DEC_FRAME_PROGRESSION:
                guard JxlDecoderFlushImage(session.decoder) == JXL_DEC_SUCCESS, let buffer else { continue }
                frames.append(.init(pixels: Array(buffer.bindMemory(to: UInt8.self))))
                break decoding
            case JXL_DEC_FULL_IMAGE:
                if selection.returns(index), let buffer {
                    frames.append(.init(pixels: Array(buffer.bindMemory(to: UInt8.self)), duration: duration))
                }
                if index >= lastNeeded { break decoding }
            default:
                break
            }
        }
        let info = session.basicInfo
        guard !frames.isEmpty else {
            if case .index(let n) = selection {
                throw ImageDecodingError(.frameOutOfRange(index: n, count: index + 1), format: .jxl)
            }
            throw ImageDecodingError(.truncated, format: .jxl, message: "no frame was decoded")
        }
        let width = Int(info.xsize)
        return RasterImage(
            validatedWidth: width, height: Int(info.ysize), bytesPerRow: width * 4, frames: frames,
            alphaMode: .straight, loopCount: frames.count > 1 ? Int(info.animation.num_loops) : 1,
            orientation: session.orientation, iccProfile: session.iccProfile, format: .jxl,
            hasAlpha: info.alpha_bits > 0)
    }
}

extension JXLDecoder {
    /// What libjxl 0.7 holds besides the output while it decodes a frame, per pixel,
    /// as measured (peak resident size less the output buffer, Debian's libjxl 0.7.0):
    /// a frame of colour alone is rendered group by group straight into the output
    /// (2.4 to 2.9 bytes a pixel for lossy and lossless photos of 24 to 100
    /// megapixels); extra channels (alpha) or an animation's blending make it keep
    /// whole float planes (31 bytes a pixel for a 24-megapixel lossy RGBA).
    static func workingBytesPerPixel(extraChannels: Int, animated: Bool) -> Int {
        extraChannels > 0 || animated ? 32 : 3
    }
}

/// One libjxl decoder over a whole file, with a counting memory manager; events come
/// from ``next()``. Lives for one decode.
final class JXLSession {
    let decoder: OpaquePointer
    private let memory: UnsafeMutablePointer<cjxl_memory>
    private(set) var basicInfo = JxlBasicInfo()
    private(set) var iccProfile: [UInt8]?
    private let limit: Int

    /// RGBA, 8 bits a sample, in the machine's byte order, rows packed.
    static let pixelFormat = JxlPixelFormat(
        num_channels: 4, data_type: JXL_TYPE_UINT8, endianness: JXL_NATIVE_ENDIAN, align: 0)

    var isAnimated: Bool { basicInfo.have_animation != 0 }
    var orientation: Orientation { Orientation(tagValue: Int(basicInfo.orientation.rawValue)) }

    init(_ bytes: UnsafeRawBufferPointer, limits: DecodingLimits, events: UInt32) throws {
        memory = .allocate(capacity: 1)
        // The cap leaves libjxl's own state (the decoder, its tables: well under a
        // megabyte) besides the working memory the limits allow.
        memory.initialize(
            to: cjxl_memory(
                limit: Checked.saturatingAdd(limits.maxWorkingBytes, 1 << 20), in_use: 0, peak: 0, refused: 0))
        limit = limits.maxWorkingBytes
        var manager = cjxl_counting_manager(memory)
        guard let decoder = JxlDecoderCreate(&manager) else {
            memory.deallocate()
            throw ImageDecodingError(.unsupported, format: .jxl, message: "libjxl: cannot create a decoder")
        }
        self.decoder = decoder
        // Pixels as stored, with the orientation as metadata; straight alpha.
        guard JxlDecoderSubscribeEvents(decoder, Int32(bitPattern: events)) == JXL_DEC_SUCCESS,
            JxlDecoderSetKeepOrientation(decoder, 1) == JXL_DEC_SUCCESS,
            JxlDecoderSetUnpremultiplyAlpha(decoder, 1) == JXL_DEC_SUCCESS,
            JxlDecoderSetInput(decoder, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
                == JXL_DEC_SUCCESS
        else {
            // Every property is set: deinit releases the decoder and the counters.
            throw ImageDecodingError(.unsupported, format: .jxl, message: "libjxl: cannot configure the decoder")
        }
    }

    /// Whether the input was closed after libjxl asked for more: from then on an error
    /// means the file ends early.
    private var inputClosed = false

    deinit {
        JxlDecoderDestroy(decoder)
        memory.deallocate()
    }

    /// The next event: basic info and colour are read here; `nil` at the end.
    func next() throws -> JxlDecoderStatus? {
        var status = JxlDecoderProcessInput(decoder)
        // The input is left open so that libjxl says when it needs more than the file
        // holds; a file whose last box runs to its end needs the close to finish.
        if status == JXL_DEC_NEED_MORE_INPUT && !inputClosed {
            JxlDecoderCloseInput(decoder)
            inputClosed = true
            status = JxlDecoderProcessInput(decoder)
        }
        switch status {
        case JXL_DEC_SUCCESS:
            return nil
        case JXL_DEC_ERROR:
            if memory.pointee.refused != 0 {
                throw ImageDecodingError(
                    .tooMuchWorkingMemory(bytes: limit + 1, limit: limit), format: .jxl,
                    message: "libjxl's allocations")
            }
            throw ImageDecodingError(
                inputClosed ? .truncated : .corrupt, format: .jxl,
                message: inputClosed ? "libjxl: the data ends early" : "libjxl: decoding error")
        case JXL_DEC_NEED_MORE_INPUT:
            throw ImageDecodingError(.truncated, format: .jxl, message: "libjxl: the data ends early")
        case JXL_DEC_BASIC_INFO:
            guard JxlDecoderGetBasicInfo(decoder, &basicInfo) == JXL_DEC_SUCCESS else {
                throw ImageDecodingError(.corrupt, format: .jxl, message: "libjxl: no basic info")
            }
            return status
        case JXL_DEC_COLOR_ENCODING:
            iccProfile = colorProfile()
            return status
        default:
            return status
        }
    }

    /// No profile for sRGB, ``ColorSignal`` for encodings it knows (HDR among them),
    /// otherwise the ICC profile libjxl gives for the pixels it returns.
    private func colorProfile() -> [UInt8]? {
        var encoding = JxlColorEncoding()
        if JxlDecoderGetColorAsEncodedProfile(decoder, nil, JXL_COLOR_PROFILE_TARGET_DATA, &encoding)
            == JXL_DEC_SUCCESS,
            encoding.color_space == JXL_COLOR_SPACE_RGB
        {
            let primaries: Int? =
                switch (encoding.primaries, encoding.white_point) {
                case (JXL_PRIMARIES_SRGB, JXL_WHITE_POINT_D65): 1
                case (JXL_PRIMARIES_2100, JXL_WHITE_POINT_D65): 9
                case (JXL_PRIMARIES_P3, JXL_WHITE_POINT_D65): 12
                case (JXL_PRIMARIES_P3, JXL_WHITE_POINT_DCI): 11
                default: nil
                }
            let transfer = Int(encoding.transfer_function.rawValue)
            if let primaries, [1, 13, 8, 16, 18].contains(transfer) {
                return ColorSignal(primaries: primaries, transfer: transfer).iccProfile
            }
        }
        var size = 0
        guard JxlDecoderGetICCProfileSize(decoder, nil, JXL_COLOR_PROFILE_TARGET_DATA, &size) == JXL_DEC_SUCCESS,
            size > 0, size <= 16 << 20
        else { return nil }
        var bytes = [UInt8](repeating: 0, count: size)
        guard
            JxlDecoderGetColorAsICCProfile(decoder, nil, JXL_COLOR_PROFILE_TARGET_DATA, &bytes, size)
                == JXL_DEC_SUCCESS
        else { return nil }
        return bytes
    }
}
