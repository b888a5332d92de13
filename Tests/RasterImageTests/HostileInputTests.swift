import Foundation
import RasterImage
import Testing

/// Untrusted bytes: every failure is a typed ``ImageDecodingError``, found from the
/// header before anything large is allocated; nothing crashes, exits or hangs.
@Suite("Hostile and broken input")
struct HostileInputTests {
    let decoder = ImageDecoder()

    @Test("no bytes at all")
    func empty() throws {
        #expect(expectDecodingError { _ = try decoder.decode(.bytes([])) }?.reason == .empty)
        let path = NSTemporaryDirectory() + "empty-\(UUID().uuidString).png"
        FileManager.default.createFile(atPath: path, contents: Data())
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(expectDecodingError { _ = try decoder.decode(.file(path: path)) }?.reason == .empty)
    }

    @Test("a missing file and a directory are unreadable")
    func unreadable() {
        #expect(
            expectDecodingError { _ = try decoder.decode(.file(path: "/nonexistent/image.png")) }?.reason == .unreadable
        )
        #expect(expectDecodingError { _ = try decoder.decode(.file(path: Fixtures.root)) }?.reason == .unreadable)
    }

    @Test("random bytes are not an image")
    func randomBytes() {
        var generator = SeededGenerator(seed: 1)
        for length in [1, 7, 100, 10_000] {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            #expect(expectDecodingError { _ = try decoder.decode(.bytes(bytes)) }?.reason == .unrecognizedFormat)
        }
    }

    @Test("a valid signature followed by garbage is a typed error", arguments: Fixtures.onePerFormat)
    func garbageAfterSignature(_ fixture: Fixture) {
        var generator = SeededGenerator(seed: 2)
        // Keep enough of the real header for the format to be recognised.
        let head = Array(fixture.bytes.prefix(fixture.format == "bmp" ? 18 : 12))
        for length in [0, 10, 100, 3_000] {
            let bytes = head + (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let error = expectDecodingError { _ = try decoder.decode(.bytes(bytes)) }
            #expect(error?.format?.rawValue == fixture.format)
        }
    }

    @Test("every fixture cut short is a truncated error", arguments: Fixtures.all)
    func truncated(_ fixture: Fixture) {
        let bytes = fixture.bytes
        for fraction in [0.25, 0.5, 0.75] {
            let cut = Array(bytes.prefix(Int(Double(bytes.count) * fraction)))
            let error = expectDecodingError { _ = try decoder.decode(.bytes(cut)) }
            #expect(error?.reason == .truncated, "cut at \(fraction): \(String(describing: error))")
        }
    }

    @Test(
        "cut short and allowed, the decoded part is kept",
        arguments: ["bmp-24bit-topdown", "bmp-24bit", "tiff-rgba", "gif-still", "jpeg-420"])
    func truncatedAllowed(_ name: String) throws {
        let fixture = Fixtures.named(name)
        let cut = Array(fixture.bytes.prefix(fixture.bytes.count * 3 / 4))
        let options = DecodingOptions(frames: .first, allowsTruncatedData: true)
        let image = try ImageDecoder(options: options).decode(.bytes(cut))
        #expect(image.width == fixture.width && image.height == fixture.height)
        let expected = fixture.expectedFrames[0]
        let rowBytes = fixture.width * 4
        // Bottom-up BMPs store the last row first; everything else starts at the top.
        let (arrived, missing) = name == "bmp-24bit" ? (fixture.height - 1, 0) : (0, fixture.height - 1)
        let arrivedRow = image.pixels[(arrived * rowBytes)..<((arrived + 1) * rowBytes)]
        #expect(
            difference(
                Array(arrivedRow), Array(expected[(arrived * rowBytes)..<((arrived + 1) * rowBytes)]),
                width: fixture.width
            ).maximum <= fixture.tolerance)
        let missingRow = image.pixels[(missing * rowBytes)..<((missing + 1) * rowBytes)]
        if fixture.format == "jpeg" {
            // libjpeg makes up flat colour for what it did not receive: opaque, no error.
            #expect(missingRow.enumerated().allSatisfy { $0.offset % 4 != 3 || $0.element == 255 })
        } else {
            #expect(missingRow.allSatisfy { $0 == 0 })
            #expect(image.hasAlpha)
        }
    }

    @Test("a PNG cut short and allowed keeps the rows of the data that arrived")
    func truncatedPNGAllowed() throws {
        // Given a PNG large enough for libpng to read its image data in several pieces
        var generator = SeededGenerator(seed: 3)
        let (width, height) = (256, 256)
        let pixels = (0..<width * height * 4).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let source = RasterImage(width: width, height: height, pixels: pixels)!
        let png = try PNGEncoder(compressionLevel: 1).encode(source)

        // When only half of it arrives
        let options = DecodingOptions(allowsTruncatedData: true)
        let image = try ImageDecoder(options: options).decode(.bytes(Array(png.prefix(png.count / 2))))

        // Then the first rows are the source's and the last row is transparent
        let rowBytes = width * 4
        #expect(Array(image.pixels.prefix(rowBytes * 10)) == Array(pixels.prefix(rowBytes * 10)))
        #expect(image.pixels.suffix(rowBytes).allSatisfy { $0 == 0 })
        #expect(
            expectDecodingError { _ = try ImageDecoder().decode(.bytes(Array(png.prefix(png.count / 2)))) }?.reason
                == .truncated)
    }

    @Test("a PNG claiming 30000x30000")
    func hugePNG() {
        let error = expectDecodingError {
            _ = try decoder.decode(.file(path: Fixtures.root + "/hostile/png-30000x30000.png"))
        }
        #expect(error?.reason == .tooManyPixels(width: 30000, height: 30000, limit: DecodingLimits().maxPixelsPerFrame))
    }

    @Test("a JPEG whose header claims 50000x50000 but carries 64x64")
    func hugeJPEG() {
        let error = expectDecodingError {
            _ = try decoder.decode(.file(path: Fixtures.root + "/hostile/jpeg-50000x50000.jpg"))
        }
        #expect(error?.reason == .tooManyPixels(width: 50000, height: 50000, limit: DecodingLimits().maxPixelsPerFrame))
    }

    @Test("a GIF with a 65535x65535 logical screen")
    func hugeGIF() {
        let error = expectDecodingError {
            _ = try decoder.decode(.file(path: Fixtures.root + "/hostile/gif-65535x65535.gif"))
        }
        #expect(error?.reason == .tooManyPixels(width: 65535, height: 65535, limit: DecodingLimits().maxPixelsPerFrame))
    }

    @Test("TIFFs with absurd strip sizes", arguments: ["tiff-absurd-strips.tif", "tiff-absurd-strip-offsets.tif"])
    func absurdTIFFStrips(_ name: String) {
        let error = expectDecodingError { _ = try decoder.decode(.file(path: Fixtures.root + "/hostile/" + name)) }
        #expect(error?.format == .tiff)
        #expect(error?.reason == .truncated)
    }

    @Test("absurd byte counts on uncompressed strips are recomputed by libtiff, within the image size")
    func repairedTIFFStrips() throws {
        // libtiff derives the counts from the image size: nothing large is allocated.
        let image = try decoder.decode(.file(path: Fixtures.root + "/hostile/tiff-absurd-strips-uncompressed.tif"))
        #expect(image.width == 16 && image.height == 16)
        #expect(image.cost == 16 * 16 * 4)
    }

    @Test("BMPs with a width of 2^31 and 2^31 - 1")
    func hugeBMP() {
        for name in ["bmp-width-2^31.bmp", "bmp-width-2^31-1.bmp"] {
            let error = expectDecodingError { _ = try decoder.decode(.file(path: Fixtures.root + "/hostile/" + name)) }
            guard case .tooManyPixels = error?.reason else {
                Issue.record("\(name): \(String(describing: error))")
                continue
            }
        }
    }

    @Test("a WebP whose canvas claims 16383x16383")
    func hugeWebP() {
        let error = expectDecodingError {
            _ = try decoder.decode(.file(path: Fixtures.root + "/hostile/webp-16383x16383.webp"))
        }
        #expect(error?.reason == .tooManyPixels(width: 16383, height: 16383, limit: DecodingLimits().maxPixelsPerFrame))
    }

    @Test("a PNG with a broken chunk checksum is corrupt")
    func badCRC() {
        var bytes = Fixtures.named("png-rgb8").bytes
        bytes[40] ^= 0xFF  // inside the first IDAT
        let error = expectDecodingError { _ = try decoder.decode(.bytes(bytes)) }
        #expect(error?.reason == .corrupt)
        #expect(error?.message?.hasPrefix("libpng:") == true)
    }
}

/// A small deterministic generator, so failures reproduce.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed &* 0x9E37_79B9_7F4A_7C15 | 1 }
    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }
}
