import Foundation
import RasterImage
import TestSupport
import Testing

/// imgproxy's processing tests (`processing/trim_test.go`, `colorspace_test.go`, and the
/// format choice of `processing.go`), ported.
extension ImgproxySuiteTests {
    /// A PNG's colour type (IHDR): 0 grey, 2 RGB, 4 grey and alpha, 6 RGBA.
    static func pngColorType(_ bytes: [UInt8]) -> Int? {
        bytes.count > 25 && bytes[12..<16].elementsEqual("IHDR".utf8) ? Int(bytes[25]) : nil
    }

    /// A JPEG's component count (from its SOF marker): 1 grey, 3 colour.
    static func jpegComponents(_ bytes: [UInt8]) -> Int? {
        var index = 2
        while index + 9 < bytes.count, bytes[index] == 0xFF {
            let marker = bytes[index + 1]
            let length = Int(bytes[index + 2]) << 8 | Int(bytes[index + 3])
            if (0xC0...0xCF).contains(marker) && ![0xC4, 0xC8, 0xCC].contains(marker) { return Int(bytes[index + 9]) }
            index += 2 + length
        }
        return nil
    }

    // MARK: processing/trim_test.go

    @Test("trim TestThreshold, TestColor, TestAlpha: imgproxy's sizes for trim1, trim2 and trim3")
    func trim() async throws {
        let cases: [(String, String, Int, Int)] = [
            ("trim1.png", "trim:5", 320, 220), ("trim1.png", "trim:100", 290, 190),
            ("trim1.png", "trim:150", 260, 160), ("trim1.png", "trim:200", 230, 130),
            ("trim1.png", "trim:220", 200, 100), ("trim1.png", "trim:0:ff0000", 350, 250),
            ("trim1.png", "trim:5::1", 330, 220), ("trim1.png", "trim:5:::1", 320, 230),
            ("trim1.png", "trim:5::1:1", 330, 230),
            ("trim2.png", "trim:1", 200, 170), ("trim2.png", "trim:1:ff0000", 200, 170),
            ("trim2.png", "trim:1:0000ff", 200, 130), ("trim2.png", "trim:1:ffffff", 200, 200),
            // Transparent edges are flattened onto magenta first, as libvips' find_trim under imgproxy.
            ("trim3.png", "trim:1:ff00ff", 200, 130),
        ]
        try await serving { (server: ServedProcess) async throws in
            for (file, option, width, height) in cases {
                let answer = try await server.get("/unsafe/\(option)/plain/local:///\(file)@png")
                let image = try decoded(answer)
                #expect(
                    image.width == width && image.height == height, "\(file) \(option): \(image.width)x\(image.height)")
            }
        }
    }

    // MARK: processing/colorspace_test.go

    @Test(
        "colorspace TestColorspace, TestDownscaleHDR, TestWatermarkColorspace: grey stays grey; 16-bit becomes 8-bit"
    )
    func colorspace() async throws {
        // (source, format, grey expected). imgproxy's interpretations: BW for grey sources,
        // sRGB for colour ones; with IMGPROXY_PRESERVE_HDR its RGB16 and Grey16 results are
        // 16-bit, which the service's 8-bit results are not (a difference, listed).
        let cases: [(String, String, Bool)] = [
            ("test-images/png/8-bpp.png", "png", false), ("test-images/png/16-bpp.png", "png", false),
            ("test-images/png/16-bpp.png", "jpg", false), ("test-images/tiff/8-bpp.tiff", "png", false),
            ("test-images/tiff/16-bpp.tiff", "png", false),
            ("test-images/png/8-bpp-grayscale.png", "png", true),
            ("test-images/png/16-bpp-grayscale.png", "png", true),
            ("test-images/png/16-bpp-grayscale.png", "jpg", true),
            ("test-images/tiff/8-bpp-grayscale.tiff", "png", true),
            ("test-images/tiff/16-bpp-grayscale.tiff", "png", true),
            ("test-images/jpg/jpg.jpg", "jpg", true), ("test1.jpg", "png", true),
        ]
        for preserveHDR in ["true", "false"] {
            try await serving(["IMGPROXY_PRESERVE_HDR": preserveHDR]) { (server: ServedProcess) async throws in
                for (source, format, grey) in cases {
                    let answer = try await server.get(
                        "/unsafe/resize:fill:100:100/enlarge:1/format:\(format)/plain/local:///\(source)")
                    #expect(answer.status == 200, "\(source)")
                    let image = try decoded(answer)
                    #expect(image.width == 100 && image.height == 100, "\(source)")
                    if format == "png" {
                        #expect(Self.pngColorType(answer.body) == (grey ? 0 : 2), "\(source) as PNG")
                        #expect(answer.body[24] == 8, "\(source): 8 bits")
                    } else {
                        #expect(Self.jpegComponents(answer.body) == (grey ? 1 : 3), "\(source) as JPEG")
                    }
                }
            }
        }
        // A grey watermark keeps a grey result grey; a colour source stays colour under it.
        for (source, watermark, grey) in [
            ("test-images/png/8-bpp-grayscale.png", "test-images/png/16-bpp-grayscale.png", true),
            ("test-images/png/8-bpp.png", "test-images/png/16-bpp-grayscale.png", false),
            ("test-images/png/16-bpp-grayscale.png", "test-images/png/8-bpp-grayscale.png", true),
            ("test-images/png/16-bpp-grayscale.png", "test-images/png/16-bpp.png", false),
            ("test-images/png/16-bpp-grayscale.png", "test-images/png/8-bpp.png", false),
        ] {
            try await serving(["IMGPROXY_WATERMARK_PATH": Self.root + "/" + watermark]) {
                (server: ServedProcess) async throws in
                let answer = try await server.get(
                    "/unsafe/resize:fill:100:100/enlarge:1/format:png/watermark:0.5/plain/local:///\(source)")
                #expect(Self.pngColorType(answer.body) == (grey ? 0 : 2), "\(source) with \(watermark)")
            }
        }
    }

    // MARK: processing.go: determineOutputFormat, and max_animation_frames

    @Test(
        "the format without one in the URL: the source's when preferred (an animated GIF stays one), else the first fit"
    )
    func preferredFormats() async throws {
        let gif = "/unsafe/rs:fit:100:100/plain/local:///test-images/gif/gif.gif"
        try await serving(["IMGPROXY_MAX_ANIMATION_FRAMES": "10"]) { (server: ServedProcess) async throws in
            let answer = try await server.get(gif)
            #expect(answer.header("Content-Type") == "image/gif")
            #expect(try decoded(answer).frames.count == 5)
            // A TIFF is not preferred: JPEG (no alpha).
            let tiff = try await server.get("/unsafe/rs:fit:50:50/plain/local:///test-images/tiff/8-bpp.tiff")
            #expect(tiff.header("Content-Type") == "image/jpeg")
        }
        try await serving(["IMGPROXY_MAX_ANIMATION_FRAMES": "3"]) { (server: ServedProcess) async throws in
            // More frames than allowed: the first three, as imgproxy's min(pages, max_animation_frames).
            #expect(try decoded(await server.get(gif)).frames.count == 3)
        }
        try await serving { (server: ServedProcess) async throws in
            // One frame allowed (the default): a still GIF, still a GIF.
            let answer = try await server.get(gif)
            let still = try decoded(answer)
            #expect(answer.header("Content-Type") == "image/gif" && still.frames.count == 1)
        }
        try await serving(["IMGPROXY_PREFERRED_FORMATS": "webp,jpeg"]) { (server: ServedProcess) async throws in
            let png = try await server.get("/unsafe/rs:fit:50:50/plain/local:///test1.png")
            #expect(png.header("Content-Type") == "image/webp")
        }
        try await serving(["IMGPROXY_PREFERRED_FORMATS": "jpeg,png", "IMGPROXY_MAX_ANIMATION_FRAMES": "10"]) {
            (server: ServedProcess) async throws in
            // Nothing preferred holds frames: the first preferred, a still.
            let answer = try await server.get(gif)
            #expect(answer.header("Content-Type") == "image/jpeg")
        }
        try await serving(["IMGPROXY_ENFORCE_WEBP": "true"]) { (server: ServedProcess) async throws in
            let enforced = try await server.get(
                "/unsafe/rs:fit:50:50/plain/local:///test1.png@png", headers: [("Accept", "image/webp")])
            #expect(enforced.header("Content-Type") == "image/webp" && enforced.header("Vary") == "Accept")
            let other = try await server.get("/unsafe/rs:fit:50:50/plain/local:///test1.png@png")
            #expect(other.header("Content-Type") == "image/png")
        }
    }

    @Test("presets in settings: forward references, presets-only segments, an empty preset refused at start")
    func presetSettings() async throws {
        try await serving(["IMGPROXY_PRESETS": "a=preset:b,b=rs:fit:40:40"]) { (server: ServedProcess) async throws in
            let image = try decoded(await server.get("/unsafe/pr:a/plain/local:///geometry.png@png"))
            #expect(image.width == 40 && image.height == 20)
        }
        try await serving([
            "IMGPROXY_PRESETS": "small=rs:fit:40:40,square=rs:fill:20:20", "IMGPROXY_ONLY_PRESETS": "true",
        ]) {
            (server: ServedProcess) async throws in
            let image = try decoded(await server.get("/unsafe/small:square/plain/local:///geometry.png@png"))
            #expect(image.width == 20 && image.height == 20)
            #expect(try await server.get("/unsafe/rs:fit:10:10/plain/local:///geometry.png").status == 404)
        }
        let refused = try await Command.run(
            ["serve", "--allow-unsigned", "--port", "0"], environment: ["IMGPROXY_PRESETS": "empty="])
        #expect(refused.status == 64, "\(refused.stderr)")
        #expect(refused.stderr.contains("empty="))
    }

    @Test("URLs imgproxy repairs: an empty option segment, merged slashes, %3A, over HTTP")
    func repairedURLs() async throws {
        try await serving { (server: ServedProcess) async throws in
            for path in [
                "/unsafe//plain/local:///test1.png@png", "/unsafe/rs%3Afit%3A4%3A4/plain/local:///test1.png@png",
                "/unsafe/rs:fit:4:4/plain/local:/test1.png@png",
            ] {
                #expect(try await server.get(path).status == 200, "\(path)")
            }
        }
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        origin.serve("/a.png", .init(body: Self.bytes("test1.png")))
        try await serving { (server: ServedProcess) async throws in
            let merged = "/unsafe/rs:fit:4:4/plain/http:/127.0.0.1:\(origin.port)/a.png"
            #expect(try await server.get(merged).status == 200)
        }
    }
}

extension ImgproxySuiteTests {
    /// One case of imgproxy's size tables (Fixtures/imgproxy/size-cases.json, transcribed
    /// by Fixtures/tools/transcribe-imgproxy-sizes.py).
    struct SizeCase: Decodable {
        let test: String
        let options: String
        let width: Int
        let height: Int
    }

    @Test(
        "processing_test.go TestResizeTo* and TestResultSizeLimit: 167 sizes of geometry.png; TestImageResolutionTooLarge"
    )
    func sizeTables() async throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: Self.root + "/size-cases.json"))
        let cases = try JSONDecoder().decode([SizeCase].self, from: data)
        #expect(cases.count == 167)
        try await serving(arguments: ["--allow-security-options"]) { (server: ServedProcess) async throws in
            for test in cases {
                let answer = try await server.get("/unsafe/\(test.options)/plain/local:///geometry.png@png")
                #expect(answer.status == 200, "\(test.test) \(test.options): \(answer.status) \(answer.text)")
                guard answer.status == 200 else { continue }
                let image = try decoded(answer)
                #expect(
                    image.width == test.width && image.height == test.height,
                    "\(test.test) \(test.options): \(image.width)x\(image.height), imgproxy \(test.width)x\(test.height)"
                )
            }
            let tooLarge = try await server.get("/unsafe/max_src_resolution:0.00001/plain/local:///geometry.png")
            #expect(tooLarge.status == 422)
        }
    }
}
