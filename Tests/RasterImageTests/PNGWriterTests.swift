import CDeflate
import Testing

@testable import RasterImage

/// The one-piece PNG writer, checked against libpng (which decodes what it writes,
/// row by row) and against a scalar model of the filter choice written here.
@Suite("PNG written in one piece")
struct PNGWriterTests {
    /// Pixels of several kinds, so that every filter and both compressors are used.
    enum Content: CaseIterable, Sendable {
        /// A smooth field plus noise, like a photograph.
        case photo
        /// A 24-pixel tile of random colours repeated, like a drawing or a screenshot.
        case pattern
        /// Bands of four rows, each one of: a horizontal ramp, the row above, flat, noise,
        /// diagonal stripes (the pixel up and to the left), the mean of left and up.
        case mixed
    }

    static func pixels(_ content: Content, width: Int, height: Int, bytesPerRow: Int, seed: UInt64) -> [UInt8] {
        var random = SplitMix(seed: seed)
        let tile = (0..<24 * 4).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        var out = [UInt8](repeating: 0, count: bytesPerRow * height)
        for y in 0..<height {
            let kind = (y / 4 + Int(seed)) % 6
            for x in 0..<width {
                for c in 0..<4 {
                    let value: Int
                    switch content {
                    case .photo:
                        value = (x * (c + 1) + y * 2) / 3 + Int(random.next() % 24)
                    case .pattern:
                        value = Int(tile[(x % 24) * 4 + c]) ^ (y % 3 == 0 ? 0x55 : 0)
                    case .mixed:
                        switch kind {
                        case 0: value = x * (c + 2)
                        case 1: value = y > 0 ? Int(out[(y - 1) * bytesPerRow + x * 4 + c]) : 9
                        case 2: value = 200 - c * 30
                        case 3: value = Int(random.next() % 256)
                        case 4: value = Int(tile[((x - y) & 15) * 4 + c])
                        default:
                            let left = x > 0 ? Int(out[y * bytesPerRow + (x - 1) * 4 + c]) : 0
                            let up = y % 4 > 0 ? Int(out[(y - 1) * bytesPerRow + x * 4 + c]) : 0
                            value = y % 4 > 0 ? (left + up) / 2 : Int(random.next() % 256)
                        }
                    }
                    out[y * bytesPerRow + x * 4 + c] = UInt8(truncatingIfNeeded: value)
                }
            }
        }
        return out
    }

    static func image(_ content: Content, width: Int, height: Int, alpha: Bool, padding: Int = 0, seed: UInt64 = 1)
        -> RasterImage
    {
        let bytesPerRow = width * 4 + padding
        var pixels = pixels(content, width: width, height: height, bytesPerRow: bytesPerRow, seed: seed)
        if !alpha { for i in Swift.stride(from: 3, to: pixels.count, by: 4) { pixels[i] = 255 } }
        return RasterImage(
            width: width, height: height, bytesPerRow: bytesPerRow, frames: [RasterImage.Frame(pixels: pixels)],
            hasAlpha: alpha)!
    }

    /// Decodes with libpng, a row at a time: the working memory is too small for the
    /// one-piece read.
    static func decodeWithLibpng(_ png: [UInt8], width: Int, height: Int) throws -> RasterImage {
        // libpng's two rows of up to 8 bytes a pixel (the width rounded up to 8) and one
        // of RGBA: less than the inflated data of the images here (64 rows or more).
        var limits = DecodingLimits()
        limits.maxWorkingBytes = 2 * ((width + 7) * 8 + 1) + width * 4
        return try ImageDecoder(options: DecodingOptions(limits: limits)).decode(.bytes(png))
    }

    /// The RGBA rows of `image` without padding, alpha 255 when it is opaque.
    static func expected(_ image: RasterImage) -> [UInt8] {
        var out: [UInt8] = []
        for y in 0..<image.height {
            let row = image.pixels[(y * image.bytesPerRow)..<(y * image.bytesPerRow + image.width * 4)]
            out += image.hasAlpha ? Array(row) : row.enumerated().map { $0.offset % 4 == 3 ? 255 : $0.element }
        }
        return out
    }

    /// The chunks of a PNG: type and data.
    static func chunks(_ png: [UInt8]) -> [(type: String, data: [UInt8])] {
        var out: [(String, [UInt8])] = []
        var offset = 8
        while offset + 12 <= png.count {
            let length = png[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
            let type = String(decoding: png[offset + 4..<offset + 8], as: UTF8.self)
            out.append((type, Array(png[offset + 8..<offset + 8 + length])))
            offset += 12 + length
        }
        return out
    }

    static func inflate(_ zlib: [UInt8], count: Int) -> [UInt8]? {
        guard let decompressor = libdeflate_alloc_decompressor() else { return nil }
        defer { libdeflate_free_decompressor(decompressor) }
        var out = [UInt8](repeating: 0, count: count)
        var written = 0
        let result = zlib.withUnsafeBytes { input in
            out.withUnsafeMutableBytes { output in
                libdeflate_zlib_decompress(
                    decompressor, input.baseAddress, input.count, output.baseAddress, output.count, &written)
            }
        }
        return result == LIBDEFLATE_SUCCESS && written == count ? out : nil
    }

    @Test(
        "what is written decodes through libpng to the pixels",
        arguments: [1, 2, 5, 6, 17, 33, 100], Content.allCases)
    func decodesThroughLibpng(_ width: Int, _ content: Content) throws {
        for (alpha, level, padding) in [(true, 6, 0), (false, 6, 0), (true, 0, 8), (false, 1, 4), (false, 9, 0)] {
            // Given an image, with alpha or opaque, rows padded or not
            let image = Self.image(content, width: width, height: 64, alpha: alpha, padding: padding)
            // When it is written and read back by libpng
            let png = try PNGEncoder(compressionLevel: level).encode(image)
            let decoded = try Self.decodeWithLibpng(png, width: width, height: 64)
            // Then the pixels are the same, in one IDAT (the one-piece path)
            #expect(decoded.pixels == Self.expected(image), "\(content) width \(width) alpha \(alpha) level \(level)")
            #expect(decoded.hasAlpha == alpha)
            #expect(Self.chunks(png).map(\.type) == ["IHDR", "IDAT", "IEND"])
        }
    }

    @Test("each row's filter is the one whose residuals sum smallest", arguments: [3, 4])
    func filterChoice(_ channels: Int) throws {
        // Given an image whose rows favour different filters
        let (width, height) = (37, 60)
        let image = Self.image(.mixed, width: width, height: height, alpha: channels == 4, seed: 3)
        // When it is written
        let png = try PNGEncoder().encode(image)
        let idat = Self.chunks(png).filter { $0.type == "IDAT" }.flatMap(\.data)
        let rowBytes = width * channels
        let filtered = try #require(Self.inflate(idat, count: height * (rowBytes + 1)))
        // Then every row is filtered as the scalar model chooses
        let rows = (0..<height).map { y in
            Self.expected(image)[(y * width * 4)..<((y + 1) * width * 4)].enumerated()
                .filter { channels == 4 || $0.offset % 4 != 3 }.map(\.element)
        }
        var used = Set<UInt8>()
        for y in 0..<height {
            let previous = y > 0 ? rows[y - 1] : [UInt8](repeating: 0, count: rowBytes)
            let candidates = (0...4).map { Self.filter($0, rows[y], previous, bytesPerPixel: channels) }
            let sums = candidates.map { $0.reduce(0) { $0 + abs(Int(Int8(bitPattern: $1))) } }
            let best = sums.firstIndex(of: sums.min()!)!
            let written = Array(filtered[(y * (rowBytes + 1))..<((y + 1) * (rowBytes + 1))])
            #expect(written == [UInt8(best)] + candidates[best], "row \(y)")
            used.insert(written[0])
        }
        // And the image exercised every filter
        #expect(used == [0, 1, 2, 3, 4])
    }

    /// PNG's filter `type` of `row`, as the specification writes it.
    static func filter(_ type: Int, _ row: [UInt8], _ previous: [UInt8], bytesPerPixel: Int) -> [UInt8] {
        row.indices.map { i in
            let a = i >= bytesPerPixel ? Int(row[i - bytesPerPixel]) : 0
            let b = Int(previous[i])
            let c = i >= bytesPerPixel ? Int(previous[i - bytesPerPixel]) : 0
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
            return UInt8(truncatingIfNeeded: Int(row[i]) - predicted)
        }
    }

    @Test("photographs get literals under a Huffman code, drawings libdeflate's matches: the smallest of three")
    func compressorChoice() throws {
        for (content, literalsWin) in [(Content.photo, true), (.pattern, false)] {
            // Given a small image (the whole of it is the band that chooses)
            let image = Self.image(content, width: 120, height: 80, alpha: false, seed: 5)
            // When it is written at level 4
            let png = try PNGEncoder(compressionLevel: 4).encode(image)
            let idat = Self.chunks(png).filter { $0.type == "IDAT" }.flatMap(\.data)
            let filtered = try #require(Self.inflate(idat, count: 80 * (120 * 3 + 1)))
            // Then its stream is the smallest of the three compressors' on the same rows
            let literals = try #require(filtered.withUnsafeBytes { HuffmanDeflate.zlib($0) })
            let runLength = try #require(filtered.withUnsafeBytes { PNGWriter.runLengthDeflate($0) })
            let lz = try #require(filtered.withUnsafeBytes { PNGWriter.deflate($0, level: 4) })
            let smallest = [literals, runLength, lz].min { $0.count < $1.count }!
            #expect(idat == smallest, "\(content)")
            #expect(
                (literals.count < lz.count) == literalsWin,
                "\(content): \(literals.count) vs \(runLength.count) vs \(lz.count)")
        }
    }

    @Test("the band that chooses comes from a large image's middle, and its choice holds for all of it")
    func sampledChoice() throws {
        // Given an image large enough that a band of it chooses: a photograph on top
        // and bottom, a drawing in the middle third
        let (width, height) = (200, 300)
        let photo = Self.image(.photo, width: width, height: height, alpha: false, seed: 7)
        let drawing = Self.image(.pattern, width: width, height: height, alpha: false, seed: 7)
        var pixels = photo.pixels
        let rows = (height / 3 * width * 4)..<(2 * height / 3 * width * 4)
        pixels.replaceSubrange(rows, with: drawing.pixels[rows])
        let image = RasterImage(width: width, height: height, pixels: pixels, hasAlpha: false)!
        // When it is written
        let png = try PNGEncoder(compressionLevel: 4).encode(image)
        let idat = Self.chunks(png).filter { $0.type == "IDAT" }.flatMap(\.data)
        let filtered = try #require(Self.inflate(idat, count: height * (width * 3 + 1)))
        // Then the middle's compressor (libdeflate) wrote the whole stream
        let lz = try #require(filtered.withUnsafeBytes { PNGWriter.deflate($0, level: 4) })
        #expect(idat == lz)
        #expect(try Self.decodeWithLibpng(png, width: width, height: height).pixels == Self.expected(image))
    }

    @Test("an image past the one-piece limit streams through libpng")
    func largeImageStreams() throws {
        // Given an RGBA image whose filtered rows exceed the limit by a row
        let width = 4096
        let height = PNGWriter.maxFilteredBytes / (width * 4 + 1) + 1
        var pixels = [UInt8](repeating: 0, count: width * 4 * height)
        for y in Swift.stride(from: 0, to: height, by: 97) {
            pixels.replaceSubrange(
                (y * width + y % width) * 4..<(y * width + y % width + 1) * 4, with: [200, 0, 0, 255])
        }
        let image = RasterImage(width: width, height: height, pixels: pixels)!
        // When it is written
        let png = try PNGEncoder(compressionLevel: 1).encode(image)
        // Then libpng wrote it (several IDATs), and it decodes to the pixels
        #expect(Self.chunks(png).filter { $0.type == "IDAT" }.count > 1)
        let decoded = try ImageDecoder().decode(.bytes(png))
        #expect(decoded.pixels == pixels)
    }
}
