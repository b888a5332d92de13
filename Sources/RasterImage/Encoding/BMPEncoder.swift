import ImageLoaderSupport

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
        var bytes: [UInt8] = [0x42, 0x4D]
        bytes.reserveCapacity(total)
        for value in [total, 0, offset, headerSize, width, height] { bytes.appendLittleEndian32(value) }
        bytes.appendLittleEndian16(1)
        bytes.appendLittleEndian16(bits)
        // BI_BITFIELDS with alpha; 2835 pixels a metre: 72 DPI.
        for value in [alpha ? 3 : 0, imageBytes, 2835, 2835, 0, 0] { bytes.appendLittleEndian32(value) }
        if alpha {
            // Masks (red, green, blue, alpha), the sRGB colour space ('sRGB'), no endpoints or gamma.
            for mask in [0x00FF_0000, 0x0000_FF00, 0x0000_00FF, 0xFF00_0000] { bytes.appendLittleEndian32(mask) }
            bytes += [0x42, 0x47, 0x52, 0x73] + [UInt8](repeating: 0, count: 36 + 12)
        }
        let pixels = straight.frames[frame].pixels
        let padding = [UInt8](repeating: 0, count: rowBytes - width * bits / 8)
        for y in stride(from: height - 1, through: 0, by: -1) {
            let row = y * straight.bytesPerRow
            for x in 0..<width {
                let p = row + x * 4
                bytes.append(pixels[p + 2])
                bytes.append(pixels[p + 1])
                bytes.append(pixels[p])
                if alpha { bytes.append(pixels[p + 3]) }
            }
            bytes += padding
        }
        return bytes
    }
}
