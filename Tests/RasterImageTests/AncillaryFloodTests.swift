import CDeflate
import Foundation
import Testing

@testable import RasterImage

#if canImport(Glibc)
import Glibc
#endif

/// Small files made mostly of metadata: many blocks, or blocks that are costly to read
/// (compressed text that inflates a thousandfold). Each is answered (an image, or a
/// typed limit error) with no more work than decoding a valid file of the same size:
/// the work measured is this thread's CPU time, the least of three runs, against the
/// same measure of the reference.
@Suite("Files made mostly of metadata")
struct AncillaryFloodTests {
    /// About a megabyte, as the hostile uploads were.
    static let size = 1_000_000

    // MARK: Building the files

    static func noise(width: Int, height: Int) -> RasterImage {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        let pixels = (0..<(width * height * 4)).map { index -> UInt8 in
            if index % 4 == 3 { return 255 }
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
        return RasterImage(width: width, height: height, pixels: pixels, hasAlpha: false)!
    }

    /// `block` repeated until the part it fills reaches about `size` bytes.
    static func repeated(_ block: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(size + block.count)
        while out.count < size { out += block }
        return out
    }

    static func bigEndian32(_ value: Int) -> [UInt8] { withUnsafeBytes(of: UInt32(value).bigEndian) { Array($0) } }
    static func littleEndian32(_ value: Int) -> [UInt8] {
        withUnsafeBytes(of: UInt32(value).littleEndian) { Array($0) }
    }
    static func littleEndian16(_ value: Int) -> [UInt8] {
        withUnsafeBytes(of: UInt16(value).littleEndian) { Array($0) }
    }

    static func zlib(_ bytes: [UInt8]) -> [UInt8] {
        let compressor = libdeflate_alloc_compressor(9)!
        defer { libdeflate_free_compressor(compressor) }
        var out = [UInt8](repeating: 0, count: libdeflate_zlib_compress_bound(compressor, bytes.count))
        let written = out.withUnsafeMutableBytes { output in
            bytes.withUnsafeBytes { input in
                libdeflate_zlib_compress(
                    compressor, input.baseAddress, input.count, output.baseAddress, output.count)
            }
        }
        return Array(out.prefix(written))
    }

    static func pngChunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let typeBytes = Array(type.utf8)
        let crc = libdeflate_crc32(0, typeBytes + data, typeBytes.count + data.count)
        return bigEndian32(data.count) + typeBytes + data + bigEndian32(Int(crc))
    }

    /// A 16x16 PNG with `chunks` between its header and its image data.
    static func png(inserting chunks: [UInt8]) throws -> [UInt8] {
        let base = try PNGEncoder().encode(noise(width: 16, height: 16))
        let headerEnd = 8 + 25
        return Array(base[..<headerEnd]) + chunks + Array(base[headerEnd...])
    }

    static func jpegSegment(_ marker: UInt8, _ payload: [UInt8]) -> [UInt8] {
        [0xFF, marker] + [UInt8((payload.count + 2) >> 8), UInt8((payload.count + 2) & 0xFF)] + payload
    }

    /// A 16x16 JPEG with `segments` after its SOI.
    static func jpeg(inserting segments: [UInt8]) throws -> [UInt8] {
        let base = try JPEGEncoder().encode(noise(width: 16, height: 16))
        return Array(base[..<2]) + segments + Array(base[2...])
    }

    static func riffChunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        Array(type.utf8) + littleEndian32(data.count) + data + (data.count % 2 == 1 ? [0] : [])
    }

    /// A 16x16 lossless WebP in the extended format, with `chunks` after its image.
    static func webp(appending chunks: [UInt8], flags: UInt8 = 0) throws -> [UInt8] {
        let base = try WebPEncoder(lossless: true).encode(noise(width: 16, height: 16))
        let vp8x = riffChunk("VP8X", [flags, 0, 0, 0] + [15, 0, 0] + [15, 0, 0])
        let body = Array("WEBP".utf8) + vp8x + Array(base[12...]) + chunks
        return Array("RIFF".utf8) + littleEndian32(body.count) + body
    }

    /// A GIF of `width` x `height` with every pixel index 0...255 written as 9-bit LZW
    /// codes, a clear code before the table would grow to 10 bits (no compression, so any
    /// size is easy to make), and `extensions` before the image.
    static func gif(width: Int, height: Int, extensions: [UInt8] = [], pixels: (Int) -> UInt8 = { UInt8($0 % 200) })
        -> [UInt8]
    {
        var out: [UInt8] = Array("GIF89a".utf8)
        out += littleEndian16(width)
        out += littleEndian16(height)
        out += [0xF7, 0, 0]
        for entry in 0..<256 {
            out += [UInt8(entry), UInt8(255 - entry), UInt8((entry * 7) % 256)]
        }
        out += extensions
        out += [0x2C, 0, 0, 0, 0]
        out += littleEndian16(width)
        out += littleEndian16(height)
        out += [0, 8]
        var codes: [Int] = [256]
        for index in 0..<(width * height) {
            codes.append(Int(pixels(index)))
            // After the clear code the next free code is 258; 9 bits hold up to 511.
            if codes.count % 250 == 0 { codes.append(256) }
        }
        codes.append(257)
        var packed: [UInt8] = []
        var (buffer, bits) = (0, 0)
        for code in codes {
            buffer |= code << bits
            bits += 9
            while bits >= 8 {
                packed.append(UInt8(buffer & 0xFF))
                buffer >>= 8
                bits -= 8
            }
        }
        if bits > 0 { packed.append(UInt8(buffer & 0xFF)) }
        var start = 0
        while start < packed.count {
            let piece = packed[start..<min(start + 255, packed.count)]
            out += [UInt8(piece.count)] + piece
            start += 255
        }
        return out + [0, 0x3B]
    }

    /// An uncompressed 8-bit RGB TIFF, one strip.
    static func tiff(width: Int, height: Int) -> [UInt8] {
        let pixelsAt = 8
        let pixelBytes = width * height * 3
        var out = Array("II".utf8) + [42, 0] + littleEndian32(pixelsAt + pixelBytes + 8)
        out += noise(width: width, height: height).pixels.enumerated().filter { $0.offset % 4 != 3 }.map(\.element)
        out += [8, 0, 8, 0, 8, 0, 0, 0]  // bits per sample, at pixelsAt + pixelBytes
        let entries: [(Int, Int, Int, Int)] = [
            (256, 4, 1, width), (257, 4, 1, height), (258, 3, 3, pixelsAt + pixelBytes), (259, 3, 1, 1),
            (262, 3, 1, 2), (273, 4, 1, pixelsAt), (277, 3, 1, 3), (278, 4, 1, height), (279, 4, 1, pixelBytes),
        ]
        out += littleEndian16(entries.count)
        for (tag, type, count, value) in entries {
            out += littleEndian16(tag) + littleEndian16(type) + littleEndian32(count)
            out += type == 3 && count == 1 ? littleEndian16(value) + [0, 0] : littleEndian32(value)
        }
        return out + littleEndian32(0)
    }

    /// A chain of `count` one-pixel pages of 118 bytes each, or of empty directories.
    static func tiffChain(count: Int, empty: Bool) -> [UInt8] {
        var out = Array("II".utf8) + [42, 0] + littleEndian32(8)
        let entrySize = empty ? 0 : 9
        let directorySize = 2 + 12 * entrySize + 4
        let pixelsAt = 8 + count * directorySize
        for index in 0..<count {
            let next = index + 1 < count ? 8 + (index + 1) * directorySize : 0
            out += littleEndian16(entrySize)
            if !empty {
                let entries: [(Int, Int, Int)] = [
                    (256, 3, 1), (257, 3, 1), (258, 3, 8), (259, 3, 1), (262, 3, 1), (273, 4, pixelsAt),
                    (277, 3, 1), (278, 3, 1), (279, 4, 1),
                ]
                for (tag, type, value) in entries {
                    out += littleEndian16(tag) + littleEndian16(type) + littleEndian32(1)
                    out += type == 3 ? littleEndian16(value) + [0, 0] : littleEndian32(value)
                }
            }
            out += littleEndian32(next)
        }
        return out + [0x80]
    }

    // MARK: The cases

    struct Flood: Sendable, CustomTestStringConvertible {
        let name: String
        let format: ImageFormat
        let bytes: @Sendable () throws -> [UInt8]
        var testDescription: String { name }
    }

    static let bomb = zlib([UInt8](repeating: 0, count: 4_000_000))

    static let floods: [Flood] = [
        Flood(name: "PNG tEXt chunks", format: .png) {
            try png(inserting: repeated(pngChunk("tEXt", Array("Comment\0".utf8) + [UInt8](repeating: 120, count: 20))))
        },
        Flood(name: "PNG zTXt chunks inflating to 4 MB each", format: .png) {
            try png(inserting: repeated(pngChunk("zTXt", Array("Comment\0\0".utf8) + bomb)))
        },
        Flood(name: "PNG iTXt chunks inflating to 4 MB each", format: .png) {
            try png(inserting: repeated(pngChunk("iTXt", Array("XML:com.adobe.xmp\0\u{1}\0\0\0".utf8) + bomb)))
        },
        Flood(name: "PNG unknown ancillary chunks", format: .png) {
            try png(inserting: repeated(pngChunk("abCd", [UInt8](repeating: 121, count: 10))))
        },
        Flood(name: "PNG sPLT chunks", format: .png) {
            try png(inserting: repeated(pngChunk("sPLT", Array("pal\0".utf8) + [8] + [1, 2, 3, 4, 0, 1])))
        },
        Flood(name: "JPEG small EXIF APP1 markers", format: .jpeg) {
            try jpeg(inserting: repeated(jpegSegment(0xE1, Array("Exif\0\0II*\0".utf8) + [8, 0, 0, 0, 0, 0])))
        },
        Flood(name: "JPEG large APP1 markers", format: .jpeg) {
            try jpeg(
                inserting: repeated(
                    jpegSegment(0xE1, Array("Exif\0\0MM\0*".utf8) + [UInt8](repeating: 0, count: 65000))))
        },
        Flood(name: "JPEG ICC APP2 markers", format: .jpeg) {
            try jpeg(
                inserting: repeated(
                    jpegSegment(0xE2, Array("ICC_PROFILE\0".utf8) + [1, 1] + [UInt8](repeating: 122, count: 60000))))
        },
        Flood(name: "JPEG COM markers", format: .jpeg) {
            try jpeg(inserting: repeated(jpegSegment(0xFE, [UInt8](repeating: 99, count: 10))))
        },
        Flood(name: "JPEG other APPn markers", format: .jpeg) {
            try jpeg(inserting: repeated(jpegSegment(0xEC, Array("Ducky".utf8) + [UInt8](repeating: 100, count: 100))))
        },
        Flood(name: "TIFF chain of one-pixel pages", format: .tiff) { tiffChain(count: size / 118, empty: false) },
        Flood(name: "TIFF chain of empty directories", format: .tiff) { tiffChain(count: size / 6, empty: true) },
        Flood(name: "WebP unknown chunks", format: .webp) {
            try webp(appending: repeated(riffChunk("ABCD", [UInt8](repeating: 122, count: 10))))
        },
        Flood(name: "WebP EXIF chunks", format: .webp) {
            try webp(appending: repeated(riffChunk("EXIF", Array("II*\0".utf8) + [8, 0, 0, 0, 0, 0])), flags: 0x08)
        },
        Flood(name: "GIF comment extensions", format: .gif) {
            gif(width: 16, height: 16, extensions: repeated([0x21, 0xFE, 3] + Array("abc".utf8) + [0]))
        },
        Flood(name: "GIF graphics control extensions", format: .gif) {
            gif(width: 16, height: 16, extensions: repeated([0x21, 0xF9, 4, 0, 10, 0, 0, 0]))
        },
        Flood(name: "GIF application extensions", format: .gif) {
            gif(
                width: 16, height: 16,
                extensions: repeated([0x21, 0xFF, 11] + Array("XMP DataXMP".utf8) + [2, 97, 98, 2, 99, 100, 0]))
        },
        Flood(name: "GIF comments in one-byte sub-blocks", format: .gif) {
            gif(width: 16, height: 16, extensions: repeated([0x21, 0xFE] + repeated1000([1, 97]) + [0]))
        },
    ]

    static func repeated1000(_ block: [UInt8]) -> [UInt8] { (0..<1000).flatMap { _ in block } }

    /// A valid image of about the same size, in the same format, decoded in full.
    static func reference(_ format: ImageFormat) throws -> [UInt8] {
        switch format {
        case .png: try PNGEncoder().encode(noise(width: 580, height: 580))
        case .jpeg: try JPEGEncoder(quality: 95).encode(noise(width: 900, height: 900))
        case .webp: try WebPEncoder(lossless: true).encode(noise(width: 580, height: 580))
        case .tiff: tiff(width: 580, height: 580)
        case .gif: gif(width: 1000, height: 880)
        default: []
        }
    }

    /// How many times the reference's work a flood may take.
    static let allowance = 2.0

    /// Whether the work is compared at all: not under a sanitizer, which slows the
    /// project's instrumented Swift and C (most of a flood's work) several times more than
    /// the system's uninstrumented codecs (most of a valid decode), by a factor that moved
    /// between runs (PNG floods at 8 to 10 times a valid decode under ThreadSanitizer).
    /// There the operations still run, for the sanitizer, and their answers are checked.
    static let comparesWork = ProcessInfo.processInfo.environment["IMAGELOADER_SANITIZER"] == nil

    /// This thread's CPU time running `body`, the least of three runs.
    static func work(_ body: () -> Void) -> Double {
        var best = Double.infinity
        for _ in 0..<3 {
            var start = timespec()
            var end = timespec()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start)
            body()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end)
            best = min(best, Double(end.tv_sec - start.tv_sec) + Double(end.tv_nsec - start.tv_nsec) / 1e9)
        }
        return best
    }

    @Test(
        "info, decode and thumbnail answer (an image or a typed limit) within the work of a valid decode",
        arguments: floods)
    func bounded(_ flood: Flood) async throws {
        // Seconds of synchronous work: measured on a thread of its own, not on one of the
        // two the whole suite's async tests share (the CPU time is that thread's), then
        // checked here, where expectations belong to the test.
        let measured = try await onThreadOfItsOwn { try Self.measure(flood) }
        #expect(
            measured.bytes >= Self.size * 9 / 10 && measured.bytes <= Self.size * 2, "\(measured.bytes) bytes")
        #expect(
            abs(measured.referenceBytes - measured.bytes) < measured.bytes / 2,
            "reference \(measured.referenceBytes) bytes")
        #expect(measured.referenceWidth > 500)
        let allowed: Set<String> = ["tooManyFrames", "tooManyMetadataBlocks", "corrupt"]
        for operation in measured.operations {
            if let reason = operation.error {
                #expect(allowed.contains(reason), "\(operation.name): \(reason)")
            }
            guard Self.comparesWork else { continue }
            #expect(
                operation.work <= max(measured.referenceWork * Self.allowance, 0.002),
                "\(operation.name): \(operation.work * 1000) ms against \(measured.referenceWork * 1000) ms to decode a valid file"
            )
        }
    }

    struct Measured: Sendable {
        struct Operation: Sendable {
            let name: String
            /// The typed error's reason, without its arguments; `nil` when it answered.
            let error: String?
            let work: Double
        }
        let bytes: Int
        let referenceBytes: Int
        let referenceWidth: Int
        let referenceWork: Double
        let operations: [Operation]
    }

    static func measure(_ flood: Flood) throws -> Measured {
        let bytes = try flood.bytes()
        let reference = try Self.reference(flood.format)
        let decoder = ImageDecoder()
        let referenceWork = Self.work { _ = try? decoder.decode(.bytes(reference)) }
        let referenceWidth = try decoder.decode(.bytes(reference)).width
        var operations: [Measured.Operation] = []
        for (operation, run) in [
            ("info", { () throws -> Void in _ = try decoder.info(.bytes(bytes)) }),
            ("decode", { _ = try decoder.decode(.bytes(bytes)) }),
            ("thumbnail", { _ = try decoder.thumbnail(.bytes(bytes), options: ThumbnailOptions(maxPixelSize: 8)) }),
        ] as [(String, () throws -> Void)] {
            var reason: String?
            do {
                try run()
            } catch let error as ImageDecodingError {
                reason = String("\(error.reason)".prefix { $0 != "(" })
            }
            operations.append(.init(name: operation, error: reason, work: Self.work { try? run() }))
        }
        return Measured(
            bytes: bytes.count, referenceBytes: reference.count, referenceWidth: referenceWidth,
            referenceWork: referenceWork, operations: operations)
    }
}
