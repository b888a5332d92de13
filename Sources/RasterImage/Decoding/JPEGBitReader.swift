/// Reads entropy-coded bits: stuffed zero bytes taken out, stopping at a marker, after
/// which it gives zeros and notes that it ran over.
struct JPEGBitReader {
    private let base: UnsafePointer<UInt8>
    private let end: Int
    /// The next byte to take; at a marker, its first 0xFF.
    private(set) var position: Int
    private var buffer: UInt64 = 0
    private var count = 0
    /// Whether bits were taken past the data (the zeros given after a marker or the end).
    private(set) var overran = false
    private var atMarker = false

    init(base: UnsafePointer<UInt8>, start: Int, end: Int) {
        self.base = base
        self.position = start
        self.end = end
    }

    @inline(never)
    private mutating func fill() {
        // Most of the time the next eight bytes hold no 0xFF: as many of them as fit at once.
        if !atMarker && count <= 56 && end - position >= 8 {
            let word = UInt64(bigEndian: UnsafeRawPointer(base + position).loadUnaligned(as: UInt64.self))
            let inverted = ~word
            if (inverted &- 0x0101_0101_0101_0101) & ~inverted & 0x8080_8080_8080_8080 == 0 {
                let take = (64 - count) / 8
                buffer |= (word >> UInt64(64 - 8 * take)) << UInt64(64 - count - 8 * take)
                position += take
                count += 8 * take
                return
            }
        }
        while count <= 56 && !atMarker {
            guard position < end else {
                atMarker = true
                return
            }
            let byte = base[position]
            if byte == 0xFF {
                guard position + 1 < end, base[position + 1] == 0 else {
                    atMarker = true
                    return
                }
                position += 2
            } else {
                position += 1
            }
            buffer |= UInt64(byte) << UInt64(56 - count)
            count += 8
        }
    }

    @inline(__always)
    private mutating func consume(_ n: Int) {
        if n > count {
            overran = true
            count = n
        }
        buffer <<= UInt64(n)
        count -= n
    }

    /// The next `n` bits (0 to 16), as an unsigned number.
    @inline(__always)
    mutating func bits(_ n: Int) -> Int32 {
        guard n > 0 else { return 0 }
        if count < n { fill() }
        let value = Int32(truncatingIfNeeded: buffer >> UInt64(64 - n))
        consume(n)
        return value
    }

    /// Steps over the next `n` bits (any number).
    @inline(__always)
    mutating func skip(_ n: Int) {
        var left = n
        while left > 16 {
            _ = bits(16)
            left -= 16
        }
        _ = bits(left)
    }

    /// T.81's EXTEND: `value`, `n` bits read, as the signed value of magnitude category `n`.
    @inline(__always)
    static func extend(_ value: Int32, _ n: Int) -> Int32 {
        n > 0 && value < (1 << Int32(n - 1)) ? value &+ (-1 << Int32(n)) &+ 1 : value
    }

    /// The next symbol of `table`, or `nil` for a code the table does not hold.
    @inline(__always)
    mutating func decode(_ table: JPEGHuffmanTable) -> UInt8? {
        if count < 16 { fill() }
        let entry = table.fast[Int(buffer >> 55)]
        guard entry != 0 else { return decodeLong(table) }
        consume(Int(entry >> 8))
        return UInt8(truncatingIfNeeded: entry)
    }

    /// A symbol of nonzero size and its extra bits together, when the first look's 9
    /// bits hold both (most of them): its ``JPEGHuffmanTable/fastValue`` entry, the bits
    /// taken; 0, nothing taken, otherwise.
    @inline(__always)
    mutating func decodeValue(_ table: JPEGHuffmanTable) -> Int32 {
        if count < 16 { fill() }
        let entry = table.fastValue[Int(buffer >> 55)]
        if entry != 0 { consume(Int(entry & 0xFF)) }
        return entry
    }

    /// A code longer than the first look's 9 bits.
    @inline(never)
    private mutating func decodeLong(_ table: JPEGHuffmanTable) -> UInt8? {
        var length = 10
        var code = Int32(truncatingIfNeeded: buffer >> 54)
        while length <= 16 && code > table.maxCode[length] {
            length += 1
            code = Int32(truncatingIfNeeded: buffer >> UInt64(64 - length))
        }
        guard length <= 16 else { return nil }
        let index = Int(code + table.valueOffset[length])
        guard index >= 0, index < table.values.count else { return nil }
        consume(length)
        return table.values[index]
    }

    /// Steps over a restart marker `RSTn` (fill bytes before it allowed), dropping the
    /// bits left of the interval; `false` when anything else is there.
    mutating func restart(_ n: Int) -> Bool {
        buffer = 0
        count = 0
        var at = position
        while at < end && base[at] == 0xFF { at += 1 }
        guard at > position, at < end, Int(base[at]) == 0xD0 + n else { return false }
        position = at + 1
        atMarker = false
        return true
    }

    /// Where the marker after the scan's data starts, when the data ends there exactly
    /// (its last byte's padding bits dropped) and that marker is not a restart marker.
    func endOfScan() -> Int? {
        var at = position
        guard at < end, base[at] == 0xFF else { return nil }
        while at < end && base[at] == 0xFF { at += 1 }
        guard at < end, base[at] != 0, !(0xD0...0xD7).contains(base[at]) else { return nil }
        return at - 1
    }
}
