import RasterImage
import Testing

@Suite("PNG encoding")
struct PNGEncoderTests {
    @Test(
        "what is written decodes to the same pixels",
        arguments: ["png-rgba8", "gif-transparent", "jpeg-420", "tiff-rgba-associated"])
    func roundTrip(_ name: String) throws {
        let image = try ImageDecoder(options: DecodingOptions(frames: .first)).decode(
            .bytes(Fixtures.named(name).bytes))
        let png = try PNGEncoder().encode(image)
        let decoded = try ImageDecoder().decode(.bytes(png))
        let straight = image.straightAlpha()
        #expect(decoded.pixels == straight.pixels)
        #expect(decoded.hasAlpha == image.hasAlpha)
        #expect(decoded.alphaMode == .straight)
    }

    @Test("an opaque image is written as RGB unless alpha is asked for")
    func dropsAlpha() throws {
        let image = try ImageDecoder().decode(.bytes(Fixtures.named("jpeg-420").bytes))
        let rgb = try PNGEncoder().encode(image)
        let rgba = try PNGEncoder(alwaysIncludeAlpha: true).encode(image)
        // IHDR colour type, byte 25: 2 is RGB, 6 is RGBA.
        #expect(rgb[25] == 2)
        #expect(rgba[25] == 6)
    }

    @Test("the ICC profile is embedded and read back")
    func embedsProfile() throws {
        let image = try ImageDecoder().decode(.bytes(Fixtures.named("png-exif-icc").bytes))
        let decoded = try ImageDecoder().decode(.bytes(try PNGEncoder().encode(image)))
        #expect(decoded.iccProfile == image.iccProfile)
        let without = try ImageDecoder().decode(.bytes(try PNGEncoder(includeICCProfile: false).encode(image)))
        #expect(without.iccProfile == nil)
    }

    @Test("bad parameters are typed errors")
    func badParameters() throws {
        let image = RasterImage(width: 1, height: 1, pixels: [1, 2, 3, 4])!
        #expect(throws: ImageEncodingError.self) { try PNGEncoder(compressionLevel: 10).encode(image) }
        do {
            _ = try PNGEncoder(compressionLevel: -1).encode(image)
            Issue.record("expected an error")
        } catch {
            #expect(error.reason == .invalidParameter)
        }
        #expect(throws: ImageEncodingError.self) { try PNGEncoder().encode(image, frame: 1) }
    }
}
