/// Writes baseline TIFF: one Deflate-compressed strip of 8-bit RGB, or RGBA with
/// unassociated alpha, little-endian, with the ICC profile when there is one.
///
/// ```swift
/// let tiff = try TIFFEncoder().encode(image)
/// ```
public struct TIFFEncoder: Sendable, Hashable {
    /// Embed the image's ICC profile when it has one.
    public var includeICCProfile: Bool

    /// A TIFF encoder.
    public init(includeICCProfile: Bool = true) {
        self.includeICCProfile = includeICCProfile
    }

    /// Encodes frame `frame` of `image`.
    public func encode(_ image: RasterImage, frame: Int = 0) throws(ImageEncodingError) -> [UInt8] {
        try ImageEncodingError.checkFrame(frame, of: image, format: .tiff)
        let straight = image.straightAlpha()
        let (width, height) = (straight.width, straight.height)
        let channels = straight.hasAlpha ? 4 : 3
        // The samples, rows packed, each row led by nothing (no predictor).
        var samples = [UInt8]()
        samples.reserveCapacity(width * height * channels)
        let pixels = straight.frames[frame].pixels
        for y in 0..<height {
            let row = y * straight.bytesPerRow
            if channels == 4 {
                samples += pixels[row..<row + width * 4]
            } else {
                for x in 0..<width { samples += pixels[row + x * 4..<row + x * 4 + 3] }
            }
        }
        guard let strip = samples.withUnsafeBytes({ PNGWriter.deflate($0, level: 6) }) else {
            throw ImageEncodingError(.failed, format: .tiff, message: "libdeflate could not compress the strip")
        }
        let icc = includeICCProfile ? straight.iccProfile ?? [] : []
        // Layout: header, the strip, the values too large for an entry, the directory.
        var entries: [(tag: Int, type: Int, count: Int, value: [UInt8])] = []
        func short(_ values: [Int]) -> [UInt8] {
            var bytes: [UInt8] = []
            for value in values { bytes.appendLittleEndian16(value) }
            return bytes
        }
        func long(_ values: [Int]) -> [UInt8] {
            var bytes: [UInt8] = []
            for value in values { bytes.appendLittleEndian32(value) }
            return bytes
        }
        let stripOffset = 8
        entries.append((256, 4, 1, long([width])))
        entries.append((257, 4, 1, long([height])))
        entries.append((258, 3, channels, short(Array(repeating: 8, count: channels))))
        entries.append((259, 3, 1, short([8])))  // Deflate (Adobe)
        entries.append((262, 3, 1, short([2])))  // RGB
        entries.append((273, 4, 1, long([stripOffset])))
        entries.append((277, 3, 1, short([channels])))
        entries.append((278, 4, 1, long([height])))
        entries.append((279, 4, 1, long([strip.count])))
        entries.append((282, 5, 1, long([72, 1])))
        entries.append((283, 5, 1, long([72, 1])))
        entries.append((284, 3, 1, short([1])))
        entries.append((296, 3, 1, short([2])))  // inches
        if channels == 4 { entries.append((338, 3, 1, short([2]))) }  // unassociated alpha
        if !icc.isEmpty { entries.append((34675, 7, icc.count, icc)) }
        var output: [UInt8] = [0x49, 0x49, 42, 0] + long([0])
        output += strip
        if output.count % 2 == 1 { output.append(0) }
        // Values longer than four bytes go before the directory, word-aligned.
        var placed: [[UInt8]] = []
        for entry in entries {
            if entry.value.count > 4 {
                placed.append(long([output.count]))
                output += entry.value
                if output.count % 2 == 1 { output.append(0) }
            } else {
                placed.append(entry.value + [UInt8](repeating: 0, count: 4 - entry.value.count))
            }
        }
        guard output.count + 2 + entries.count * 12 + 4 <= Int(UInt32.max) else {
            throw ImageEncodingError(
                .unsupportedImage, format: .tiff, message: "\(width)x\(height) is too large for TIFF")
        }
        output.replaceSubrange(4..<8, with: long([output.count]))
        output += short([entries.count])
        for (entry, value) in zip(entries, placed) {
            output += short([entry.tag, entry.type]) + long([entry.count]) + value
        }
        output += long([0])
        return output
    }
}
