import CJXL
import ImageLoaderSupport

/// Writes JPEG XL with libjxl: lossy (VarDCT) at a quality, or lossless; alpha when the
/// image has it; the ICC profile when there is one, else sRGB.
///
/// The default effort, 4, suits a service: libjxl's default (7) takes several times
/// longer for a few percent less. One thread (the caller's pool runs encodes side by side).
///
/// ```swift
/// let jxl = try JXLEncoder(quality: 75).encode(thumbnail)
/// ```
public struct JXLEncoder: Sendable, Hashable {
    /// 0 (smallest) to 100 (100 is lossless), mapped to libjxl's distance as cjxl maps it.
    public var quality: Int
    /// libjxl's effort, 1 (fastest) to 9 (smallest).
    public var effort: Int
    /// Embed the image's ICC profile when it has one.
    public var includeICCProfile: Bool

    /// A JPEG XL encoder: quality 0 to 100 (100 lossless), effort 1 to 9.
    public init(quality: Int = 75, effort: Int = 4, includeICCProfile: Bool = true) {
        self.quality = quality
        self.effort = effort
        self.includeICCProfile = includeICCProfile
    }

    /// The Butteraugli distance for `quality`: cjxl's mapping (90 is about 1.0, "visually lossless").
    static func distance(quality: Int) -> Float {
        if quality >= 100 { return 0 }
        if quality >= 30 { return 0.1 + Float(100 - quality) * 0.09 }
        return 6.4 + Float(System.power(2.5, Double(30 - quality) / 5)) / 6.25
    }

    /// Frame `frame`'s rows without padding, with `channels` (3 or 4) bytes a pixel.
    private static func pack(_ image: RasterImage, frame: Int, channels: Int) -> [UInt8] {
        let pixels = image.frames[frame].pixels
        if channels == 4 && image.bytesPerRow == image.width * 4 { return pixels }
        let rowBytes = image.width * channels
        return [UInt8](unsafeUninitializedCapacity: rowBytes * image.height) { buffer, initialized in
            pixels.withUnsafeBufferPointer { source in
                for y in 0..<image.height {
                    let row = source.baseAddress! + y * image.bytesPerRow
                    let out = buffer.baseAddress! + y * rowBytes
                    for x in 0..<image.width {
                        for c in 0..<channels { out[x * channels + c] = row[x * 4 + c] }
                    }
                }
            }
            initialized = rowBytes * image.height
        }
    }

    /// Encodes frame `frame` of `image`.
    public func encode(_ image: RasterImage, frame: Int = 0) throws(ImageEncodingError) -> [UInt8] {
        try LibjxlDiagnostics.encoding { () throws(ImageEncodingError) -> [UInt8] in
            try encodeFrame(image, frame: frame)
        }
    }

    private func encodeFrame(_ image: RasterImage, frame: Int) throws(ImageEncodingError) -> [UInt8] {
        guard (0...100).contains(quality) else {
            throw ImageEncodingError(.invalidParameter, format: .jxl, message: "quality \(quality) is not in 0...100")
        }
        guard (1...9).contains(effort) else {
            throw ImageEncodingError(.invalidParameter, format: .jxl, message: "effort \(effort) is not in 1...9")
        }
        try ImageEncodingError.checkFrame(frame, of: image, format: .jxl)
        let straight = image.straightAlpha()
        guard let encoder = JxlEncoderCreate(nil) else {
            throw ImageEncodingError(.failed, format: .jxl, message: "libjxl: out of memory")
        }
        defer { JxlEncoderDestroy(encoder) }
        func check(_ status: JxlEncoderStatus, _ what: String) throws(ImageEncodingError) {
            guard status == JXL_ENC_SUCCESS else {
                throw ImageEncodingError(.failed, format: .jxl, message: "libjxl: \(what)")
            }
        }
        let lossless = quality >= 100
        var info = JxlBasicInfo()
        JxlEncoderInitBasicInfo(&info)
        info.xsize = UInt32(straight.width)
        info.ysize = UInt32(straight.height)
        info.bits_per_sample = 8
        info.num_color_channels = 3
        info.uses_original_profile = lossless ? 1 : 0
        if straight.hasAlpha {
            info.num_extra_channels = 1
            info.alpha_bits = 8
        }
        try check(JxlEncoderSetBasicInfo(encoder, &info), "basic info")
        if includeICCProfile, let icc = straight.iccProfile, !icc.isEmpty {
            try check(
                icc.withUnsafeBufferPointer { JxlEncoderSetICCProfile(encoder, $0.baseAddress, $0.count) },
                "ICC profile")
        } else {
            var srgb = JxlColorEncoding()
            JxlColorEncodingSetToSRGB(&srgb, 0)
            try check(JxlEncoderSetColorEncoding(encoder, &srgb), "colour encoding")
        }
        guard let settings = JxlEncoderFrameSettingsCreate(encoder, nil) else {
            throw ImageEncodingError(.failed, format: .jxl, message: "libjxl: out of memory")
        }
        try check(JxlEncoderFrameSettingsSetOption(settings, JXL_ENC_FRAME_SETTING_EFFORT, Int64(effort)), "effort")
        if lossless {
            try check(JxlEncoderSetFrameLossless(settings, 1), "lossless")
        } else {
            try check(JxlEncoderSetFrameDistance(settings, JXLEncoder.distance(quality: quality)), "distance")
        }
        // RGBA with alpha, RGB without (libjxl takes a fourth channel only as alpha), rows packed.
        let channels = straight.hasAlpha ? 4 : 3
        let rowBytes = straight.width * channels
        var format = JxlPixelFormat(
            num_channels: UInt32(channels), data_type: JXL_TYPE_UINT8, endianness: JXL_NATIVE_ENDIAN, align: 0)
        let packed = JXLEncoder.pack(straight, frame: frame, channels: channels)
        try check(
            packed.withUnsafeBytes {
                JxlEncoderAddImageFrame(settings, &format, $0.baseAddress, rowBytes * straight.height)
            },
            "adding the image")
        JxlEncoderCloseInput(encoder)
        var output = [UInt8](repeating: 0, count: max(4096, rowBytes * straight.height / 4))
        var used = 0
        while true {
            var next: UnsafeMutablePointer<UInt8>?
            var available = 0
            let status = output.withUnsafeMutableBufferPointer { buffer -> JxlEncoderStatus in
                next = buffer.baseAddress! + used
                available = buffer.count - used
                let start = next
                let result = JxlEncoderProcessOutput(encoder, &next, &available)
                used += next! - start!
                return result
            }
            if status == JXL_ENC_NEED_MORE_OUTPUT {
                output.append(contentsOf: repeatElement(0, count: output.count))
                continue
            }
            try check(status, "encoding")
            break
        }
        return Array(output.prefix(used))
    }
}
