/// Writes Windows bitmaps: 24 bits a pixel (BI_RGB) for opaque images, 32 with an alpha
/// mask (a BITMAPV4HEADER with BI_BITFIELDS, as libvips and browsers read it) for
/// images with transparency; rows bottom-up, uncompressed.
///
/// ```swift
/// let bmp = try BMPEncoder().encode(image)
/// ```
public struct BMPEncoder: Sendable, Hashable {
    /// A BMP encoder.
    public init() {}

    /// Encodes frame `frame` of `image`.
    public func encode(_ image: RasterImage, frame: Int = 0) throws(ImageEncodingError) -> [UInt8] {
        try ImageEncodingError.checkFrame(frame, of: image, format: .bmp)
        let straight = image.straightAlpha()
        let (width, height) = (straight.width, straight.height)
        let alpha = straight.hasAlpha
        let bits = alpha ? 32 : 24
        let rowBytes = (width * bits + 31) / 32 * 4
        let headerSize = alpha ? 108 : 40
        let offset = 14 + headerSize
        guard let imageBytes = Checked.multiply(rowBytes, height), let total = Checked.add(offset, imageBytes),
            total <= Int(UInt32.max)
        else {
            throw ImageEncodingError(
                .unsupportedImage, format: .bmp, message: "\(width)x\(height) is too large for BMP")
        }
        func le16(_ value: Int) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF)] }
        func le32(_ value: Int) -> [UInt8] { le16(value & 0xFFFF) + le16(value >> 16 & 0xFFFF) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(total)
        bytes += [0x42, 0x4D] + le32(total) + le32(0) + le32(offset)
        // 2835 pixels a metre: 72 DPI.
        bytes += le32(headerSize) + le32(width) + le32(height) + le16(1) + le16(bits) + le32(alpha ? 3 : 0)
        bytes += le32(imageBytes) + le32(2835) + le32(2835) + le32(0) + le32(0)
        if alpha {
            // Masks (red, green, blue, alpha), the sRGB colour space ('sRGB'), no endpoints or gamma.
            bytes += le32(0x00FF_0000) + le32(0x0000_FF00) + le32(0x0000_00FF) + le32(Int(0xFF00_0000))
            bytes += [0x42, 0x47, 0x52, 0x73] + [UInt8](repeating: 0, count: 36 + 12)
        }
        let pixels = straight.frames[frame].pixels
        let padding = [UInt8](repeating: 0, count: rowBytes - width * bits / 8)
        for y in stride(from: height - 1, through: 0, by: -1) {
            let row = y * straight.bytesPerRow
            for x in 0..<width {
                let p = row + x * 4
                bytes +=
                    alpha
                    ? [pixels[p + 2], pixels[p + 1], pixels[p], pixels[p + 3]]
                    : [pixels[p + 2], pixels[p + 1], pixels[p]]
            }
            bytes += padding
        }
        return bytes
    }
}
