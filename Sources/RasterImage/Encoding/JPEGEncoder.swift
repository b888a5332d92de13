import CJPEG

/// Writes JPEG with libjpeg-turbo. JPEG has no alpha: a transparent image is first
/// composited onto ``background``.
///
/// ```swift
/// let jpeg = try JPEGEncoder(quality: 85, progressive: true).encode(thumbnail)
/// ```
public struct JPEGEncoder: Sendable, Hashable {
    /// Chroma resolution against luma.
    public enum ChromaSubsampling: Int, Sendable, Hashable, Codable {
        /// Full colour resolution: best for small images and sharp colour edges.
        case none = 0
        /// Half horizontally.
        case half = 1
        /// Half both ways (4:2:0): the usual for photographs, the smallest files.
        case quarter = 2
    }

    /// 1 (smallest) to 100 (best).
    public var quality: Int
    /// Write a progressive JPEG (smaller, shown coarse to fine).
    public var progressive: Bool
    /// Optimised Huffman tables: a few percent smaller, a little slower.
    public var optimizeHuffmanTables: Bool
    /// How colour is subsampled: 4:2:0 (smaller) or 4:4:4 (sharper colour edges).
    public var chromaSubsampling: ChromaSubsampling
    /// Embed the image's ICC profile (APP2) when it has one.
    public var includeICCProfile: Bool
    /// What transparent pixels are shown against: R, G, B.
    public var background: (UInt8, UInt8, UInt8) {
        get { (backgroundColor[0], backgroundColor[1], backgroundColor[2]) }
        set { backgroundColor = [newValue.0, newValue.1, newValue.2] }
    }
    private var backgroundColor: [UInt8] = [255, 255, 255]
    /// An EXIF block (a TIFF structure, as ``PhotoMetadata/outputBlock(from:keeping:upright:)``
    /// makes one) written as APP1; `nil` (the default): none. At most 65,527 bytes, else left out.
    public var exif: [UInt8]?
    /// Write one grey component when every pixel of the frame is grey (red, green and
    /// blue equal), as a grey source's results are kept: a third of the data, the same
    /// look. Off by default.
    public var grayscale = false

    /// A JPEG encoder: quality 1 to 100, baseline or progressive, optimised Huffman
    /// tables, chroma subsampling, the ICC profile embedded unless `includeICCProfile` is false.
    public init(
        quality: Int = 85, progressive: Bool = false, optimizeHuffmanTables: Bool = true,
        chromaSubsampling: ChromaSubsampling = .quarter, includeICCProfile: Bool = true
    ) {
        self.quality = quality
        self.progressive = progressive
        self.optimizeHuffmanTables = optimizeHuffmanTables
        self.chromaSubsampling = chromaSubsampling
        self.includeICCProfile = includeICCProfile
    }

    /// Encodes frame `frame` of `image`.
    public func encode(_ image: RasterImage, frame: Int = 0) throws(ImageEncodingError) -> [UInt8] {
        guard (1...100).contains(quality) else {
            throw ImageEncodingError(.invalidParameter, format: .jpeg, message: "quality \(quality) is not in 1...100")
        }
        try ImageEncodingError.checkFrame(frame, of: image, format: .jpeg)
        guard image.width <= 65_500 && image.height <= 65_500 else {
            throw ImageEncodingError(
                .unsupportedImage, format: .jpeg, message: "JPEG is limited to 65500 pixels a side")
        }
        let flat = image.hasAlpha ? image.flattened(onto: backgroundColor) : image
        let icc = includeICCProfile ? flat.iccProfile ?? [] : []
        let exif = exif.flatMap { $0.count <= 65_527 ? $0 : nil } ?? []
        let writesGrey = grayscale && flat.isGray(frame: frame)
        var message = [CChar](repeating: 0, count: 200)
        var output: UnsafeMutablePointer<UInt8>? = nil
        var size: UInt = 0
        let status = flat.frames[frame].pixels.withUnsafeBufferPointer { pixels in
            icc.withUnsafeBufferPointer { icc in
                exif.withUnsafeBufferPointer { exif in
                    var settings = cjpeg_encode_settings(
                        quality: Int32(quality), progressive: progressive ? 1 : 0,
                        optimize: optimizeHuffmanTables ? 1 : 0, subsampling: Int32(chromaSubsampling.rawValue),
                        icc: icc.baseAddress, icc_length: UInt32(icc.count), exif: exif.baseAddress,
                        exif_length: UInt32(exif.count), grayscale: writesGrey ? 1 : 0)
                    return cjpeg_encode_rgba(
                        pixels.baseAddress, UInt32(flat.width), UInt32(flat.height), flat.bytesPerRow, &settings,
                        &output, &size, &message, message.count)
                }
            }
        }
        guard status == 0, let output else {
            throw ImageEncodingError(.failed, format: .jpeg, message: "libjpeg: \(CString.decode(message))")
        }
        defer { cjpeg_free(output) }
        return Array(UnsafeBufferPointer(start: output, count: Int(size)))
    }
}

extension RasterImage {
    /// Every frame composited onto an opaque colour (R, G, B); the result is opaque.
    func flattened(onto color: [UInt8]) -> RasterImage {
        let straight = straightAlpha()
        let frames = straight.frames.map { frame in
            var pixels = frame.pixels
            pixels.withUnsafeMutableBufferPointer { buffer in
                for y in 0..<height {
                    var p = buffer.baseAddress! + y * bytesPerRow
                    for _ in 0..<width {
                        let a = UInt32(p[3])
                        if a != 255 {
                            for c in 0..<3 {
                                p[c] =
                                    PixelAlpha.multiply(UInt32(p[c]), a)
                                    &+ PixelAlpha.multiply(UInt32(color[c]), 255 - a)
                            }
                            p[3] = 255
                        }
                        p += 4
                    }
                }
            }
            return Frame(pixels: pixels, duration: frame.duration)
        }
        return straight.with(frames: frames, hasAlpha: false)
    }
}
