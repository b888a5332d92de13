extension Array where Element == UInt8 {
    /// Appends the low 16 bits of `value`, least significant byte first (BMP, ICO, TIFF).
    mutating func appendLittleEndian16(_ value: Int) {
        append(UInt8(truncatingIfNeeded: value))
        append(UInt8(truncatingIfNeeded: value >> 8))
    }

    /// Appends the low 32 bits of `value`, least significant byte first.
    mutating func appendLittleEndian32(_ value: Int) {
        for shift in stride(from: 0, to: 32, by: 8) { append(UInt8(truncatingIfNeeded: value >> shift)) }
    }
}
