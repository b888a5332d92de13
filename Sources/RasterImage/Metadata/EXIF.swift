/// Reads the one EXIF field the pipeline needs, the orientation, from an EXIF block
/// (JPEG APP1, PNG eXIf, WebP EXIF), without trusting any offset in it.
enum EXIF {
    /// The Orientation tag (0x0112) of IFD0, or `nil` when the block has none or is malformed.
    /// `block` may start with the JPEG APP1 prefix "Exif\0\0" or directly with the TIFF header.
    static func orientation(in block: some RandomAccessCollection<UInt8>) -> Orientation? {
        var bytes = Array(block)
        let prefix: [UInt8] = Array("Exif".utf8) + [0, 0]
        if bytes.starts(with: prefix) { bytes.removeFirst(prefix.count) }
        guard bytes.count >= 8 else { return nil }
        let littleEndian: Bool
        switch (bytes[0], bytes[1]) {
        case (0x49, 0x49): littleEndian = true
        case (0x4D, 0x4D): littleEndian = false
        default: return nil
        }
        let cursor = BinaryCursor(bytes, littleEndian: littleEndian)
        guard cursor.uint16(at: 2) == 42, let ifd = cursor.uint32(at: 4).map(Int.init),
            let count = cursor.uint16(at: ifd)
        else { return nil }
        for index in 0..<Int(count) {
            let entry = ifd + 2 + index * 12
            guard let tag = cursor.uint16(at: entry) else { return nil }
            guard tag == 0x0112 else { continue }
            // SHORT (type 3), one value, stored in the first two bytes of the value field.
            guard cursor.uint16(at: entry + 2) == 3, let value = cursor.uint16(at: entry + 8) else { return nil }
            return Orientation(rawValue: Int(value))
        }
        return nil
    }
}
