import Foundation
import RasterImage
import TestSupport
import Testing

@Suite("JPEG and WebP encoding")
struct ImageEncoderTests {
    let photo = try! ImageDecoder().decode(.file(path: Fixtures.root + "/images/png-photo.png"))
    let transparent = try! ImageDecoder().decode(.file(path: Fixtures.root + "/images/png-photo-alpha.png"))

    @Test("AVIF and JPEG XL at quality 90 decode at least as close as JPEG 90 (4:2:0); lossless is exact")
    func modernRoundTrips() throws {
        // The photo is noisy: JPEG 90 with 4:2:0 is about 13 levels off on average.
        let jpeg = try ImageDecoder().decode(.bytes(try JPEGEncoder(quality: 90).encode(photo)))
        let jpegMean = difference(jpeg.pixels, photo.pixels, width: photo.width).mean
        for (name, bytes, tolerance) in [
            ("avif", try AVIFEncoder(quality: 90).encode(photo), jpegMean),
            ("jxl", try JXLEncoder(quality: 90).encode(photo), jpegMean),
            ("avif-lossless", try AVIFEncoder(lossless: true).encode(photo), 0),
            ("jxl-lossless", try JXLEncoder(quality: 100).encode(photo), 0),
        ] {
            let decoded = try ImageDecoder().decode(.bytes(bytes))
            #expect(decoded.width == photo.width && decoded.height == photo.height, "\(name)")
            #expect(decoded.format == (name.hasPrefix("avif") ? .avif : .jxl))
            #expect(!decoded.hasAlpha, "\(name)")
            let diff = difference(decoded.pixels, photo.pixels, width: photo.width)
            #expect(diff.mean <= tolerance, "\(name): \(diff)")
        }
    }

    /// `bytes` decoded by Pillow with pillow-heif (scripts/reference-decoders.sh), as 8-bit RGBA.
    static func decodedByPillow(_ bytes: [UInt8], name: String) throws -> RasterImage {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("reference-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let input = directory.appendingPathComponent(name)
        let output = directory.appendingPathComponent("decoded.png")
        try Data(bytes).write(to: input)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [
            RepositoryPaths.root.appendingPathComponent("scripts/reference-decoders.sh").path, "decode", input.path,
            output.path,
        ]
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "Pillow could not decode \(name)")
        return try ImageDecoder().decode(.file(path: output.path))
    }

    @Test("HEIC results decode in pillow-heif (its own libheif and libde265) close to the source, alpha and all")
    func heicByPillow() throws {
        let jpeg = try ImageDecoder().decode(.bytes(try JPEGEncoder(quality: 90).encode(photo)))
        let jpegMean = difference(jpeg.pixels, photo.pixels, width: photo.width).mean
        let heic = try HEIFEncoder(quality: 90).encode(photo)
        let decoded = try Self.decodedByPillow(heic, name: "photo.heic")
        #expect(decoded.width == photo.width && decoded.height == photo.height)
        #expect(difference(decoded.pixels, photo.pixels, width: photo.width).mean <= jpegMean * 1.5)
        // Alpha as an auxiliary image.
        let translucent = try Self.decodedByPillow(try HEIFEncoder(quality: 90).encode(transparent), name: "alpha.heic")
        let alpha = transparent.straightAlpha()
        #expect(translucent.hasAlpha && translucent.width == alpha.width)
        var alphaDifference = 0
        for index in stride(from: 3, to: alpha.pixels.count, by: 4) {
            alphaDifference += abs(Int(translucent.pixels[index]) - Int(alpha.pixels[index]))
        }
        #expect(Double(alphaDifference) / Double(alpha.pixels.count / 4) < 4)
        // Out of range: typed errors.
        #expect(throws: ImageEncodingError.self) { try HEIFEncoder(quality: 101).encode(photo) }
        #expect(throws: ImageEncodingError.self) { try HEIFEncoder(preset: "warp").encode(photo) }
    }

    @Test("BMP and TIFF results decode in Pillow to the source's pixels")
    func bmpAndTIFFByPillow() throws {
        for (name, bytes) in [
            ("alpha.bmp", try BMPEncoder().encode(transparent)), ("photo.bmp", try BMPEncoder().encode(photo)),
            ("alpha.tiff", try TIFFEncoder().encode(transparent)), ("photo.tiff", try TIFFEncoder().encode(photo)),
        ] {
            let source = name.hasPrefix("alpha") ? transparent.straightAlpha() : photo
            let decoded = try Self.decodedByPillow(bytes, name: name)
            #expect(decoded.width == source.width && decoded.height == source.height, "\(name)")
            #expect(decoded.pixels == source.pixels, "\(name)")
            // And by the project's own decoders.
            #expect(try ImageDecoder().decode(.bytes(bytes)).straightAlpha().pixels == source.pixels, "\(name)")
        }
    }

    @Test("AVIF and JPEG XL keep alpha and the ICC profile, and refuse parameters out of range")
    func modernOptions() throws {
        for bytes in [
            try AVIFEncoder(lossless: true).encode(transparent), try JXLEncoder(quality: 100).encode(transparent),
        ] {
            let decoded = try ImageDecoder().decode(.bytes(bytes))
            #expect(decoded.hasAlpha)
            #expect(difference(decoded.pixels, transparent.straightAlpha().pixels, width: decoded.width).maximum <= 1)
        }
        let profile = Fixtures.bytes("profiles/compatibleWithAdobeRGB1998.icc")
        let tagged = RasterImage(
            width: photo.width, height: photo.height, frames: photo.frames, iccProfile: profile, hasAlpha: false)!
        #expect(try ImageDecoder().decode(.bytes(try AVIFEncoder().encode(tagged))).iccProfile == profile)
        #expect(
            try ImageDecoder().decode(.bytes(try AVIFEncoder(includeICCProfile: false).encode(tagged))).iccProfile
                == nil)
        #expect(try ImageDecoder().decode(.bytes(try JXLEncoder().encode(tagged))).iccProfile != nil)
        #expect(throws: ImageEncodingError.self) { try AVIFEncoder(quality: 101).encode(photo) }
        #expect(throws: ImageEncodingError.self) { try AVIFEncoder(speed: 11).encode(photo) }
        #expect(throws: ImageEncodingError.self) { try JXLEncoder(effort: 0).encode(photo) }
        #expect(throws: ImageEncodingError.self) { try JXLEncoder().encode(photo, frame: 1) }
        // Smaller at a lower quality: the quality reaches the codec.
        #expect(try AVIFEncoder(quality: 30).encode(photo).count < AVIFEncoder(quality: 80).encode(photo).count)
        #expect(try JXLEncoder(quality: 30).encode(photo).count < JXLEncoder(quality: 80).encode(photo).count)
    }

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
        #expect(OutputFormat(fileExtension: "gif") == .gif(GIFEncoder()))
        #expect(OutputFormat(fileExtension: "bmp") == .bmp(BMPEncoder()))
        #expect(OutputFormat(fileExtension: "svg") == nil)
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
