import CWebP
import ImageLoaderSupport

/// WebP through libwebp: lossy, lossless and alpha stills decoded straight into the
/// output buffer; animations composited by libwebpdemux's WebPAnimDecoder; ICC
/// profile and EXIF orientation from the container. libwebp decodes whole buffers,
/// so a file source is read into memory first (bounded by the input limit).
enum WebPDecoder: FormatDecoder {
    static let format = ImageFormat.webp

    static func info(_ reader: ByteReader, limits: DecodingLimits) throws -> ImageInfo {
        try reader.withContiguousBytes { bytes in
            let features = try WebPContainer.features(bytes)
            return info(features, try WebPContainer(bytes, limits: limits))
        }
    }

    /// The facts of the bitstream's features and the container's chunks.
    static func info(_ features: WebPBitstreamFeatures, _ container: WebPContainer) -> ImageInfo {
        ImageInfo(
            format: .webp, width: container.canvasWidth ?? Int(features.width),
            height: container.canvasHeight ?? Int(features.height), frameCount: container.frameCount,
            hasAlpha: features.has_alpha != 0, orientation: container.orientation, loopCount: container.loopCount,
            iccProfile: container.iccProfile)
    }

    static func decode(_ reader: ByteReader, options: DecodingOptions) throws -> RasterImage {
        try reader.withContiguousBytes { bytes in
            // The bitstream header's size is checked before the container is parsed or anything allocated.
            let features = try WebPContainer.features(bytes)
            try options.limits.check(width: Int(features.width), height: Int(features.height), format: .webp)
            let container = try WebPContainer(bytes, limits: options.limits)
            if features.has_animation != 0 {
                return try decodeAnimation(bytes, container: container, options: options)
            }
            if case .index(let n) = options.frames, n != 0 {
                throw ImageDecodingError(.frameOutOfRange(index: n, count: 1), format: .webp)
            }
            try checkStillWorkingMemory(features, limits: options.limits)
            let (width, height) = (Int(features.width), Int(features.height))
            let bytesPerRow = width * 4
            let pixels = try PixelBuffer.make(count: bytesPerRow * height) { base in
                try decodeStill(bytes, into: base, width: width, height: height, bytesPerRow: bytesPerRow)
            }
            return RasterImage(
                validatedWidth: width, height: height, bytesPerRow: bytesPerRow, frames: [.init(pixels: pixels)],
                alphaMode: .straight, loopCount: 1, orientation: container.orientation,
                iccProfile: container.iccProfile, format: .webp, hasAlpha: features.has_alpha != 0)
        }
    }

    /// libwebp's own memory for a still image: a lossless bitstream is decoded into a
    /// full-size ARGB buffer (then scaled), a lossy one's alpha plane is a byte a pixel.
    static func checkStillWorkingMemory(_ features: WebPBitstreamFeatures, limits: DecodingLimits) throws {
        let pixels = Int(features.width) * Int(features.height)  // each side at most 16,383
        let bytes = features.format == 2 ? pixels * 4 : (features.has_alpha != 0 ? pixels : 0)
        try limits.checkWorking(bytes: bytes, format: .webp, what: "libwebp's decoding buffers")
    }

    /// Decodes a still image into `base`, scaled by libwebp when `width`/`height`
    /// are smaller than the image.
    static func decodeStill(
        _ bytes: UnsafeRawBufferPointer, into base: UnsafeMutablePointer<UInt8>, width: Int, height: Int,
        bytesPerRow: Int
    ) throws {
        var config = WebPDecoderConfig()
        guard WebPInitDecoderConfig(&config) != 0 else {
            throw ImageDecodingError(.unsupported, format: .webp, message: "libwebp version mismatch")
        }
        config.options.use_threads = 0
        _ = try WebPContainer.status(WebPGetFeatures(bytes.baseAddress, bytes.count, &config.input))
        if width != Int(config.input.width) || height != Int(config.input.height) {
            config.options.use_scaling = 1
            config.options.scaled_width = Int32(width)
            config.options.scaled_height = Int32(height)
        }
        config.output.colorspace = MODE_RGBA
        config.output.is_external_memory = 1
        config.output.u.RGBA.rgba = base
        config.output.u.RGBA.stride = Int32(bytesPerRow)
        config.output.u.RGBA.size = bytesPerRow * height
        defer { WebPFreeDecBuffer(&config.output) }
        _ = try WebPContainer.status(WebPDecode(bytes.baseAddress, bytes.count, &config))
    }

    private static func decodeAnimation(
        _ bytes: UnsafeRawBufferPointer, container: WebPContainer, options: DecodingOptions
    ) throws -> RasterImage {
        guard let width = container.canvasWidth, let height = container.canvasHeight else {
            throw ImageDecodingError(.corrupt, format: .webp, message: "animation without a canvas")
        }
        let limits = options.limits
        try limits.check(width: width, height: height, format: .webp)
        guard container.frameCount <= limits.maxFrames else {
            throw ImageDecodingError(.tooManyFrames(limit: limits.maxFrames), format: .webp)
        }
        let frameBytes = width * height * 4  // in range: the canvas passed the limits
        // WebPAnimDecoder keeps two canvases (the current one and the previous, disposed);
        // every frame it composites costs a canvas of work.
        try limits.checkWorking(bytes: Checked.multiply(frameBytes, 2), format: .webp, what: "animation canvases")
        let returned: Int
        switch options.frames {
        case .first: returned = 1
        case .all: returned = container.frameCount
        case .prefix(let n): returned = min(container.frameCount, max(1, n))
        case .index(let n):
            guard n >= 0, n < container.frameCount else {
                throw ImageDecodingError(.frameOutOfRange(index: n, count: container.frameCount), format: .webp)
            }
            returned = 1
        }
        try limits.check(frames: returned, frameBytes: frameBytes, format: .webp)

        var animationOptions = WebPAnimDecoderOptions()
        guard WebPAnimDecoderOptionsInit(&animationOptions) != 0 else {
            throw ImageDecodingError(.unsupported, format: .webp, message: "libwebp version mismatch")
        }
        animationOptions.color_mode = MODE_RGBA
        animationOptions.use_threads = 0
        var data = WebPData(bytes: bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), size: bytes.count)
        guard let decoder = WebPAnimDecoderNew(&data, &animationOptions) else {
            throw ImageDecodingError(.corrupt, format: .webp, message: "libwebp: cannot decode the animation")
        }
        defer { WebPAnimDecoderDelete(decoder) }
        var frames: [RasterImage.Frame] = []
        var previousTimestamp = 0
        var index = 0
        let lastNeeded = options.frames.lastNeededIndex ?? Int.max
        while index <= lastNeeded, WebPAnimDecoderHasMoreFrames(decoder) != 0 {
            try limits.checkTotal(pixels: Checked.multiply(index + 1, width * height), format: .webp)
            var canvas: UnsafeMutablePointer<UInt8>? = nil
            var timestamp: Int32 = 0
            guard WebPAnimDecoderGetNext(decoder, &canvas, &timestamp) != 0, let canvas else {
                throw ImageDecodingError(.corrupt, format: .webp, message: "libwebp: cannot decode frame \(index)")
            }
            if options.frames.returns(index) {
                // The decoder reuses its canvas for the next frame, so each returned frame is a copy.
                let pixels = Array(UnsafeBufferPointer(start: canvas, count: frameBytes))
                // libwebp sums the frames' durations in an Int32 that can wrap: a step
                // backwards is read as no time at all.
                let step = max(0, Int(timestamp) - previousTimestamp)
                frames.append(.init(pixels: pixels, duration: .milliseconds(step)))
            }
            previousTimestamp = Int(timestamp)
            index += 1
        }
        guard !frames.isEmpty else {
            throw ImageDecodingError(.corrupt, format: .webp, message: "animation without frames")
        }
        return RasterImage(
            validatedWidth: width, height: height, bytesPerRow: width * 4, frames: frames, alphaMode: .straight,
            loopCount: container.loopCount, orientation: container.orientation, iccProfile: container.iccProfile,
            format: .webp, hasAlpha: true)
    }
}

/// The RIFF container of a WebP: canvas, frame count, loop count and metadata chunks.
struct WebPContainer {
    var canvasWidth: Int?
    var canvasHeight: Int?
    var frameCount = 1
    var loopCount = 1
    var orientation = Orientation.up
    var iccProfile: [UInt8]?

    static func features(_ bytes: UnsafeRawBufferPointer) throws -> WebPBitstreamFeatures {
        var features = WebPBitstreamFeatures()
        _ = try status(WebPGetFeatures(bytes.baseAddress, bytes.count, &features))
        return features
    }

    /// Throws the error a libwebp status stands for.
    @discardableResult
    static func status(_ code: VP8StatusCode) throws -> VP8StatusCode {
        switch code {
        case VP8_STATUS_OK: return code
        case VP8_STATUS_NOT_ENOUGH_DATA:
            throw ImageDecodingError(.truncated, format: .webp, message: "libwebp: not enough data")
        case VP8_STATUS_UNSUPPORTED_FEATURE:
            throw ImageDecodingError(.unsupported, format: .webp, message: "libwebp: unsupported feature")
        case VP8_STATUS_OUT_OF_MEMORY:
            throw ImageDecodingError(.unsupported, format: .webp, message: "libwebp: out of memory")
        default:
            throw ImageDecodingError(
                .corrupt, format: .webp, message: "libwebp: bitstream error (status \(code.rawValue))")
        }
    }

    init(_ bytes: UnsafeRawBufferPointer, limits: DecodingLimits) throws {
        try WebPContainer.checkChunkCounts(bytes, limits: limits)
        var data = WebPData(bytes: bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), size: bytes.count)
        var state = WEBP_DEMUX_PARSING_HEADER
        guard let demux = WebPDemuxPartial(&data, &state) else {
            throw ImageDecodingError(.corrupt, format: .webp, message: "libwebp: not a WebP container")
        }
        defer { WebPDemuxDelete(demux) }
        guard state == WEBP_DEMUX_DONE else {
            let reason: ImageDecodingError.Reason = state == WEBP_DEMUX_PARSE_ERROR ? .corrupt : .truncated
            throw ImageDecodingError(reason, format: .webp, message: "libwebp: incomplete container")
        }
        canvasWidth = Int(WebPDemuxGetI(demux, WEBP_FF_CANVAS_WIDTH))
        canvasHeight = Int(WebPDemuxGetI(demux, WEBP_FF_CANVAS_HEIGHT))
        frameCount = max(1, Int(WebPDemuxGetI(demux, WEBP_FF_FRAME_COUNT)))
        let flags = WebPDemuxGetI(demux, WEBP_FF_FORMAT_FLAGS)
        if flags & ANIMATION_FLAG.rawValue != 0 { loopCount = Int(WebPDemuxGetI(demux, WEBP_FF_LOOP_COUNT)) }
        if let exif = WebPContainer.chunk("EXIF", in: demux) { orientation = EXIF.orientation(in: exif) ?? .up }
        iccProfile = WebPContainer.chunk("ICCP", in: demux)
    }

    /// Counts the RIFF chunks before libwebp's demuxer reads them (it allocates one
    /// record a chunk): frames (ANMF) against `maxFrames`, the rest against
    /// `maxMetadataBlocks`. Only the 8-byte headers are read; what the walk cannot make
    /// sense of is left to libwebp to report.
    static func checkChunkCounts(_ bytes: UnsafeRawBufferPointer, limits: DecodingLimits) throws {
        let anmf = UInt32(littleEndian: 0x464D_4E41)  // "ANMF"
        var (offset, frames, others) = (12, 0, 0)
        // Offsets stay below the input's size plus a chunk's (32-bit) size: no overflow.
        while offset <= bytes.count - 8 {
            let fourCC = bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self)
            let size = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)))
            if fourCC == anmf { frames += 1 } else { others += 1 }
            if frames > limits.maxFrames || others > limits.maxMetadataBlocks { break }
            // Chunks are padded to an even size.
            offset += 8 + size + (size & 1)
        }
        if frames > limits.maxFrames {
            throw ImageDecodingError(.tooManyFrames(limit: limits.maxFrames), format: .webp)
        }
        try limits.checkMetadata(blocks: others, format: .webp)
    }

    private static func chunk(_ fourCC: String, in demux: OpaquePointer) -> [UInt8]? {
        var iterator = WebPChunkIterator()
        guard WebPDemuxGetChunk(demux, fourCC, 1, &iterator) != 0 else { return nil }
        defer { WebPDemuxReleaseChunkIterator(&iterator) }
        guard let bytes = iterator.chunk.bytes, iterator.chunk.size > 0 else { return nil }
        return Array(UnsafeBufferPointer(start: bytes, count: iterator.chunk.size))
    }
}
