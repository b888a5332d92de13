import Foundation
import Testing

@testable import RasterImage

@Suite("Huffman-only deflate")
struct HuffmanDeflateTests {
    /// A deterministic generator (SplitMix64), so a failure can be replayed.
    struct Generator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static func compress(_ data: [UInt8]) throws -> [UInt8] {
        try #require(data.withUnsafeBytes { HuffmanDeflate.zlib($0) })
    }

    /// Bytes drawn so that byte value k is about twice as likely as k + 1: a skewed
    /// alphabet whose rarest symbols want codes longer than deflate's 15 bits.
    static func geometric(count: Int, seed: UInt64) -> [UInt8] {
        var generator = Generator(state: seed)
        return (0..<count).map { _ in UInt8(min(255, generator.next().trailingZeroBitCount)) }
    }

    /// Residual-like noise: small magnitudes around zero, as signed bytes.
    static func residuals(count: Int, seed: UInt64) -> [UInt8] {
        var generator = Generator(state: seed)
        return (0..<count).map { _ in
            let r = generator.next()
            let magnitude = Int(r & 0x1F) * Int((r >> 5) & 0x3) / 3
            return UInt8(truncatingIfNeeded: (r >> 8) & 1 == 0 ? magnitude : -magnitude)
        }
    }

    static func entropyBits(_ data: [UInt8]) -> Double {
        var counts = [Int](repeating: 0, count: 256)
        for b in data { counts[Int(b)] += 1 }
        let n = Double(data.count)
        return counts.filter { $0 > 0 }.reduce(0) { $0 - Double($1) * log2(Double($1) / n) }
    }

    @Test(
        "streams inflate to the input, with libdeflate",
        arguments: [
            0, 1, 2, 3, 100, HuffmanDeflate.blockBytes - 1, HuffmanDeflate.blockBytes,
            HuffmanDeflate.blockBytes + 1, 5 * HuffmanDeflate.blockBytes + 7,
        ])
    func roundTrip(_ count: Int) throws {
        var generator = Generator(state: UInt64(count))
        let inputs: [(String, [UInt8])] = [
            ("zeros", [UInt8](repeating: 0, count: count)),
            ("one value", [UInt8](repeating: 0xA5, count: count)),
            ("uniform noise", (0..<count).map { _ in UInt8(truncatingIfNeeded: generator.next()) }),
            ("residuals", Self.residuals(count: count, seed: 3)),
            ("skewed", Self.geometric(count: count, seed: 4)),
            (
                "text",
                Array(
                    String(repeating: "The quick brown fox jumps over the lazy dog. ", count: count / 45 + 1).utf8
                        .prefix(count))
            ),
        ]
        for (name, input) in inputs {
            // When it is compressed
            let stream = try Self.compress(input)
            // Then libdeflate inflates it (checking the Adler-32) to the same bytes
            #expect(PNGWriterTests.inflate(stream, count: input.count) == input, "\(name), \(count) bytes")
            // And no block is larger than stored
            let blocks = max(1, (count + HuffmanDeflate.blockBytes - 1) / HuffmanDeflate.blockBytes)
            #expect(stream.count <= 2 + count + 6 * blocks + 4, "\(name), \(count) bytes")
        }
    }

    @Test("codes stay within 15 bits when the counts would want longer ones, and cost near the entropy")
    func lengthLimited() throws {
        // Given byte counts doubling from value to value (unlimited Huffman codes would
        // reach 17 bits and more for the rarest)
        var frequencies = [Int](repeating: 0, count: 257)
        for k in 0..<25 { frequencies[k] = 1 << (24 - k) }
        frequencies[256] = 1
        // When their lengths are limited to 15
        let lengths = HuffmanCode.lengths(frequencies, maxLength: 15)
        // Then none exceeds 15, every used symbol has one, and the code is complete
        #expect(lengths.max() == 15)
        #expect(frequencies.indices.allSatisfy { (frequencies[$0] > 0) == (lengths[$0] > 0) })
        let kraft = lengths.filter { $0 > 0 }.reduce(0.0) { $0 + pow(2, -Double($1)) }
        #expect(kraft == 1)
        // And the more frequent symbol never gets the longer code
        for k in 1..<25 { #expect(lengths[k - 1] <= lengths[k], "symbol \(k)") }
        // And a stream of such bytes costs within 2% (plus the tables) of its entropy
        let input = Self.geometric(count: 200_000, seed: 9)
        let stream = try Self.compress(input)
        #expect(PNGWriterTests.inflate(stream, count: input.count) == input)
        let blocks = (input.count + HuffmanDeflate.blockBytes - 1) / HuffmanDeflate.blockBytes
        let entropyBytes = Self.entropyBits(input) / 8
        #expect(Double(stream.count) >= entropyBytes)
        #expect(Double(stream.count) <= entropyBytes * 1.02 + Double(blocks * 100))
    }

    @Test("one used symbol, or a few, still get a complete code")
    func fewSymbols() throws {
        for used in [[3], [256], [0, 256], [7, 8, 9]] {
            var frequencies = [Int](repeating: 0, count: 257)
            for s in used { frequencies[s] = 10 }
            let lengths = HuffmanCode.lengths(frequencies, maxLength: 15)
            let kraft = lengths.filter { $0 > 0 }.reduce(0.0) { $0 + pow(2, -Double($1)) }
            #expect(kraft == 1, "\(used)")
            #expect(used.allSatisfy { lengths[$0] > 0 }, "\(used)")
        }
    }

    @Test("incompressible blocks are stored, compressible ones coded")
    func storedOrCoded() throws {
        // Given uniform noise, which no Huffman code shortens
        var generator = Generator(state: 11)
        let noise = (0..<100_000).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        // Then the stream is the bytes plus the stored blocks' headers, no more
        let stream = try Self.compress(noise)
        let blocks = (noise.count + HuffmanDeflate.blockBytes - 1) / HuffmanDeflate.blockBytes
        #expect(stream.count == 2 + noise.count + 5 * blocks + 4)
        // And residual-like bytes come out well under their size, near their entropy
        let residuals = Self.residuals(count: 100_000, seed: 12)
        let coded = try Self.compress(residuals)
        let entropyBytes = Self.entropyBits(residuals) / 8
        #expect(Double(coded.count) < entropyBytes * 1.02 + Double(blocks * 100))
        #expect(Double(coded.count) < Double(residuals.count) * 0.7)
    }
}
