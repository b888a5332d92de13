import RasterImage
import Testing

@Suite("JPEG and WebP encoding")
struct ImageEncoderTests {
    let photo = try! ImageDecoder().decode(.file(path: Fixtures.root + "/images/png-photo.png"))
    let transparent = try! ImageDecoder().decode(.file(path: Fixtures.root + "/images/png-photo-alpha.png"))

    @Test("JPEG at high quality decodes close to the original")
    func jpegRoundTrip() throws {
        let jpeg = try JPEGEncoder(quality: 95, chromaSubsampling: .none).encode(photo)
        let decoded = try ImageDecoder().decode(.bytes(jpeg))
        #expect(decoded.format == .jpeg && decoded.width == photo.width && decoded.height == photo.height)
        let diff = difference(decoded.pixels, photo.pixels, width: photo.width)
        #expect(diff.mean < 2.5, "\(diff)")
    }

    @Test("progressive JPEG, optimised tables, and the profile are written as asked")
    func jpegOptions() throws {
        let baseline = try JPEGEncoder(quality: 80, optimizeHuffmanTables: false).encode(photo)
        let optimized = try JPEGEncoder(quality: 80, optimizeHuffmanTables: true).encode(photo)
        let progressive = try JPEGEncoder(quality: 80, progressive: true).encode(photo)
        #expect(optimized.count < baseline.count)
        #expect(containsMarker(progressive, 0xC2) && !containsMarker(baseline, 0xC2))  // SOF2: progressive
        let profile = Fixtures.bytes("profiles/compatibleWithAdobeRGB1998.icc")
        let tagged = RasterImage(
            width: photo.width, height: photo.height, frames: photo.frames, iccProfile: profile, hasAlpha: false)!
        #expect(try ImageDecoder().decode(.bytes(try JPEGEncoder().encode(tagged))).iccProfile == profile)
        #expect(
            try ImageDecoder().decode(.bytes(try JPEGEncoder(includeICCProfile: false).encode(tagged))).iccProfile
                == nil)
    }

    @Test("JPEG shows transparent pixels against the background colour")
    func jpegFlattens() throws {
        var encoder = JPEGEncoder(quality: 95, chromaSubsampling: .none)
        encoder.background = (255, 0, 255)
        let clear = RasterImage(width: 16, height: 16, pixels: [UInt8](repeating: 0, count: 16 * 16 * 4))!
        let decoded = try ImageDecoder().decode(.bytes(try encoder.encode(clear)))
        let (r, g, b, _) = try #require(decoded.pixel(x: 8, y: 8))
        #expect(r > 250 && g < 5 && b > 250)
    }

    @Test("lossless WebP keeps every pixel, with alpha")
    func webpLossless() throws {
        let webp = try WebPEncoder(quality: 50, lossless: true).encode(transparent)
        let decoded = try ImageDecoder().decode(.bytes(webp))
        #expect(decoded.format == .webp && decoded.hasAlpha)
        #expect(visibleDifference(decoded.pixels, transparent.pixels, width: transparent.width).maximum == 0)
    }

    @Test("lossy WebP is close, and carries the profile when asked")
    func webpLossy() throws {
        // A smooth image: lossy WebP (4:2:0 chroma) rightly drops fine checkerboards.
        let (width, height) = (120, 80)
        var pixels: [UInt8] = []
        for y in 0..<height {
            for x in 0..<width { pixels += [UInt8(x * 2), UInt8(y * 3), UInt8((x + y) & 0xFF), 255] }
        }
        let smooth = RasterImage(width: width, height: height, pixels: pixels, hasAlpha: false)!
        let decoded = try ImageDecoder().decode(.bytes(try WebPEncoder(quality: 90).encode(smooth)))
        let diff = difference(decoded.pixels, pixels, width: width)
        #expect(diff.mean < 2, "\(diff)")
        let profile = Fixtures.bytes("profiles/swapped-rg.icc")
        let tagged = RasterImage(
            width: 48, height: 32, frames: [.init(pixels: [UInt8](repeating: 128, count: 48 * 32 * 4))],
            iccProfile: profile)!
        #expect(try ImageDecoder().decode(.bytes(try WebPEncoder().encode(tagged))).iccProfile == profile)
    }

    @Test("the automatic format is PNG with alpha and JPEG without")
    func automatic() throws {
        #expect(try photo.encoded(as: .automatic()).format == .jpeg)
        #expect(try transparent.encoded(as: .automatic()).format == .png)
        #expect(OutputFormat(fileExtension: "WEBP", quality: 70) == .webp(WebPEncoder(quality: 70)))
        #expect(OutputFormat(fileExtension: "gif") == nil)
    }

    @Test(
        "bad parameters are typed errors",
        arguments: [
            OutputFormat.jpeg(JPEGEncoder(quality: 0)), .jpeg(JPEGEncoder(quality: 101)),
            .webp(WebPEncoder(quality: -1)),
            .webp(WebPEncoder(quality: 101)), .webp(WebPEncoder(method: 7)), .png(PNGEncoder(compressionLevel: 12)),
        ])
    func badParameters(_ format: OutputFormat) {
        do {
            _ = try photo.encoded(as: format)
            Issue.record("expected an ImageEncodingError")
        } catch {
            #expect(error.reason == .invalidParameter)
        }
    }

    private func containsMarker(_ bytes: [UInt8], _ marker: UInt8) -> Bool {
        zip(bytes, bytes.dropFirst()).contains { $0 == 0xFF && $1 == marker }
    }
}
