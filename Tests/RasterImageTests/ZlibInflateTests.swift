import CISAL
import Foundation
import Testing

@testable import RasterImage

/// Both engines of ``ZlibInflate`` on streams made by libdeflate and by zlib, in pieces
/// of every size: the bytes must be the ones compressed, and every damaged or
/// mis-sized stream must be declined by both.
@Suite("zlib streams inflated by libdeflate and ISA-L")
struct ZlibInflateTests {
    /// Data of four kinds: random bytes, few distinct values (mostly literals),
    /// a repeating pattern (long matches), and zeros.
    static func samples(count: Int) -> [(name: String, bytes: [UInt8])] {
        var random = SplitMix(seed: 42)
        let noise = (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        let few = (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next() % 7 &* 41) }
        let pattern = (0..<count).map { UInt8(truncatingIfNeeded: ($0 % 300) &* 7) }
        return [
            ("noise", noise), ("few values", few), ("pattern", pattern), ("zeros", [UInt8](repeating: 0, count: count)),
        ]
    }

    /// The stream made by libdeflate at `level`, or by zlib's run-length strategy for nil
    /// (nil when that is larger than libdeflate's bound: noise, and a pattern with no runs).
    static func stream(_ data: [UInt8], level: Int?) throws -> [UInt8]? {
        guard let level else { return data.withUnsafeBytes { PNGWriter.runLengthDeflate($0) } }
        return try #require(data.withUnsafeBytes { PNGWriter.deflate($0, level: level) })
    }

    /// Inflates `stream` cut into pieces of `pieceSize` (and an empty piece after the first)
    /// into `count` bytes; nil when declined.
    static func inflate(
        _ stream: [UInt8], pieceSize: Int, count: Int, engine: ZlibInflate.Engine
    ) -> [UInt8]? {
        stream.withUnsafeBytes { raw -> [UInt8]? in
            var parts: [UnsafeRawBufferPointer] = []
            var offset = 0
            while offset < raw.count {
                let end = min(raw.count, offset + pieceSize)
                parts.append(UnsafeRawBufferPointer(rebasing: raw[offset..<end]))
                if offset == 0 { parts.append(UnsafeRawBufferPointer(rebasing: raw[end..<end])) }
                offset = end
            }
            var output = [UInt8](repeating: 0xA5, count: count)
            let done = output.withUnsafeMutableBufferPointer {
                ZlibInflate.inflate(parts, into: $0.baseAddress!, count: count, engine: engine)
            }
            return done ? output : nil
        }
    }

    @Test("both engines give back the bytes compressed, whatever the pieces", arguments: ZlibInflate.Engine.allCases)
    func roundTrip(_ engine: ZlibInflate.Engine) throws {
        for (name, data) in Self.samples(count: 300_000) {
            for level in [1, 6, 12, nil] {
                // Given a stream of the data, by libdeflate at a level or by zlib
                guard let stream = try Self.stream(data, level: level) else {
                    #expect(name == "noise" || name == "pattern", "zlib's run-length stream of \(name)")
                    continue
                }
                for pieceSize in [1, 7, 100, 8192, 65_536, stream.count] where pieceSize > 1 || stream.count < 5_000 {
                    // When it is inflated in pieces of that size, then the bytes are the data
                    let same = Self.inflate(stream, pieceSize: pieceSize, count: data.count, engine: engine) == data
                    #expect(same, "\(name), level \(level.map(String.init) ?? "rle"), pieces of \(pieceSize)")
                }
            }
        }
        // And a small stream one byte at a time
        let small = Array(Self.samples(count: 3_000)[1].bytes)
        let same =
            Self.inflate(
                try #require(try Self.stream(small, level: 6)), pieceSize: 1, count: small.count, engine: engine)
            == small
        #expect(same)
    }

    @Test("both engines decline damaged and mis-sized streams", arguments: ZlibInflate.Engine.allCases)
    func declines(_ engine: ZlibInflate.Engine) throws {
        for (name, data) in Self.samples(count: 100_000) {
            let stream = try #require(try Self.stream(data, level: 6))
            var damaged: [(String, [UInt8], Int)] = []
            var checksum = stream
            checksum[checksum.count - 1] ^= 0x01
            damaged.append(("Adler-32", checksum, data.count))
            var middle = stream
            middle[middle.count / 2] ^= 0x10
            damaged.append(("a byte in the middle", middle, data.count))
            damaged.append(("one byte short", Array(stream.dropLast()), data.count))
            damaged.append(("half the stream", Array(stream.prefix(stream.count / 2)), data.count))
            damaged.append(("a byte after the end", stream + [0], data.count))
            damaged.append(("room for one byte less", stream, data.count - 1))
            damaged.append(("room for one byte more", stream, data.count + 1))
            // Headers: method 7, a 64 KiB window, a preset dictionary, a bad check (each
            // with FCHECK fixed up but the last).
            for (cmf, flagBits) in [(0x77, 0x00), (0x88, 0x00), (0x78, 0x20), (0x78, 0x00)] {
                var header = stream
                header[0] = UInt8(cmf)
                let base = UInt16(cmf) << 8 | UInt16(flagBits)
                let check = cmf == 0x78 && flagBits == 0 ? (31 - base % 31) % 31 + 1 : (31 - base % 31) % 31
                header[1] = UInt8(flagBits) | UInt8(check)
                damaged.append(
                    ("header \(String(header[0], radix: 16)) \(String(header[1], radix: 16))", header, data.count))
            }
            for (what, bytes, count) in damaged {
                for pieceSize in [1, 7, 100, bytes.count] {
                    let declined = Self.inflate(bytes, pieceSize: pieceSize, count: count, engine: engine) == nil
                    #expect(declined, "\(name): \(what), pieces of \(pieceSize)")
                }
            }
        }
        // A negative size, and too little to be a stream at all
        let stream = try #require(try Self.stream([1, 2, 3], level: 6))
        let negative = stream.withUnsafeBytes { raw in
            var byte: UInt8 = 0
            return ZlibInflate.inflate([raw], into: &byte, count: -1, engine: engine)
        }
        #expect(!negative)
        let declined = Self.inflate([0x78], pieceSize: 1, count: 0, engine: engine) == nil
        #expect(declined)
    }

    @Test(
        "an ISA-L inflate leaves the AVX registers' upper halves unused, so SSE code after it runs at full speed",
        .enabled(if: cisal_avx_upper_in_use() >= 0, "the processor cannot say (XGETBV's XINUSE)"))
    func cleanVectorState() throws {
        // Given a stream ISA-L inflates with its AVX loops
        let data = Self.samples(count: 1 << 20)[1].bytes
        let stream = try #require(try Self.stream(data, level: 6))
        // When it has inflated, then the upper halves are not in use on this thread
        var output = [UInt8](repeating: 0, count: data.count)
        let inUse = stream.withUnsafeBytes { raw in
            output.withUnsafeMutableBufferPointer { out in
                let done = ZlibInflate.inflate([raw], into: out.baseAddress!, count: data.count, engine: .isal)
                return done ? cisal_avx_upper_in_use() : -2
            }
        }
        #expect(inUse == 0)
    }

    @Test("ISA-L takes the streams that shrank by 1.3 to 3 times, libdeflate the rest")
    func choice() {
        let cases: [(inflated: Int, compressed: Int, engine: ZlibInflate.Engine)] = [
            (129, 100, .libdeflate), (130, 100, .isal), (160, 100, .isal), (300, 100, .isal), (301, 100, .libdeflate),
            (100, 100, .libdeflate), (100_000, 100, .libdeflate), (100, 0, .libdeflate),
            (Int.max, Int.max / 2, .libdeflate), (Int.max / 2, Int.max / 4, .libdeflate),
        ]
        for (inflated, compressed, engine) in cases {
            #expect(
                ZlibInflate.Engine.preferred(inflated: inflated, compressed: compressed) == engine,
                "\(inflated) from \(compressed)")
        }
    }
}
