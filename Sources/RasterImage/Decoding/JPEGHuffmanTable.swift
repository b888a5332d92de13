/// A JPEG Huffman table (T.81 Annex C, F.2.2.3), with a 9-bit first look.
struct JPEGHuffmanTable {
    /// For each 9-bit prefix: the code's length (high byte) and its symbol; 0 when longer.
    private(set) var fast = [UInt16](repeating: 0, count: 1 << 9)
    /// The largest code of each length (-1 when none), and where its symbols start.
    private(set) var maxCode = [Int32](repeating: -1, count: 18)
    private(set) var valueOffset = [Int32](repeating: 0, count: 18)
    private(set) var values: [UInt8] = []
    /// For each 9-bit prefix that holds a whole code of nonzero size and its extra bits:
    /// the value those bits make (T.81's EXTEND, high 16 bits), the run (bits 8 to 11)
    /// and the bits taken (low byte); 0 when the prefix holds less.
    private(set) var fastValue = [Int32](repeating: 0, count: 1 << 9)

    /// The table from a DHT segment's 16 counts and its symbols; `nil` when the counts
    /// describe more codes than their lengths hold (libjpeg's "bad Huffman table").
    init?(counts: UnsafePointer<UInt8>, symbols: UnsafePointer<UInt8>, total: Int) {
        values = Array(UnsafeBufferPointer(start: symbols, count: total))
        var code: Int32 = 0
        var index: Int32 = 0
        for length in 1...16 {
            let count = Int32(counts[length - 1])
            if count > 0 {
                valueOffset[length] = index - code
                code += count
                index += count
                maxCode[length] = code - 1
                guard code <= (1 << length) else { return nil }
            }
            code <<= 1
        }
        maxCode[17] = .max
        // Every 9-bit prefix that begins with a code of at most 9 bits.
        var next = 0
        var symbol = 0
        for length in 1...9 {
            for _ in 0..<Int(counts[length - 1]) {
                let shift = 9 - length
                let first = next << shift
                let value = values[symbol]
                let (run, size) = (Int32(value >> 4), Int(value & 15))
                for prefix in first..<(first + (1 << shift)) {
                    fast[prefix] = UInt16(length << 8) | UInt16(value)
                    guard size != 0, length + size <= 9 else { continue }
                    let extra = Int32((prefix >> (9 - length - size)) & ((1 << size) - 1))
                    let extended = JPEGBitReader.extend(extra, size)
                    fastValue[prefix] = extended << 16 | run << 8 | Int32(length + size)
                }
                next += 1
                symbol += 1
            }
            next <<= 1
        }
    }
}
