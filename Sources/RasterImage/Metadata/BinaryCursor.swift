/// Bounds-checked reads of little- or big-endian integers from untrusted bytes.
/// Every read returns `nil` past the end instead of trapping.
struct BinaryCursor<Bytes: RandomAccessCollection<UInt8>> where Bytes.Index == Int {
    let bytes: Bytes
    var littleEndian: Bool

    init(_ bytes: Bytes, littleEndian: Bool) {
        self.bytes = bytes
        self.littleEndian = littleEndian
    }

    func uint8(at offset: Int) -> UInt8? {
        guard offset >= 0, offset < bytes.count else { return nil }
        return bytes[bytes.startIndex + offset]
    }

    func uint16(at offset: Int) -> UInt16? {
        guard let a = uint8(at: offset), let b = uint8(at: offset + 1) else { return nil }
        return littleEndian ? UInt16(a) | UInt16(b) << 8 : UInt16(a) << 8 | UInt16(b)
    }

    func uint32(at offset: Int) -> UInt32? {
        guard let a = uint16(at: offset), let b = uint16(at: offset + 2) else { return nil }
        return littleEndian ? UInt32(a) | UInt32(b) << 16 : UInt32(a) << 16 | UInt32(b)
    }

    func int32(at offset: Int) -> Int32? {
        uint32(at: offset).map { Int32(bitPattern: $0) }
    }
}
