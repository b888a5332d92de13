import CAVIF
import ImageLoaderSupport

/// AVIF through libavif (AV1 by dav1d): stills, grids and animations (image
/// sequences), 8-bit RGBA with straight alpha (premultiplied alpha is divided out),
/// colour from the ICC profile or `nclx` (``ColorSignal``), `clap` applied and
/// `irot`/`imir` given as the image's ``Orientation``, as EXIF orientation is for JPEG.
///
/// An animation's frames are whole pictures with their durations; libavif 0.11 does not
/// read a sequence's repetition count, so its ``RasterImage/loopCount`` is 0 (forever),
/// as browsers play it. libavif decodes whole buffers, so a file source is read into
/// memory first (bounded by the input limit).
enum AVIFDecoder: FormatDecoder {
    static let format = ImageFormat.avif

    static func info(_ reader: ByteReader, limits: DecodingLimits) throws -> ImageInfo {
        try reader.withContiguousBytes { bytes in try AVIFFile(bytes, limits: limits).info }
    }

    static func decode(_ reader: ByteReader, options: DecodingOptions) throws -> RasterImage {
        try reader.withContiguousBytes { bytes in
            try decode(AVIFFile(bytes, limits: options.limits), options: options)
        }
    }

    /// The frames `options` selects from an open file.
    static func decode(_ file: AVIFFile, options: DecodingOptions) throws -> RasterImage {
        let limits = options.limits
        let region = file.region
        let frameBytes = region.width * region.height * 4  // within the pixel limit
        if case .index(let n) = options.frames, n < 0 || n >= file.frameCount {
            throw ImageDecodingError(.frameOutOfRange(index: n, count: file.frameCount), format: .avif)
        }
        let lastNeeded = min(options.frames.lastNeededIndex ?? file.frameCount - 1, file.frameCount - 1)
        let wanted = (0...lastNeeded).filter(options.frames.returns)
        // libavif decodes every frame from the key frame before the one asked for: the
        // work counts them all, not only those returned.
        try limits.checkTotal(
            pixels: Checked.multiply(lastNeeded + 1, file.decodedWidth * file.decodedHeight), format: .avif)
        try limits.check(frames: wanted.count, frameBytes: frameBytes, format: .avif)
        var frames: [RasterImage.Frame] = []
        for index in wanted {
            let frame =
                file.crop == nil
                ? try file.frame(index, limits: limits)
                : try file.withFrame(index, limits: limits) { plane, duration in
                    try plane.image(
                        plane.region(file.crop), orientation: file.orientation, iccProfile: nil, format: .avif,
                        hasAlpha: file.hasAlpha, duration: duration
                    ).frames[0]
                }
            // Every frame has the size the image is made with (a crop clamped to the
            // decoded frame could be smaller).
            guard frame.pixels.count == frameBytes else {
                throw ImageDecodingError(.corrupt, format: .avif, message: "frame \(index) has another size")
            }
            frames.append(frame)
        }
        return RasterImage(
            validatedWidth: region.width, height: region.height, bytesPerRow: region.width * 4, frames: frames,
            alphaMode: .straight, loopCount: file.frameCount > 1 ? file.loopCount : 1,
            orientation: file.orientation, iccProfile: file.iccProfile, format: .avif, hasAlpha: file.hasAlpha)
    }

    static func thumbnail(_ reader: ByteReader, _ request: ThumbnailRequest) throws -> RasterImage {
        try reader.withContiguousBytes { bytes in
            let file = try AVIFFile(bytes, limits: request.limits)
            let options = try request.options(file.info)
            guard case .first = options.frames else {
                return try decode(file, options: DecodingOptions(limits: request.limits, frames: options.frames))
                    .thumbnail(limits: request.limits, options: options)
            }
            return try file.withFrame(0, limits: request.limits) { plane, _ in
                try plane.thumbnail(
                    plane.region(file.crop), orientation: file.orientation, iccProfile: file.iccProfile,
                    format: .avif, hasAlpha: file.hasAlpha, options: options, limits: request.limits)
            }
        }
    }

    /// Throws the error a libavif result stands for.
    static func check(_ result: avifResult, _ what: String) throws {
        guard result != AVIF_RESULT_OK else { return }
        let message = "libavif: \(what): " + String(cString: avifResultToString(result))
        switch result {
        case AVIF_RESULT_TRUNCATED_DATA, AVIF_RESULT_NO_IMAGES_REMAINING:
            throw ImageDecodingError(.truncated, format: .avif, message: message)
        case AVIF_RESULT_NO_CODEC_AVAILABLE, AVIF_RESULT_NOT_IMPLEMENTED, AVIF_RESULT_UNSUPPORTED_DEPTH:
            throw ImageDecodingError(.unsupported, format: .avif, message: message)
        default:
            throw ImageDecodingError(.corrupt, format: .avif, message: message)
        }
    }
}

/// An open AVIF file: libavif's decoder after it parsed the boxes. Lives for one decode.
final class AVIFFile {
    private let owner: Owned<UnsafeMutablePointer<avifDecoder>>
    private var decoder: UnsafeMutablePointer<avifDecoder> { owner.pointer }
    let decodedWidth: Int
    let decodedHeight: Int
    let frameCount: Int
    let loopCount = 0
    let hasAlpha: Bool
    let orientation: Orientation
    let crop: DecodedPlane.Rect?
    let iccProfile: [UInt8]?
    let depth: Int

    var region: DecodedPlane.Rect {
        crop ?? DecodedPlane.Rect(x: 0, y: 0, width: decodedWidth, height: decodedHeight)
    }

    /// The image's facts, from the boxes libavif parsed.
    var info: ImageInfo {
        ImageInfo(
            format: .avif, width: region.width, height: region.height, frameCount: frameCount, hasAlpha: hasAlpha,
            orientation: orientation, loopCount: loopCount, iccProfile: iccProfile)
    }

    init(_ bytes: UnsafeRawBufferPointer, limits: DecodingLimits) throws {
        if let failure = LazyLibraries.avifFailure {
            throw ImageDecodingError(.unsupported, format: .avif, message: failure)
        }
        // The boxes are counted, and a grid's tiles checked, before libavif parses them.
        let boxes = try HEIFBoxes(bytes, limits: limits, format: .avif)
        try HEIFFile.check(boxes, limits: limits, format: .avif)
        if boxes.isTruncated { throw ImageDecodingError(.truncated, format: .avif, message: "a box runs past the end") }
        guard let decoder = avifDecoderCreate() else {
            throw ImageDecodingError(.unsupported, format: .avif, message: "libavif: cannot create a decoder")
        }
        owner = Owned(decoder) { avifDecoderDestroy($0) }
        // One thread: the caller's pool is the parallelism. libavif's own limits match ours.
        decoder.pointee.maxThreads = 1
        decoder.pointee.imageSizeLimit = UInt32(clamping: limits.maxPixelsPerFrame)
        decoder.pointee.imageCountLimit = UInt32(clamping: limits.maxFrames)
        decoder.pointee.ignoreExif = 1
        decoder.pointee.ignoreXMP = 1
        decoder.pointee.codecChoice = AVIF_CODEC_CHOICE_AUTO
        // As browsers: a file that bends a rule without harm (a clean aperture at an odd
        // offset, a missing pixi) is decoded, not refused.
        decoder.pointee.strictFlags = AVIF_STRICT_DISABLED.rawValue
        try AVIFDecoder.check(avifDecoderSetIOMemory(decoder, bytes.baseAddress, bytes.count), "reading")
        let parsedResult = avifDecoderParse(decoder)
        if parsedResult != AVIF_RESULT_OK && AVIFFile.diagnostics(decoder).contains("imageCountLimit") {
            throw ImageDecodingError(.tooManyFrames(limit: limits.maxFrames), format: .avif)
        }
        try AVIFDecoder.check(parsedResult, "parsing")
        guard let parsed = decoder.pointee.image else {
            throw ImageDecodingError(.corrupt, format: .avif, message: "libavif: no image")
        }
        let image = parsed.pointee
        decodedWidth = Int(image.width)
        decodedHeight = Int(image.height)
        try limits.check(width: decodedWidth, height: decodedHeight, format: .avif)
        frameCount = max(1, Int(decoder.pointee.imageCount))
        guard frameCount <= limits.maxFrames else {
            throw ImageDecodingError(.tooManyFrames(limit: limits.maxFrames), format: .avif)
        }
        hasAlpha = decoder.pointee.alphaPresent != 0
        depth = Int(image.depth)
        let flags = image.transformFlags
        var mirror: Int?
        var turns = 0
        if flags & AVIF_TRANSFORM_IROT.rawValue != 0 { turns = Int(image.irot.angle & 3) }
        if flags & AVIF_TRANSFORM_IMIR.rawValue != 0 { mirror = Int(image.imir.mode & 1) }
        orientation = HEIFBoxes.orientation(quarterTurns: turns, mirror: mirror)
        var cropped: DecodedPlane.Rect?
        if flags & AVIF_TRANSFORM_CLAP.rawValue != 0 {
            var rect = avifCropRect()
            var clap = image.clap
            var diagnostics = avifDiagnostics()
            if avifCropRectConvertCleanApertureBox(
                &rect, &clap, image.width, image.height, image.yuvFormat, &diagnostics) != 0
            {
                cropped = DecodedPlane.Rect(
                    x: Int(rect.x), y: Int(rect.y), width: Int(rect.width), height: Int(rect.height))
            } else if case .crop(let x, let y, let width, let height)? = boxes.transforms.first(where: {
                if case .crop = $0 { true } else { false }
            }) {
                // libavif refuses a crop that splits a chroma sample; the rectangle is
                // still what the file asks for, rounded as libheif rounds it.
                cropped = DecodedPlane.Rect(x: x, y: y, width: width, height: height)
            }
        }
        crop = cropped
        if image.icc.size > 0, image.icc.size <= 16 << 20, let data = image.icc.data {
            iccProfile = Array(UnsafeBufferPointer(start: data, count: image.icc.size))
        } else {
            iccProfile =
                ColorSignal(
                    primaries: Int(image.colorPrimaries), transfer: Int(image.transferCharacteristics)
                ).iccProfile
        }
    }

    /// libavif's explanation of its last error.
    private static func diagnostics(_ decoder: UnsafeMutablePointer<avifDecoder>) -> String {
        withUnsafeBytes(of: decoder.pointee.diag.error) { bytes in
            String(decoding: bytes.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
    }

    /// Decodes frame `index` and hands its RGBA to `body` with the frame's duration;
    /// the pixels live only for the call.
    func withFrame<R>(
        _ index: Int, limits: DecodingLimits, _ body: (DecodedPlane, Duration) throws -> R
    ) throws -> R {
        let rowBytes = decodedWidth * 4
        let pixels = UnsafeMutablePointer<UInt8>.allocate(capacity: rowBytes * decodedHeight)
        defer { pixels.deallocate() }
        let duration = try convertFrame(index, limits: limits, into: pixels, rowBytes: rowBytes)
        let plane = DecodedPlane(
            base: UnsafeRawPointer(pixels), stride: rowBytes, width: decodedWidth, height: decodedHeight,
            storageBits: 8, depth: 8, premultiplied: false)
        return try body(plane, duration)
    }

    /// Frame `index` as a whole frame of the image, converted by libavif straight into
    /// the output (no crop to apply: no copy).
    func frame(_ index: Int, limits: DecodingLimits) throws -> RasterImage.Frame {
        let rowBytes = decodedWidth * 4
        var duration = Duration.zero
        let pixels = try PixelBuffer.make(count: rowBytes * decodedHeight) { base in
            duration = try convertFrame(index, limits: limits, into: base, rowBytes: rowBytes)
        }
        return RasterImage.Frame(pixels: pixels, duration: duration)
    }

    /// Decodes frame `index` and converts it to 8-bit RGBA with straight alpha at
    /// `destination`, rows `rowBytes` apart; returns its duration.
    private func convertFrame(
        _ index: Int, limits: DecodingLimits, into destination: UnsafeMutablePointer<UInt8>, rowBytes: Int
    ) throws -> Duration {
        let sampleBytes = depth > 8 ? 2 : 1
        // dav1d's planes (4:4:4 and alpha at most) and libavif's copy of them.
        try limits.checkWorking(
            bytes: Checked.multiply(decodedWidth * decodedHeight, sampleBytes * 8), format: .avif,
            what: "libavif's planes")
        try AVIFDecoder.check(avifDecoderNthImage(decoder, UInt32(index)), "decoding frame \(index)")
        guard let image = decoder.pointee.image else {
            throw ImageDecodingError(.corrupt, format: .avif, message: "libavif: no image")
        }
        guard Int(image.pointee.width) == decodedWidth, Int(image.pointee.height) == decodedHeight else {
            throw ImageDecodingError(.corrupt, format: .avif, message: "frame \(index) has another size")
        }
        var rgb = avifRGBImage()
        avifRGBImageSetDefaults(&rgb, image)
        rgb.format = AVIF_RGB_FORMAT_RGBA
        // libavif reduces deeper samples to 8 bits itself, rounding in its conversion.
        rgb.depth = 8
        rgb.alphaPremultiplied = 0
        rgb.pixels = destination
        rgb.rowBytes = UInt32(rowBytes)
        try AVIFDecoder.check(avifImageYUVToRGB(image, &rgb), "converting to RGB")
        let seconds = decoder.pointee.imageTiming.duration
        return frameCount > 1 && seconds.isFinite && seconds > 0
            ? .milliseconds(Int(min(seconds, 86_400) * 1000)) : .zero
    }
}
