import CAVIF

/// Writes AVIF with libavif and libaom: 8-bit 4:2:0 (4:4:4 when `lossless`), alpha
/// when the image has it, the ICC profile when there is one.
///
/// The defaults suit a thumbnail service: libaom at speed 9, one thread (the
/// caller's pool runs encodes side by side). AV1 encoding costs far more than JPEG or
/// WebP; Benchmarks/README.md gives the measured time and size.
///
/// ```swift
/// let avif = try AVIFEncoder(quality: 60).encode(thumbnail)
/// ```
public struct AVIFEncoder: Sendable, Hashable {
    /// 0 (smallest) to 100 (best; 100 with `lossless` is exact).
    public var quality: Int
    /// libaom's speed, 0 (slowest, smallest) to 10 (fastest).
    public var speed: Int
    /// Write lossless AVIF (4:4:4, identity matrix): exact pixels, large files.
    public var lossless: Bool
    /// Embed the image's ICC profile when it has one.
    public var includeICCProfile: Bool

    /// An AVIF encoder: quality 0 to 100 (60 is about JPEG's 80 by eye), speed 0 to 10.
    public init(quality: Int = 60, speed: Int = 9, lossless: Bool = false, includeICCProfile: Bool = true) {
        self.quality = quality
        self.speed = speed
        self.lossless = lossless
        self.includeICCProfile = includeICCProfile
    }

    /// Encodes frame `frame` of `image`.
    public func encode(_ image: RasterImage, frame: Int = 0) throws(ImageEncodingError) -> [UInt8] {
        guard (0...100).contains(quality) else {
            throw ImageEncodingError(.invalidParameter, format: .avif, message: "quality \(quality) is not in 0...100")
        }
        guard (0...10).contains(speed) else {
            throw ImageEncodingError(.invalidParameter, format: .avif, message: "speed \(speed) is not in 0...10")
        }
        try ImageEncodingError.checkFrame(frame, of: image, format: .avif)
        if let failure = LazyLibraries.avifFailure {
            throw ImageEncodingError(.failed, format: .avif, message: failure)
        }
        guard image.width <= 65_536, image.height <= 65_536 else {
            throw ImageEncodingError(.unsupportedImage, format: .avif, message: "AV1 is limited to 65536 pixels a side")
        }
        let straight = image.straightAlpha()
        let yuv = lossless ? AVIF_PIXEL_FORMAT_YUV444 : AVIF_PIXEL_FORMAT_YUV420
        guard let avif = avifImageCreate(UInt32(straight.width), UInt32(straight.height), 8, yuv) else {
            throw ImageEncodingError(.failed, format: .avif, message: "libavif: out of memory")
        }
        defer { avifImageDestroy(avif) }
        if lossless { avif.pointee.matrixCoefficients = UInt16(AVIF_MATRIX_COEFFICIENTS_IDENTITY) }
        avif.pointee.yuvRange = AVIF_RANGE_FULL
        if includeICCProfile, let icc = straight.iccProfile, !icc.isEmpty {
            icc.withUnsafeBufferPointer { avifImageSetProfileICC(avif, $0.baseAddress, $0.count) }
        }
        var rgb = avifRGBImage()
        avifRGBImageSetDefaults(&rgb, avif)
        rgb.format = AVIF_RGB_FORMAT_RGBA
        rgb.depth = 8
        rgb.ignoreAlpha = straight.hasAlpha ? 0 : 1
        let converted: avifResult = straight.frames[frame].pixels.withUnsafeBufferPointer { pixels in
            rgb.pixels = UnsafeMutablePointer(mutating: pixels.baseAddress)
            rgb.rowBytes = UInt32(straight.bytesPerRow)
            return avifImageRGBToYUV(avif, &rgb)
        }
        guard converted == AVIF_RESULT_OK else {
            throw ImageEncodingError(
                .failed, format: .avif, message: "libavif: " + String(cString: avifResultToString(converted)))
        }
        guard let encoder = avifEncoderCreate() else {
            throw ImageEncodingError(.failed, format: .avif, message: "libavif: out of memory")
        }
        defer { avifEncoderDestroy(encoder) }
        encoder.pointee.codecChoice = AVIF_CODEC_CHOICE_AOM
        encoder.pointee.maxThreads = 1
        encoder.pointee.speed = Int32(speed)
        // libavif 1.0's mapping of quality to AV1's quantizer (0 best, 63 worst).
        let quantizer = Int32(lossless ? 0 : ((100 - quality) * 63 + 50) / 100)
        encoder.pointee.minQuantizer = quantizer
        encoder.pointee.maxQuantizer = quantizer
        encoder.pointee.minQuantizerAlpha = lossless ? 0 : max(0, quantizer - 8)
        encoder.pointee.maxQuantizerAlpha = lossless ? 0 : max(0, quantizer - 8)
        var output = avifRWData(data: nil, size: 0)
        defer { avifRWDataFree(&output) }
        let written = avifEncoderWrite(encoder, avif, &output)
        guard written == AVIF_RESULT_OK, let data = output.data else {
            throw ImageEncodingError(
                .failed, format: .avif, message: "libavif: " + String(cString: avifResultToString(written)))
        }
        return Array(UnsafeBufferPointer(start: data, count: output.size))
    }
}
