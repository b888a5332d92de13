import CDeflate
import ImageLoaderSupport

/// A zlib stream that codes every byte as a literal, with no matches: blocks of
/// ``blockBytes``, each with its own Huffman code built from its byte counts, or stored
/// when that is smaller.
///
/// This is what a photograph's filtered PNG rows want. Their residuals are noise, so
/// matches cost more bits than they save. The stream is as small as zlib's run-length
/// or Huffman-only strategies make it (within a fraction of a percent), in a fraction
/// of their time: a count of the bytes, a code of at most 15 bits a symbol, and one
/// table lookup a byte.
enum HuffmanDeflate {
    /// The bytes a block codes. Each block pays for its code table (about 90 bytes)
    /// and follows the statistics of its own rows.
    static let blockBytes = 1 << 15

    /// The zlib stream (RFC 1950) of `data`; nil when the buffer cannot be had.
    static func zlib(_ data: UnsafeRawBufferPointer) -> [UInt8]? {
        let count = data.count
        let blocks = max(1, (count + blockBytes - 1) / blockBytes)
        // A block is never larger than stored: its bytes, 5 bytes of header, at most a
        // byte of padding. The zlib header and trailer, and 8 bytes the writer's
        // whole-word stores may touch past the end.
        guard
            let capacity = Checked.multiply(blocks, 6).flatMap({ Checked.add($0, count) })
                .flatMap({ Checked.add($0, 2 + 4 + 8) })
        else { return nil }
        return PNGWriter.compressed(capacity: capacity) { buffer in
            var writer = BitWriter(buffer)
            // CMF: deflate, 32 KiB window; FLG: the fastest level, no dictionary, a multiple of 31.
            writer.writeByte(0x78)
            writer.writeByte(0x01)
            let bytes = data.baseAddress?.assumingMemoryBound(to: UInt8.self)
            var start = 0
            repeat {
                let length = min(blockBytes, count - start)
                writeBlock(bytes.map { $0 + start }, count: length, final: start + length == count, into: &writer)
                start += length
            } while start < count
            writer.alignToByte()
            let adler = libdeflate_adler32(1, data.baseAddress, count)
            for shift in stride(from: 24, through: 0, by: -8) {
                writer.writeByte(UInt8(truncatingIfNeeded: adler >> shift))
            }
            return writer.written
        }
    }

    /// One block of `count` bytes: Huffman-coded, or stored when that takes fewer bits.
    private static func writeBlock(
        _ bytes: UnsafePointer<UInt8>?, count: Int, final: Bool, into writer: inout BitWriter
    ) {
        // Literal counts, and the end-of-block symbol once. Four tables: consecutive
        // equal bytes would otherwise wait on each other's increments.
        var frequencies = [Int](repeating: 0, count: 257)
        frequencies[256] = 1
        if let bytes, count > 0 {
            withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 1024) { tables in
                tables.initialize(repeating: 0)
                let t = tables.baseAddress!
                var i = 0
                while i + 4 <= count {
                    t[Int(bytes[i])] &+= 1
                    t[256 + Int(bytes[i + 1])] &+= 1
                    t[512 + Int(bytes[i + 2])] &+= 1
                    t[768 + Int(bytes[i + 3])] &+= 1
                    i += 4
                }
                while i < count {
                    t[Int(bytes[i])] &+= 1
                    i += 1
                }
                for b in 0..<256 { frequencies[b] = Int(t[b]) + Int(t[256 + b]) + Int(t[512 + b]) + Int(t[768 + b]) }
            }
        }
        let literalLengths = HuffmanCode.lengths(frequencies, maxLength: 15)
        // No distances are used; two codes of one bit keep the distance code complete
        // for every inflater (zlib writes the same).
        let header = DynamicHeader(literalLengths: literalLengths, distanceLengths: [1, 1])
        var dataBits = 0
        for symbol in 0..<257 { dataBits += frequencies[symbol] * Int(literalLengths[symbol]) }
        let huffmanBits = 3 + header.bits + dataBits
        // Stored: 3 header bits, padding to a byte, LEN and NLEN, the bytes.
        let storedBits = 3 + (8 - (writer.pendingBits + 3) % 8) % 8 + 32 + count * 8
        if huffmanBits >= storedBits || bytes == nil {
            writer.write(final ? 1 : 0, bits: 3)
            writer.alignToByte()
            let length = UInt16(count)
            for byte in [UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF), UInt8(~length >> 8)] {
                writer.writeByte(byte)
            }
            if let bytes { writer.copy(bytes, count: count) }
            return
        }
        writer.write(final ? 5 : 4, bits: 3)
        header.write(into: &writer)
        let codes = HuffmanCode.codes(literalLengths)
        // One table entry a byte: the code, bit-reversed for LSB-first output, and its length above bit 16.
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 256) { table in
            for b in 0..<256 { table[b] = UInt32(codes[b]) | UInt32(literalLengths[b]) << 16 }
            writer.writeSymbols(bytes!, count: count, table: UnsafePointer(table.baseAddress!))
        }
        writer.write(UInt64(codes[256]), bits: Int(literalLengths[256]))
    }
}

/// The code lengths of a dynamic block's two alphabets, as the block's header sends them:
/// run-length coded (RFC 1951 3.2.7) under a code of their own.
private struct DynamicHeader {
    /// The order in which the code-length code's lengths are sent.
    static let order = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]

    let literalCount: Int
    let distanceCount: Int
    /// The run-length symbols (0 to 18), each with its extra bits' value.
    let symbols: [(symbol: Int, extra: Int)]
    let lengthLengths: [UInt8]
    let lengthCodes: [UInt16]
    let sentLengthCount: Int
    /// The header's size after BFINAL and BTYPE.
    let bits: Int

    init(literalLengths: [UInt8], distanceLengths: [UInt8]) {
        literalCount = literalLengths.count
        distanceCount = distanceLengths.count
        let all = literalLengths + distanceLengths
        var symbols: [(symbol: Int, extra: Int)] = []
        var i = 0
        while i < all.count {
            let value = all[i]
            var run = 1
            while i + run < all.count && all[i + run] == value { run += 1 }
            i += run
            if value == 0 {
                while run >= 11 {
                    let n = min(run, 138)
                    symbols.append((18, n - 11))
                    run -= n
                }
                if run >= 3 {
                    symbols.append((17, run - 3))
                    run = 0
                }
            } else {
                symbols.append((Int(value), 0))
                run -= 1
                while run >= 3 {
                    let n = min(run, 6)
                    symbols.append((16, n - 3))
                    run -= n
                }
            }
            for _ in 0..<run { symbols.append((Int(value), 0)) }
        }
        var frequencies = [Int](repeating: 0, count: 19)
        for entry in symbols { frequencies[entry.symbol] += 1 }
        lengthLengths = HuffmanCode.lengths(frequencies, maxLength: 7)
        lengthCodes = HuffmanCode.codes(lengthLengths)
        var sent = 19
        while sent > 4 && lengthLengths[DynamicHeader.order[sent - 1]] == 0 { sent -= 1 }
        sentLengthCount = sent
        var bits = 5 + 5 + 4 + 3 * sent
        for entry in symbols {
            bits += Int(lengthLengths[entry.symbol])
            bits += entry.symbol == 16 ? 2 : entry.symbol == 17 ? 3 : entry.symbol == 18 ? 7 : 0
        }
        self.symbols = symbols
        self.bits = bits
    }

    func write(into writer: inout BitWriter) {
        writer.write(UInt64(literalCount - 257), bits: 5)
        writer.write(UInt64(distanceCount - 1), bits: 5)
        writer.write(UInt64(sentLengthCount - 4), bits: 4)
        for k in 0..<sentLengthCount { writer.write(UInt64(lengthLengths[DynamicHeader.order[k]]), bits: 3) }
        for entry in symbols {
            writer.write(UInt64(lengthCodes[entry.symbol]), bits: Int(lengthLengths[entry.symbol]))
            switch entry.symbol {
            case 16: writer.write(UInt64(entry.extra), bits: 2)
            case 17: writer.write(UInt64(entry.extra), bits: 3)
            case 18: writer.write(UInt64(entry.extra), bits: 7)
            default: break
            }
        }
    }
}

/// Length-limited canonical Huffman codes (RFC 1951 3.2.2).
enum HuffmanCode {
    /// The code length of each symbol for `frequencies`, none above `maxLength`; 0 for
    /// unused symbols. At least two symbols get a code (a used one and, if it is alone,
    /// the first unused), so the code is always complete.
    static func lengths(_ frequencies: [Int], maxLength: Int) -> [UInt8] {
        var lengths = [UInt8](repeating: 0, count: frequencies.count)
        // Used symbols, rarest first (ties by symbol, so the code is deterministic).
        var symbols = frequencies.indices.filter { frequencies[$0] > 0 }
        if symbols.count < 2 {
            if let extra = frequencies.indices.first(where: { !symbols.contains($0) }) { symbols.append(extra) }
            for s in symbols { lengths[s] = 1 }
            return lengths
        }
        symbols.sort { (frequencies[$0], $0) < (frequencies[$1], $1) }
        // Huffman's tree by the two-queue method: leaves in order, then internal nodes,
        // which are made in order of weight. Nodes 0..<n are the leaves.
        let n = symbols.count
        var weight = symbols.map { frequencies[$0] } + [Int](repeating: 0, count: n - 1)
        var parent = [Int](repeating: 0, count: 2 * n - 1)
        var (leaf, node) = (0, n)
        for next in n..<(2 * n - 1) {
            func smallest() -> Int {
                if leaf < n && (node >= next || weight[leaf] <= weight[node]) {
                    leaf += 1
                    return leaf - 1
                }
                node += 1
                return node - 1
            }
            let (a, b) = (smallest(), smallest())
            weight[next] = weight[a] + weight[b]
            parent[a] = next
            parent[b] = next
        }
        // Depths from the root (the last node) down; parents come after their children.
        var depth = [Int](repeating: 0, count: 2 * n - 1)
        for k in stride(from: 2 * n - 3, through: 0, by: -1) { depth[k] = depth[parent[k]] + 1 }
        // How many leaves at each length, those past the limit moved to it; then the
        // Kraft sum brought back to exactly 1 by lengthening the longest codes below
        // the limit, one leaf at a time.
        var counts = [Int](repeating: 0, count: max(maxLength, depth.max() ?? 0) + 1)
        for k in 0..<n { counts[min(depth[k], maxLength)] += 1 }
        var total = 0
        for length in 1...maxLength { total += counts[length] << (maxLength - length) }
        while total > 1 << maxLength {
            counts[maxLength] -= 1
            for length in stride(from: maxLength - 1, through: 1, by: -1) where counts[length] > 0 {
                counts[length] -= 1
                counts[length + 1] += 2
                break
            }
            total -= 1
        }
        // The shortest codes to the most frequent symbols.
        var k = n - 1
        for length in 1...maxLength {
            for _ in 0..<counts[length] {
                lengths[symbols[k]] = UInt8(length)
                k -= 1
            }
        }
        return lengths
    }

    /// The canonical codes of `lengths`, bit-reversed: deflate sends codes most
    /// significant bit first into a stream written from the least significant bit.
    static func codes(_ lengths: [UInt8]) -> [UInt16] {
        let maxLength = Int(lengths.max() ?? 0)
        var counts = [Int](repeating: 0, count: maxLength + 1)
        for length in lengths where length > 0 { counts[Int(length)] += 1 }
        var next = [Int](repeating: 0, count: maxLength + 2)
        var code = 0
        for length in stride(from: 1, through: maxLength, by: 1) {
            code = (code + counts[length - 1]) << 1
            next[length] = code
        }
        var codes = [UInt16](repeating: 0, count: lengths.count)
        for (symbol, length) in lengths.enumerated() where length > 0 {
            let value = next[Int(length)]
            next[Int(length)] += 1
            var reversed = 0
            for bit in 0..<Int(length) where value & (1 << bit) != 0 { reversed |= 1 << (Int(length) - 1 - bit) }
            codes[symbol] = UInt16(reversed)
        }
        return codes
    }
}

/// Writes a deflate stream from the least significant bit up, into a buffer sized by
/// its caller. Bits wait in a 64-bit word and go out a whole byte at a time; a store
/// may touch up to 8 bytes past the last whole byte, which the caller's capacity allows.
private struct BitWriter {
    private let start: UnsafeMutablePointer<UInt8>
    private var out: UnsafeMutablePointer<UInt8>
    private var buffer: UInt64 = 0
    private var count = 0

    init(_ start: UnsafeMutablePointer<UInt8>) {
        self.start = start
        out = start
    }

    /// Bytes complete so far.
    var written: Int { out - start }
    /// Bits written but not yet a whole byte.
    var pendingBits: Int { count }

    /// Stores the whole bytes among the waiting bits.
    @inline(__always)
    private mutating func flush() {
        UnsafeMutableRawPointer(out).storeBytes(of: buffer.littleEndian, as: UInt64.self)
        let bytes = count >> 3
        out += bytes
        buffer = bytes == 8 ? 0 : buffer >> (bytes * 8)
        count &= 7
    }

    /// The low `bits` (at most 32) of `value`.
    mutating func write(_ value: UInt64, bits: Int) {
        buffer |= value << count
        count += bits
        flush()
    }

    mutating func writeByte(_ byte: UInt8) { write(UInt64(byte), bits: 8) }

    /// Pads to a whole byte with zero bits.
    mutating func alignToByte() {
        count = (count + 7) & ~7
        flush()
    }

    /// Copies bytes after a byte boundary (a stored block's).
    mutating func copy(_ bytes: UnsafePointer<UInt8>, count n: Int) {
        out.update(from: bytes, count: n)
        out += n
    }

    /// Codes `count` bytes through `table` (code in the low 16 bits, length above):
    /// three codes of at most 15 bits fit beside the at most 7 bits left waiting.
    @inline(__always)
    mutating func writeSymbols(_ bytes: UnsafePointer<UInt8>, count n: Int, table: UnsafePointer<UInt32>) {
        var (buffer, count, out) = (self.buffer, UInt64(self.count), self.out)
        @inline(__always) func put(_ byte: UInt8) {
            let entry = table[Int(byte)]
            buffer |= UInt64(entry & 0xFFFF) &<< count
            count &+= UInt64(entry >> 16)
        }
        @inline(__always) func store() {
            UnsafeMutableRawPointer(out).storeBytes(of: buffer.littleEndian, as: UInt64.self)
            let whole = count >> 3
            out += Int(whole)
            buffer = whole == 8 ? 0 : buffer &>> (whole &* 8)
            count &= 7
        }
        var i = 0
        while i + 3 <= n {
            put(bytes[i])
            put(bytes[i + 1])
            put(bytes[i + 2])
            store()
            i += 3
        }
        while i < n {
            put(bytes[i])
            store()
            i += 1
        }
        (self.buffer, self.count, self.out) = (buffer, Int(count), out)
    }
}
