import CHEIF

/// Writes HEIC (HEVC-coded HEIF) with libheif and its x265 plug-in: 8-bit 4:2:0, alpha
/// as an auxiliary image when the image has it, the ICC profile when there is one.
///
/// The defaults suit a thumbnail service: x265's `ultrafast` preset without its thread
/// pool (the caller's pool runs encodes side by side) and with its log off (nothing
/// on standard error). On a 512-pixel photo `ultrafast` took a third of `faster`'s
/// time for a file 14% smaller at 0.3 dB lower PSNR (35.9 against 36.2, quality 50);
/// the service's HEIC results are still several times a JPEG's cost (Benchmarks/README.md).
///
/// ```swift
/// let heic = try HEIFEncoder(quality: 60).encode(thumbnail)
/// ```
public struct HEIFEncoder: Sendable, Hashable {
    /// 0 (smallest) to 100 (best).
    public var quality: Int
    /// x265's preset: `ultrafast`, `superfast`, `veryfast`, `faster`, `fast`, `medium`,
    /// `slow`, `slower`, `veryslow`, `placebo`.
    public var preset: String
    /// Embed the image's ICC profile when it has one.
    public var includeICCProfile: Bool

    static let presets: Set = [
        "ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow", "placebo",
    ]

    /// A HEIC encoder: quality 0 to 100 (50 is about JPEG's 80 by eye), an x265 preset.
    public init(quality: Int = 50, preset: String = "ultrafast", includeICCProfile: Bool = true) {
        self.quality = quality
        self.preset = preset
        self.includeICCProfile = includeICCProfile
    }

    /// Whether this libheif can write HEVC (it needs its x265 plug-in).
    public static var isAvailable: Bool {
        LazyLibraries.heifFailure == nil && heif_have_encoder_for_format(heif_compression_HEVC) != 0
    }

    /// Encodes frame `frame` of `image`.
    public func encode(_ image: RasterImage, frame: Int = 0) throws(ImageEncodingError) -> [UInt8] {
        guard (0...100).contains(quality) else {
            throw ImageEncodingError(.invalidParameter, format: .heif, message: "quality \(quality) is not in 0...100")
        }
        guard HEIFEncoder.presets.contains(preset) else {
            throw ImageEncodingError(.invalidParameter, format: .heif, message: "x265 has no preset \(preset)")
        }
        try ImageEncodingError.checkFrame(frame, of: image, format: .heif)
        if let failure = LazyLibraries.heifFailure {
            throw ImageEncodingError(.failed, format: .heif, message: failure)
        }
        // HEVC's level limits, and x265's: sides of at least 2 (4:2:0) and at most 16384.
        guard (1...16_384).contains(image.width), (1...16_384).contains(image.height) else {
            throw ImageEncodingError(
                .unsupportedImage, format: .heif, message: "HEVC is limited to 16384 pixels a side")
        }
        let straight = image.straightAlpha()
        func check(_ error: heif_error, _ what: String) throws(ImageEncodingError) {
            guard error.code == heif_error_Ok else {
                let message = error.message.map { String(cString: $0) } ?? "error \(error.code.rawValue)"
                throw ImageEncodingError(.failed, format: .heif, message: "libheif: \(what): \(message)")
            }
        }
        guard let context = heif_context_alloc() else {
            throw ImageEncodingError(.failed, format: .heif, message: "libheif: out of memory")
        }
        defer { heif_context_free(context) }
        var encoder: OpaquePointer?
        try check(heif_context_get_encoder_for_format(context, heif_compression_HEVC, &encoder), "no HEVC encoder")
        guard let encoder else { throw ImageEncodingError(.failed, format: .heif, message: "libheif: no HEVC encoder") }
        defer { heif_encoder_release(encoder) }
        try check(heif_encoder_set_lossy_quality(encoder, Int32(quality)), "quality")
        try check(heif_encoder_set_parameter_string(encoder, "preset", preset), "preset")
        // One thread (x265's pool would take every core per encode) and no log lines.
        try check(heif_encoder_set_parameter_string(encoder, "x265:pools", "none"), "threads")
        try check(heif_encoder_set_parameter_string(encoder, "x265:frame-threads", "1"), "threads")
        try check(heif_encoder_set_parameter_string(encoder, "x265:log-level", "none"), "log level")

        let chroma = straight.hasAlpha ? heif_chroma_interleaved_RGBA : heif_chroma_interleaved_RGB
        var created: OpaquePointer?
        try check(
            heif_image_create(Int32(straight.width), Int32(straight.height), heif_colorspace_RGB, chroma, &created),
            "image")
        guard let heifImage = created else {
            throw ImageEncodingError(.failed, format: .heif, message: "libheif: out of memory")
        }
        defer { heif_image_release(heifImage) }
        try check(
            heif_image_add_plane(
                heifImage, heif_channel_interleaved, Int32(straight.width), Int32(straight.height), 8),
            "plane")
        var stride: Int32 = 0
        guard let plane = heif_image_get_plane(heifImage, heif_channel_interleaved, &stride) else {
            throw ImageEncodingError(.failed, format: .heif, message: "libheif: no plane")
        }
        let channels = straight.hasAlpha ? 4 : 3
        straight.frames[frame].pixels.withUnsafeBufferPointer { pixels in
            for y in 0..<straight.height {
                let source = pixels.baseAddress! + y * straight.bytesPerRow
                let target = plane + y * Int(stride)
                if channels == 4 {
                    target.update(from: source, count: straight.width * 4)
                } else {
                    for x in 0..<straight.width {
                        target[x * 3] = source[x * 4]
                        target[x * 3 + 1] = source[x * 4 + 1]
                        target[x * 3 + 2] = source[x * 4 + 2]
                    }
                }
            }
        }
        if includeICCProfile, let icc = straight.iccProfile, !icc.isEmpty {
            try check(
                icc.withUnsafeBytes { heif_image_set_raw_color_profile(heifImage, "prof", $0.baseAddress, $0.count) },
                "ICC profile")
        }
        try check(heif_context_encode_image(context, heifImage, encoder, nil, nil), "encoding")

        let output = HEIFOutput()
        var writer = heif_writer(writer_api_version: 1) { _, data, size, userdata in
            let output = Unmanaged<HEIFOutput>.fromOpaque(userdata!).takeUnretainedValue()
            if let data, size > 0 {
                output.bytes.append(contentsOf: UnsafeRawBufferPointer(start: data, count: size))
            }
            return heif_error(code: heif_error_Ok, subcode: heif_suberror_Unspecified, message: nil)
        }
        try check(
            withExtendedLifetime(output) {
                heif_context_write(context, &writer, Unmanaged.passUnretained(output).toOpaque())
            }, "writing")
        return output.bytes
    }
}

/// Where libheif's writer callback puts the file (only touched on the encoding thread).
private final class HEIFOutput {
    var bytes: [UInt8] = []
}
