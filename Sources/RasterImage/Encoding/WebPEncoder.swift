import CWebP

/// Writes WebP with libwebp: lossy (with alpha when the image has it) or lossless.
///
/// ```swift
/// let webp = try WebPEncoder(quality: 80).encode(thumbnail)
/// let exact = try WebPEncoder(lossless: true).encode(icon)
/// ```
public struct WebPEncoder: Sendable, Hashable {
    /// Lossy: 0 (smallest) to 100 (best). Lossless: effort, 0 (fast) to 100 (smallest).
    public var quality: Int
    /// Write lossless WebP (`quality` then sets the effort).
    public var lossless: Bool
    /// Speed against size, 0 (fastest) to 6 (smallest).
    public var method: Int
    /// Embed the image's ICC profile (ICCP chunk) when it has one.
    public var includeICCProfile: Bool
    /// An EXIF block (a TIFF structure) written as an EXIF chunk; `nil` (the default): none.
    public var exif: [UInt8]?

    /// A WebP encoder: quality 0 to 100, lossy or lossless, `method` 0 (fast) to 6
    /// (small), the ICC profile embedded unless `includeICCProfile` is false.
    public init(quality: Int = 80, lossless: Bool = false, method: Int = 4, includeICCProfile: Bool = true) {
        self.quality = quality
        self.lossless = lossless
        self.method = method
        self.includeICCProfile = includeICCProfile
    }

    /// Encodes frame `frame` of `image`.
    public func encode(_ image: RasterImage, frame: Int = 0) throws(ImageEncodingError) -> [UInt8] {
        guard (0...100).contains(quality) else {
            throw ImageEncodingError(.invalidParameter, format: .webp, message: "quality \(quality) is not in 0...100")
        }
        guard (0...6).contains(method) else {
            throw ImageEncodingError(.invalidParameter, format: .webp, message: "method \(method) is not in 0...6")
        }
        try ImageEncodingError.checkFrame(frame, of: image, format: .webp)
        guard image.width <= Int(WEBP_MAX_DIMENSION) && image.height <= Int(WEBP_MAX_DIMENSION) else {
            throw ImageEncodingError(
                .unsupportedImage, format: .webp, message: "WebP is limited to 16383 pixels a side")
        }
        let straight = image.straightAlpha()
        var config = WebPConfig()
        guard WebPConfigInit(&config) != 0 else {
            throw ImageEncodingError(.failed, format: .webp, message: "libwebp version mismatch")
        }
        config.quality = Float(quality)
        config.lossless = lossless ? 1 : 0
        config.method = Int32(method)
        var picture = WebPPicture()
        guard WebPPictureInit(&picture) != 0 else {
            throw ImageEncodingError(.failed, format: .webp, message: "libwebp version mismatch")
        }
        defer { WebPPictureFree(&picture) }
        picture.width = Int32(straight.width)
        picture.height = Int32(straight.height)
        picture.use_argb = lossless ? 1 : 0
        let imported = straight.frames[frame].pixels.withUnsafeBufferPointer { pixels in
            straight.hasAlpha
                ? WebPPictureImportRGBA(&picture, pixels.baseAddress, Int32(straight.bytesPerRow))
                : WebPPictureImportRGBX(&picture, pixels.baseAddress, Int32(straight.bytesPerRow))
        }
        guard imported != 0 else { throw ImageEncodingError(.failed, format: .webp, message: "libwebp: out of memory") }
        var writer = WebPMemoryWriter()
        WebPMemoryWriterInit(&writer)
        defer { WebPMemoryWriterClear(&writer) }
        let encoded = withUnsafeMutablePointer(to: &writer) { writerPointer in
            picture.writer = WebPMemoryWrite
            picture.custom_ptr = UnsafeMutableRawPointer(writerPointer)
            return WebPEncode(&config, &picture)
        }
        guard encoded != 0, let memory = writer.mem else {
            throw ImageEncodingError(.failed, format: .webp, message: "libwebp: error \(picture.error_code.rawValue)")
        }
        let bitstream = Array(UnsafeBufferPointer(start: memory, count: writer.size))
        let icc = includeICCProfile ? straight.iccProfile ?? [] : []
        let exif = exif ?? []
        guard !icc.isEmpty || !exif.isEmpty else { return bitstream }
        return try WebPEncoder.adding(icc: icc, exif: exif, to: bitstream)
    }

    /// Encodes every frame of `image` as an animated WebP (libwebpmux's animation
    /// encoder), each frame shown for its duration (at least 10 ms; WebP counts
    /// milliseconds), looping as the image says (`loopCount` 0: forever). A still image
    /// is written as ``encode(_:frame:)`` writes it.
    ///
    /// ```swift
    /// let animation = try WebPEncoder(quality: 75).encodeAnimation(try decoder.decode(.file(path: "a.gif")))
    /// ```
    public func encodeAnimation(_ image: RasterImage) throws(ImageEncodingError) -> [UInt8] {
        guard image.frames.count > 1 else { return try encode(image, frame: 0) }
        guard (0...100).contains(quality), (0...6).contains(method) else {
            throw ImageEncodingError(.invalidParameter, format: .webp, message: "quality or method out of range")
        }
        guard image.width <= Int(WEBP_MAX_DIMENSION) && image.height <= Int(WEBP_MAX_DIMENSION) else {
            throw ImageEncodingError(
                .unsupportedImage, format: .webp, message: "WebP is limited to 16383 pixels a side")
        }
        let straight = image.straightAlpha()
        var options = WebPAnimEncoderOptions()
        guard WebPAnimEncoderOptionsInit(&options) != 0 else {
            throw ImageEncodingError(.failed, format: .webp, message: "libwebpmux version mismatch")
        }
        options.anim_params.loop_count = Int32(clamping: straight.loopCount)
        options.allow_mixed = 0
        guard let encoder = WebPAnimEncoderNew(Int32(straight.width), Int32(straight.height), &options) else {
            throw ImageEncodingError(.failed, format: .webp, message: "libwebpmux: out of memory")
        }
        defer { WebPAnimEncoderDelete(encoder) }
        var config = WebPConfig()
        guard WebPConfigInit(&config) != 0 else {
            throw ImageEncodingError(.failed, format: .webp, message: "libwebp version mismatch")
        }
        config.quality = Float(quality)
        config.lossless = lossless ? 1 : 0
        config.method = Int32(method)
        var timestamp: Int32 = 0
        for frame in straight.frames {
            var picture = WebPPicture()
            guard WebPPictureInit(&picture) != 0 else {
                throw ImageEncodingError(.failed, format: .webp, message: "libwebp version mismatch")
            }
            defer { WebPPictureFree(&picture) }
            picture.width = Int32(straight.width)
            picture.height = Int32(straight.height)
            picture.use_argb = 1
            let added = frame.pixels.withUnsafeBufferPointer { pixels -> Bool in
                WebPPictureImportRGBA(&picture, pixels.baseAddress, Int32(straight.bytesPerRow)) != 0
                    && WebPAnimEncoderAdd(encoder, &picture, timestamp, &config) != 0
            }
            guard added else {
                throw ImageEncodingError(.failed, format: .webp, message: "libwebpmux: cannot add a frame")
            }
            let milliseconds =
                frame.duration.components.seconds * 1000
                + frame.duration.components.attoseconds / 1_000_000_000_000_000
            timestamp = timestamp &+ Int32(clamping: max(10, milliseconds))
        }
        var assembled = WebPData()
        defer { WebPDataClear(&assembled) }
        guard WebPAnimEncoderAdd(encoder, nil, timestamp, nil) != 0,
            WebPAnimEncoderAssemble(encoder, &assembled) != 0, let bytes = assembled.bytes
        else {
            throw ImageEncodingError(.failed, format: .webp, message: "libwebpmux: cannot assemble the animation")
        }
        return Array(UnsafeBufferPointer(start: bytes, count: assembled.size))
    }

    /// Wraps a WebP file with ICCP and EXIF chunks, each when not empty (libwebpmux
    /// writes the extended header).
    private static func adding(icc: [UInt8], exif: [UInt8], to bitstream: [UInt8]) throws(ImageEncodingError)
        -> [UInt8]
    {
        guard let mux = WebPMuxNew() else {
            throw ImageEncodingError(.failed, format: .webp, message: "libwebpmux: out of memory")
        }
        defer { WebPMuxDelete(mux) }
        var assembled = WebPData()
        let status = bitstream.withUnsafeBufferPointer { image in
            icc.withUnsafeBufferPointer { profile in
                exif.withUnsafeBufferPointer { metadata in
                    var imageData = WebPData(bytes: image.baseAddress, size: image.count)
                    var profileData = WebPData(bytes: profile.baseAddress, size: profile.count)
                    var exifData = WebPData(bytes: metadata.baseAddress, size: metadata.count)
                    guard WebPMuxSetImage(mux, &imageData, 1) == WEBP_MUX_OK,
                        profile.isEmpty || WebPMuxSetChunk(mux, "ICCP", &profileData, 1) == WEBP_MUX_OK,
                        metadata.isEmpty || WebPMuxSetChunk(mux, "EXIF", &exifData, 1) == WEBP_MUX_OK
                    else { return WEBP_MUX_BAD_DATA }
                    return WebPMuxAssemble(mux, &assembled)
                }
            }
        }
        defer { WebPDataClear(&assembled) }
        guard status == WEBP_MUX_OK, let bytes = assembled.bytes else {
            throw ImageEncodingError(.failed, format: .webp, message: "libwebpmux: cannot add the ICC profile or EXIF")
        }
        return Array(UnsafeBufferPointer(start: bytes, count: assembled.size))
    }
}
