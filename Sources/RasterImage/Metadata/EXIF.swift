/// Reads the one EXIF field the pipeline needs, the orientation, from an EXIF block
/// (JPEG APP1, PNG eXIf, WebP EXIF), without trusting any offset in it.
enum EXIF {
    /// The Orientation tag (0x0112) of IFD0, or `nil` when the block has none or is malformed.
    /// `block` may start with the JPEG APP1 prefix "Exif\0\0" or directly with the TIFF header.
    static func orientation(in block: some RandomAccessCollection<UInt8>) -> Orientation? {
        guard let (tiff, ifd) = TIFFReader.open(block), let count = tiff.cursor.uint16(at: ifd) else { return nil }
        let cursor = tiff.cursor
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
