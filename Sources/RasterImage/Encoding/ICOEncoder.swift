/// Writes a Windows icon holding one PNG-compressed image, as imgproxy does (PNG
/// entries are read by every Windows since Vista and by all browsers). ICO's sides
/// are at most 256 pixels: a larger image is refused with `.unsupportedImage`, and
/// callers that promise an icon (the service) fit the image first.
///
/// ```swift
/// let favicon = try ICOEncoder().encode(try image.thumbnail(options: ThumbnailOptions(maxPixelSize: 64)))
/// ```
public struct ICOEncoder: Sendable, Hashable {
    /// The PNG encoder for the entry.
    public var png: PNGEncoder

    /// The largest side an icon's entry can have.
    public static let maxSide = 256

    /// An ICO encoder whose entry is written by `png`.
    public init(png: PNGEncoder = PNGEncoder()) {
        self.png = png
    }

    /// Encodes frame `frame` of `image` as a one-entry icon.
    public func encode(_ image: RasterImage, frame: Int = 0) throws(ImageEncodingError) -> [UInt8] {
        try ImageEncodingError.checkFrame(frame, of: image, format: .ico)
        guard image.width <= ICOEncoder.maxSide, image.height <= ICOEncoder.maxSide else {
            throw ImageEncodingError(
                .unsupportedImage, format: .ico,
                message: "\(image.width)x\(image.height) is larger than an icon's 256 pixels a side")
        }
        let entry = try png.encode(image, frame: frame)
        var bytes: [UInt8] = [0, 0]
        bytes.appendLittleEndian16(1)  // an icon
        bytes.appendLittleEndian16(1)  // one image
        // Width and height 0 mean 256; one plane, 32 bits a pixel; the data follows the directory.
        bytes += [UInt8(image.width % 256), UInt8(image.height % 256), 0, 0]
        bytes.appendLittleEndian16(1)
        bytes.appendLittleEndian16(32)
        bytes.appendLittleEndian32(entry.count)
        bytes.appendLittleEndian32(6 + 16)
        bytes += entry
        return bytes
    }
}
