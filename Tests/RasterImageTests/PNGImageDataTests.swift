import Foundation
import Testing

@testable import RasterImage

/// PNGs built here, byte by byte, from known pixels: every filter type on every 8-bit
/// colour type and pixel width, image data split over several IDAT chunks. They are
/// decoded in one piece (libdeflate and the SIMD filters) and must give back exactly
/// the pixels they were built from; damaged ones must fail as libpng reports them.
@Suite("PNG image data read in one piece")
struct PNGImageDataTests {
    static let colorTypes: [PNGBuilder.ColorType] = [.gray, .grayAlpha, .rgb, .rgba, .palette]

    @Test("every filter on every 8-bit colour type gives back the pixels", arguments: colorTypes)
    func filtersRoundTrip(_ colorType: PNGBuilder.ColorType) throws {
        for width in [1, 2, 3, 7, 64] {
            for filter in 0...6 {  // 5: a different filter on each row; 6: Sub, Average and Paeth in turn
                // Given a PNG of random samples, filtered with `filter`
                let png = PNGBuilder(width: width, height: 9, colorType: colorType, seed: UInt64(width * 10 + filter))
                let bytes = png.encoded(filter: filter)

                // When it is decoded, from memory and from a file
                let image = try ImageDecoder().decode(.bytes(bytes))
                let path = FileManagerHelper.temporaryFile(named: "filters.png", contents: bytes)
                defer { FileManagerHelper.remove(path) }
                let fromFile = try ImageDecoder().decode(.file(path: path))

                // Then both are the pixels it was built from
                let expected = png.expectedRGBA()
                #expect(image.frames[0].pixels == expected, "\(colorType) width \(width) filter \(filter)")
                #expect(fromFile.frames[0].pixels == expected)
                #expect(image.hasAlpha == png.hasAlpha)
            }
        }
    }

    @Test("libpng, reading row by row, gives the same pixels", arguments: colorTypes)
    func agreesWithLibpng(_ colorType: PNGBuilder.ColorType) throws {
        for transparency in [false, true] {
            // Given a PNG, and working memory too small to hold its image data in one
            // piece but enough for libpng's row buffers
            var png = PNGBuilder(width: 40, height: 30, colorType: colorType, seed: 11)
            png.transparency = transparency && colorType != .grayAlpha && colorType != .rgba
            let bytes = png.encoded(filter: 5)
            var limits = DecodingLimits()
            limits.maxWorkingBytes = 40 * 30 * colorType.channels
            // When it is decoded both ways, then the pixels are the same
            let whole = try ImageDecoder().decode(.bytes(bytes))
            let rows = try ImageDecoder(options: DecodingOptions(limits: limits)).decode(.bytes(bytes))
            #expect(whole.frames[0].pixels == rows.frames[0].pixels, "\(colorType)")
            #expect(whole.hasAlpha == rows.hasAlpha)
        }
    }

    @Test("the one-piece read declines, writing nothing, when the working memory cannot hold it")
    func declinesPastWorkingMemory() throws {
        // Given a PNG, and limits just large enough for its inflated data, a copy of
        // its compressed data and the file, or one byte smaller
        let png = PNGBuilder(width: 40, height: 30, colorType: .rgba, seed: 5)
        let bytes = png.encoded(filter: 4)
        let data = PNGImageData(width: 40, height: 30, samples: .rgba)
        let needed = 30 * (40 * 4 + 1) * 2 + bytes.count
        for (limit, takes) in [(needed, true), (needed - 1, false)] {
            var limits = DecodingLimits()
            limits.maxWorkingBytes = limit
            // When the image data is read in one piece
            var pixels = [UInt8](repeating: 7, count: 40 * 30 * 4)
            let trailer = try pixels.withUnsafeMutableBufferPointer { out in
                try bytes.withUnsafeBytes { raw in
                    try ByteReader.withMemory(raw, limits: limits) { reader in
                        data.read(reader, limits: limits, into: ImageBufferTarget(out.baseAddress!, bytesPerRow: 160))
                    }
                }
            }
            // Then it is read when it fits, and declined, with no row written, when it does not
            #expect((trailer != nil) == takes)
            #expect(takes ? pixels == png.expectedRGBA() : pixels.allSatisfy { $0 == 7 })
        }
    }

    @Test("tRNS colours and palette alpha become transparent, as in libpng")
    func transparency() throws {
        for colorType in [PNGBuilder.ColorType.gray, .rgb, .palette] {
            // Given a PNG with a tRNS chunk (a key colour, or palette alphas)
            var png = PNGBuilder(width: 16, height: 4, colorType: colorType, seed: 7)
            png.transparency = true
            // When it is decoded, then keyed pixels are transparent and the rest opaque
            let image = try ImageDecoder().decode(.bytes(png.encoded(filter: 4)))
            #expect(image.frames[0].pixels == png.expectedRGBA(), "\(colorType)")
            #expect(image.hasAlpha)
        }
    }

    @Test("a thumbnail of a built PNG matches the thumbnail of its decoded pixels", arguments: colorTypes)
    func thumbnailAgrees(_ colorType: PNGBuilder.ColorType) throws {
        for (transparency, linearLight) in [(false, false), (false, true), (true, false)] {
            // Given a PNG of 300 x 200 random pixels (opaque RGB goes to the resize as 3-byte pixels)
            var png = PNGBuilder(width: 300, height: 200, colorType: colorType, seed: 3)
            png.transparency = transparency && colorType != .grayAlpha && colorType != .rgba
            var options = ThumbnailOptions(maxPixelSize: 64)
            options.linearLight = linearLight
            // When it is thumbnailed while decoding, and from the pixels it was built from
            let streamed = try ImageDecoder().thumbnail(.bytes(png.encoded(filter: 5)), options: options)
            let pixels = try #require(
                RasterImage(width: 300, height: 200, pixels: png.expectedRGBA(), hasAlpha: png.hasAlpha))
            let whole = try pixels.thumbnail(options: options)
            // Then they are the same
            #expect(
                streamed.frames[0].pixels == whole.frames[0].pixels,
                "\(colorType) transparency \(transparency) linear \(linearLight)")
        }
    }

    @Test("image data compressed into ISA-L's range gives back the pixels", arguments: colorTypes)
    func compressedForISAL(_ colorType: PNGBuilder.ColorType) throws {
        for filter in [0, 5, 6] {
            // Given a PNG whose image data libdeflate compressed by 1.3 to 3 times
            var png = PNGBuilder(width: 301, height: 77, colorType: colorType, seed: UInt64(filter))
            png.deflateLevel = 6
            let bytes = png.encoded(filter: filter)
            let inflated = 77 * (301 * colorType.channels + 1)
            #expect(Self.engine(bytes, inflated: inflated) == .isal, "\(colorType) filter \(filter)")
            // When it is decoded, then the pixels are the ones it was built from
            let pixels = try ImageDecoder().decode(.bytes(bytes)).frames[0].pixels
            #expect(pixels == png.expectedRGBA(), "\(colorType) filter \(filter)")
        }
    }

    /// The engine ``ZlibInflate`` picks for the image data of `png`, `inflated` bytes once inflated.
    static func engine(_ png: [UInt8], inflated: Int) -> ZlibInflate.Engine {
        var offset = 8
        var compressed = 0
        while offset + 8 <= png.count {
            let length = png[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
            if String(decoding: png[offset + 4..<offset + 8], as: UTF8.self) == "IDAT" { compressed += length }
            offset += 12 + length
        }
        return ZlibInflate.Engine.preferred(inflated: inflated, compressed: compressed)
    }

    @Test("an eXIf after the image data sets the orientation")
    func trailingEXIF() throws {
        var png = PNGBuilder(width: 4, height: 6, colorType: .rgb, seed: 1)
        png.trailingOrientation = 6
        let image = try ImageDecoder().decode(.bytes(png.encoded(filter: 1)))
        #expect(image.orientation == .right)
        #expect(try ImageDecoder().info(.bytes(png.encoded(filter: 1))).orientation == .up)
    }

    @Test(
        "damaged image data fails with libpng's typed error, stored or compressed",
        arguments: PNGBuilder.Damage.allCases, [nil, 6])
    func damage(_ damage: PNGBuilder.Damage, deflateLevel: Int?) throws {
        // Given a PNG damaged in one way, its image data stored, or compressed into the
        // range ISA-L inflates
        var png = PNGBuilder(width: 64, height: 40, colorType: .rgba, seed: 9)
        png.damage = damage
        png.deflateLevel = deflateLevel
        let bytes = png.encoded(filter: 5)
        if deflateLevel != nil {
            #expect(Self.engine(bytes, inflated: 40 * (64 * 4 + 1)) == .isal)
        }
        // When it is decoded, then the error is the one libpng gives, or, for damage
        // libpng tolerates, the pixels
        switch damage {
        case .idatCRC, .filterByte, .zlibChecksum, .tooLittleData, .unknownCriticalChunk:
            #expect {
                try ImageDecoder().decode(.bytes(bytes))
            } throws: { error in
                (error as? ImageDecodingError)?.reason == .corrupt
            }
        case .missingIEND:
            #expect {
                try ImageDecoder().decode(.bytes(bytes))
            } throws: { error in
                (error as? ImageDecodingError)?.reason == .truncated
            }
        case .ancillaryCRC:
            #expect(try ImageDecoder().decode(.bytes(bytes)).frames[0].pixels == png.expectedRGBA())
        }
    }
}

/// Writes a PNG from pixels it makes itself: its own forward filters, stored
/// (uncompressed) deflate blocks or libdeflate's, its own CRC-32 and Adler-32.
struct PNGBuilder {
    enum ColorType: UInt8, Sendable, CustomStringConvertible {
        case gray = 0
        case rgb = 2
        case palette = 3
        case grayAlpha = 4
        case rgba = 6
        var channels: Int { [0: 1, 2: 3, 3: 1, 4: 2, 6: 4][rawValue]! }
        var description: String { "\(self.rawValue)" }
    }

    enum Damage: CaseIterable, Sendable {
        case idatCRC, filterByte, zlibChecksum, tooLittleData, unknownCriticalChunk, missingIEND, ancillaryCRC
    }

    let width: Int
    let height: Int
    let colorType: ColorType
    /// Unfiltered samples, `width * channels` a row.
    let samples: [[UInt8]]
    let palette: [SIMD4<UInt8>]
    var transparency = false
    var trailingOrientation: Int?
    var damage: Damage?
    /// Image data compressed by libdeflate at this level; stored (uncompressed) when nil.
    var deflateLevel: Int?

    init(width: Int, height: Int, colorType: ColorType, seed: UInt64) {
        (self.width, self.height, self.colorType) = (width, height, colorType)
        var random = SplitMix(seed: seed)
        // Few distinct values, so that key colours repeat and filters see runs.
        samples = (0..<height).map { _ in
            (0..<width * colorType.channels).map { _ in UInt8(truncatingIfNeeded: random.next() % 7 &* 41) }
        }
        palette = (0..<200).map { _ in
            SIMD4(
                UInt8(truncatingIfNeeded: random.next()), UInt8(truncatingIfNeeded: random.next()),
                UInt8(truncatingIfNeeded: random.next()), UInt8(truncatingIfNeeded: random.next()))
        }
    }

    var hasAlpha: Bool { transparency || colorType == .grayAlpha || colorType == .rgba }

    /// The key colour of tRNS for gray and RGB: the first pixel's.
    private var key: [UInt8] { Array(samples[0][0..<colorType.channels]) }

    func expectedRGBA() -> [UInt8] {
        var out: [UInt8] = []
        for row in samples {
            for x in 0..<width {
                let s = row[(x * colorType.channels)..<((x + 1) * colorType.channels)].map { $0 }
                let keyed = transparency && s == key
                switch colorType {
                case .gray: out += [s[0], s[0], s[0], keyed ? 0 : 255]
                case .grayAlpha: out += [s[0], s[0], s[0], s[1]]
                case .rgb: out += [s[0], s[1], s[2], keyed ? 0 : 255]
                case .rgba: out += s
                case .palette:
                    // Indices past the palette are opaque black.
                    let entry = Int(s[0]) < palette.count ? palette[Int(s[0])] : SIMD4(0, 0, 0, 255)
                    out += [entry[0], entry[1], entry[2], transparency ? entry[3] : 255]
                }
            }
        }
        return out
    }

    /// The PNG, every row filtered with `filter` (0 to 4), with row % 5 for 5, or with
    /// Sub, Average and Paeth in turn for 6 (rows undone in pairs meet every mix).
    func encoded(filter: Int) -> [UInt8] {
        var png: [UInt8] = [137, 80, 78, 71, 13, 10, 26, 10]
        var header = bigEndian(UInt32(width)) + bigEndian(UInt32(height))
        header += [8, colorType.rawValue, 0, 0, 0]
        png += chunk("IHDR", header)
        if colorType == .palette { png += chunk("PLTE", palette.flatMap { [$0[0], $0[1], $0[2]] }) }
        if transparency {
            switch colorType {
            case .palette: png += chunk("tRNS", palette.map { $0[3] })
            case .gray, .rgb: png += chunk("tRNS", key.flatMap { [0, $0] })
            default: break
            }
        }
        var raw: [UInt8] = []
        let bpp = colorType.channels
        for (y, row) in samples.enumerated() {
            let type = filter == 5 ? y % 5 : filter == 6 ? [1, 3, 4, 4, 3, 1, 1][y % 7] : filter
            let prior = y == 0 ? [UInt8](repeating: 0, count: row.count) : samples[y - 1]
            raw.append(damage == .filterByte && y == 3 ? 7 : UInt8(type))
            for i in 0..<row.count {
                let a = i >= bpp ? Int(row[i - bpp]) : 0
                let b = Int(prior[i])
                let c = i >= bpp ? Int(prior[i - bpp]) : 0
                let predicted: Int
                switch type {
                case 1: predicted = a
                case 2: predicted = b
                case 3: predicted = (a + b) / 2
                case 4:
                    let p = a + b - c
                    let (pa, pb, pc) = (abs(p - a), abs(p - b), abs(p - c))
                    predicted = pa <= pb && pa <= pc ? a : (pb <= pc ? b : c)
                default: predicted = 0
                }
                raw.append(UInt8(truncatingIfNeeded: Int(row[i]) - predicted))
            }
        }
        if damage == .tooLittleData { raw.removeLast(5) }
        var zlib =
            deflateLevel.flatMap { level in raw.withUnsafeBytes { PNGWriter.deflate($0, level: level) } }
            ?? storedZlib(raw)
        if damage == .zlibChecksum { zlib[zlib.count - 1] ^= 0xFF }
        // Split over IDATs of at most 100 bytes, one of them empty.
        var offset = 0
        var first = true
        while offset < zlib.count {
            let end = min(zlib.count, offset + 100)
            var idat = chunk("IDAT", Array(zlib[offset..<end]))
            if damage == .idatCRC && offset > 0 { idat[idat.count - 1] ^= 1 }
            png += idat
            if first { png += chunk("IDAT", []) }
            first = false
            offset = end
        }
        if damage == .unknownCriticalChunk { png += chunk("ABCD", [1, 2, 3]) }
        var text = chunk("tEXt", Array("Comment\0built by PNGBuilder".utf8))
        if damage == .ancillaryCRC { text[text.count - 1] ^= 1 }
        png += text
        if let trailingOrientation {
            // A big-endian TIFF header and one IFD entry: Orientation (0x0112), SHORT, 1.
            let exif: [UInt8] =
                [0x4D, 0x4D, 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1]
                + [0, UInt8(trailingOrientation), 0, 0, 0, 0, 0, 0]
            png += chunk("eXIf", exif)
        }
        if damage != .missingIEND { png += chunk("IEND", []) }
        return png
    }

    private func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let body = Array(type.utf8) + data
        return bigEndian(UInt32(data.count)) + body + bigEndian(PNGBuilder.crc32(body))
    }

    private func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }

    /// A zlib stream of stored deflate blocks.
    private func storedZlib(_ data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x78, 0x01]
        var offset = 0
        repeat {
            let end = min(data.count, offset + 65535)
            let length = UInt16(end - offset)
            out.append(end == data.count ? 1 : 0)
            out += [UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF), UInt8(~length >> 8)]
            out += data[offset..<end]
            offset = end
        } while offset < data.count
        var (a, b): (UInt32, UInt32) = (1, 0)
        for byte in data {
            a = (a + UInt32(byte)) % 65521
            b = (b + a) % 65521
        }
        return out + bigEndian(b << 16 | a)
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }
}

/// A small seeded generator, so every run builds the same images.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
