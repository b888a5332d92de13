import Foundation
import RasterImage
import Testing

@testable import ImageService

/// The options that change how an answer is made or sent rather than its pixels:
/// quality, max_bytes, presets, security options, expires, filename, raw and
/// skip_processing, the path prefix, truncated signatures, wildcard sources, smart crop.
@Suite("Processing options: handling, limits and headers")
struct ProcessingHandlingTests {
    typealias References = ProcessingReferenceTests

    static func bytes(_ reply: Reply, _ label: String = "") -> [UInt8]? {
        guard case .image(let result) = reply else {
            Issue.record("\(label): \(reply)")
            return nil
        }
        return Array(result.body.readableBytesView)
    }

    static func failure(_ reply: Reply) -> ServiceError? {
        if case .failure(let error) = reply { return error }
        return nil
    }

    @Test("q wins over fq, which wins over the settings (imgproxy's order); mb lowers it until the result fits")
    func quality() async throws {
        try await References.withService { service in
            let base = "/_/rs:fit:200:200"
            let source = "/plain/local:///photo.png@jpg"
            let normal = try #require(Self.bytes(await References.get(service, base + source)))
            let low = try #require(Self.bytes(await References.get(service, base + "/q:10" + source)))
            let perFormat = try #require(Self.bytes(await References.get(service, base + "/fq:jpeg:10" + source)))
            // q wins over fq (imgproxy's processing code); fq for another format does nothing.
            let both = try #require(Self.bytes(await References.get(service, base + "/q:95/fq:jpeg:10" + source)))
            let high = try #require(Self.bytes(await References.get(service, base + "/q:95" + source)))
            let other = try #require(Self.bytes(await References.get(service, base + "/fq:webp:10" + source)))
            #expect(low.count < normal.count && perFormat == low && both == high && high.count > normal.count)
            #expect(other == normal)
            // max_bytes: under the limit, in a JPEG that still decodes at full size.
            let target = low.count + (normal.count - low.count) / 3
            let fitted = try #require(Self.bytes(await References.get(service, base + "/mb:\(target)" + source)))
            #expect(fitted.count <= target && fitted.count < normal.count)
            let decoded = try ImageDecoder().decode(.bytes(fitted))
            #expect(decoded.width == 200 && decoded.height == 150)
            // A limit no quality reaches: the last try (quality 10 or below) is sent.
            let floor = try #require(Self.bytes(await References.get(service, base + "/mb:1" + source)))
            #expect(floor.count <= low.count)
        }
    }

    @Test("scp:0 keeps the source's colour profile in the result; the default strips it")
    func colorProfile() async throws {
        // A PNG with an ICC profile, written here.
        let profile = try #require(
            FileManager.default.contents(
                atPath: References.root.deletingLastPathComponent().appendingPathComponent(
                    "profiles/compatibleWithAdobeRGB1998.icc"
                ).path))
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("scp-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let pixels = [UInt8]((0..<(64 * 64)).flatMap { i in [UInt8(i % 256), 90, 200, 255] })
        let image = RasterImage(
            width: 64, height: 64, frames: [.init(pixels: pixels)], iccProfile: Array(profile), hasAlpha: false)!
        try Data(try PNGEncoder().encode(image)).write(to: folder.appendingPathComponent("p.png"))
        var configuration = References.configuration()
        configuration.sources = SourcePolicy(localRoot: folder.path)
        try await References.withService(configuration) { service in
            for format in ["png", "jpg", "webp"] {
                let kept = try #require(
                    Self.bytes(await References.get(service, "/_/w:32/scp:0/plain/local:///p.png@\(format)")))
                #expect(try ImageDecoder().decode(.bytes(kept)).iccProfile == Array(profile), "\(format)")
                let stripped = try #require(
                    Self.bytes(await References.get(service, "/_/w:32/plain/local:///p.png@\(format)")))
                #expect(try ImageDecoder().decode(.bytes(stripped)).iccProfile == nil, "\(format)")
            }
        }
    }

    @Test("presets: named, the default one first, presets inside presets, only presets")
    func presets() async throws {
        var rules = URLRules()
        try rules.addPreset("default=q:70/ar:1")
        try rules.addPreset("square=rs:fill:50:50")
        try rules.addPreset("small=pr:square/w:20")
        try rules.addPreset("loop=pr:loop/h:30")
        let source = "/plain/local:///photo.png@png"
        let url = try ProcessingURL.parse("/_/pr:small\(source)", signature: nil, allowsUnsigned: true, rules: rules)
        #expect(url.options.quality == 70 && url.options.resizingType == .fill)
        #expect(url.options.width == 20 && url.options.height == 50)
        // A preset that names itself is applied once; unknown ones are a 400.
        #expect(
            try ProcessingURL.parse("/_/pr:loop\(source)", signature: nil, allowsUnsigned: true, rules: rules)
                .options.height == 30)
        #expect(throws: ProcessingURL.Failure.unknownPreset("none")) {
            try ProcessingURL.parse("/_/pr:none\(source)", signature: nil, allowsUnsigned: true, rules: rules)
        }
        #expect(throws: URLRules.InvalidPreset.self) { try rules.addPreset("bad=w:-1") }
        #expect(throws: URLRules.InvalidPreset.self) { try rules.addPreset("no-equals") }
        // Only presets: the first segment names presets, separated as arguments are, and
        // nothing else is an option (imgproxy's form).
        rules.onlyPresets = true
        let only = try ProcessingURL.parse(
            "/_/square:small\(source)", signature: nil, allowsUnsigned: true, rules: rules)
        #expect(only.options.width == 20 && only.options.height == 50)
        #expect(throws: ProcessingURL.Failure.unknownPreset("w")) {
            try ProcessingURL.parse("/_/w:10\(source)", signature: nil, allowsUnsigned: true, rules: rules)
        }
        // Through the service: the preset's size.
        var serviceRules = URLRules()
        try serviceRules.addPreset("thumb=rs:fill:40:30")
        var configuration = References.configuration()
        configuration.urlRules = serviceRules
        try await References.withService(configuration) { service in
            let bytes = try #require(Self.bytes(await References.get(service, "/_/pr:thumb\(source)")))
            let image = try ImageDecoder().decode(.bytes(bytes))
            #expect(image.width == 40 && image.height == 30)
        }
    }

    @Test("security options: refused unless allowed, and then they only lower the limits")
    func securityOptions() async throws {
        let source = "/plain/local:///photo.png@png"
        try await References.withService { service in
            #expect(Self.failure(await References.get(service, "/_/msr:0.01\(source)"))?.status == 403)
        }
        var rules = URLRules()
        rules.allowsSecurityOptions = true
        var configuration = References.configuration()
        configuration.urlRules = rules
        try await References.withService(configuration) { service in
            // photo.png is 320x240 = 76,800 pixels, and about 200 KB.
            #expect(Self.failure(await References.get(service, "/_/msr:0.05\(source)"))?.status == 422)
            #expect(Self.bytes(await References.get(service, "/_/msr:0.08\(source)")) != nil)
            #expect(Self.failure(await References.get(service, "/_/msfs:1000\(source)"))?.status == 422)
            // mrd: a result past it is scaled down to it.
            let bytes = try #require(Self.bytes(await References.get(service, "/_/mrd:100\(source)")))
            let image = try ImageDecoder().decode(.bytes(bytes))
            #expect(image.width == 100 && image.height == 75)
        }
        // Raising a limit past the service's does not raise it.
        configuration = References.configuration()
        configuration.urlRules = rules
        configuration.maxSourcePixels = 50_000
        try await References.withService(configuration) { service in
            #expect(Self.failure(await References.get(service, "/_/msr:100\(source)"))?.status == 422)
        }
    }

    @Test("expires: a 404 after the time; before it the answer is fresh only until then")
    func expires() async throws {
        let source = "/plain/local:///photo.png@png"
        let past = Int(Date().timeIntervalSince1970) - 10
        let soon = Int(Date().timeIntervalSince1970) + 120
        try await References.withService { service in
            let gone = Self.failure(await References.get(service, "/_/w:10/exp:\(past)\(source)"))
            #expect(gone?.status == 404)
            guard case .image(let result) = await References.get(service, "/_/w:10/exp:\(soon)\(source)") else {
                Issue.record("no image before the time")
                return
            }
            #expect(result.meta.keepUntil.timeIntervalSince1970 <= Double(soon))
            // 0 means no expiry, as imgproxy.
            #expect(Self.bytes(await References.get(service, "/_/w:10/exp:0\(source)")) != nil)
        }
    }

    @Test("every result has a safely quoted Content-Disposition, as imgproxy's (httpheaders/cdv_test.go's table too)")
    func disposition() async throws {
        #expect(
            ResponseRules.contentDisposition(
                filename: nil, source: "local:///a/cat.png", format: .webp, attachment: true)
                == "attachment; filename=\"cat.webp\"")
        #expect(
            ResponseRules.contentDisposition(
                filename: "say \"hi\"\\", source: "x", format: .jpeg, attachment: false)
                == "inline; filename=\"say %22hi%22_.jpg\"")
        #expect(
            ResponseRules.contentDisposition(filename: "café\r\n", source: "x", format: .png, attachment: false)
                == "inline; filename=\"caf___.png\"; filename*=UTF-8''caf%C3%A9%0D%0A.png")
        // imgproxy's cdv_test.go cases (its `ext` is the result's format here).
        let cases: [(String, String?, ProcessingOptions.Format?, Bool, String)] = [
            ("http://example.com/test.jpg", nil, nil, false, "inline; filename=\"test.jpg\""),
            ("http://example.com/path/to/", nil, nil, false, "inline; filename=\"image\""),
            ("http://example.com/path/to/", nil, .png, false, "inline; filename=\"image.png\""),
            ("http://example.com/path/to/", "example", .png, false, "inline; filename=\"example.png\""),
            ("http://example.com/path/to/face.png", nil, .jpeg, false, "inline; filename=\"face.jpg\""),
            ("http://example.com/path/to/123.png", "face", .jpeg, false, "inline; filename=\"face.jpg\""),
            ("http://example.com/test.jpg", nil, nil, true, "attachment; filename=\"test.jpg\""),
            ("http://example.com/test.jpg", "my\"file", .png, false, "inline; filename=\"my%22file.png\""),
        ]
        for (source, filename, format, attachment, expected) in cases {
            #expect(
                ResponseRules.contentDisposition(
                    filename: filename, source: source, format: format, attachment: attachment) == expected,
                "\(source) \(filename ?? "-")")
        }
        try await References.withService { service in
            // A base64url-encoded name (fn:{name}:1): "Grüße" encoded.
            let encoded = "R3LDvMOfZQ"
            guard
                case .image(let result) = await References.get(
                    service, "/_/w:10/fn:\(encoded):1/att:1/plain/local:///photo.png@png")
            else {
                Issue.record("no image")
                return
            }
            #expect(result.meta.contentDisposition?.hasPrefix("attachment; filename=\"Gr__e.png\"") == true)
            #expect(Reply.headers(result.meta)[.contentDisposition] == result.meta.contentDisposition)
        }
    }

    @Test("raw and skip_processing send the source's bytes; other formats still processed")
    func passThrough() async throws {
        let original = try #require(
            FileManager.default.contents(atPath: References.root.appendingPathComponent("sources/photo.png").path))
        try await References.withService { service in
            for path in [
                "/_/w:10/raw:1/plain/local:///photo.png", "/_/w:10/skp:png/plain/local:///photo.png",
                "/_/w:10/skp:jpg:png/plain/local:///photo.png@png",
            ] {
                guard case .image(let result) = await References.get(service, path) else {
                    Issue.record("\(path): no answer")
                    continue
                }
                #expect(Array(result.body.readableBytesView) == Array(original), "\(path)")
                #expect(result.meta.contentType == "image/png")
            }
            // skp for another format, or a format change: processed.
            for path in ["/_/w:10/skp:jpg/plain/local:///photo.png", "/_/w:10/skp:png/plain/local:///photo.png@webp"] {
                let bytes = try #require(Self.bytes(await References.get(service, path)))
                #expect(try ImageDecoder().decode(.bytes(bytes)).width == 10, "\(path)")
            }
        }
        // Still held to the limits: a source over them is refused, raw or not.
        var configuration = References.configuration()
        configuration.maxSourcePixels = 1000
        try await References.withService(configuration) { service in
            #expect(Self.failure(await References.get(service, "/_/raw:1/plain/local:///photo.png"))?.status == 422)
        }
    }

    @Test("a path prefix, truncated signatures and wildcard sources")
    func prefixSignatureSources() async throws {
        let signature = try URLSignature(hexPairs: [(key: "0a0b", salt: "0c0d")], size: 8)
        let path = "/w:10/plain/local:///photo.png@png"
        let signed = "/" + signature.sign(path) + path
        #expect(signature.sign(path).count == 11)  // 8 bytes in unpadded base64url
        var configuration = References.configuration()
        configuration.signature = signature
        configuration.allowsUnsigned = false
        configuration.pathPrefix = "/img"
        try await References.withService(configuration) { service in
            #expect(Self.bytes(await References.get(service, "/img" + signed)) != nil)
            #expect(Self.failure(await References.get(service, signed))?.status == 404)
            let full = try URLSignature(hexPairs: [(key: "0a0b", salt: "0c0d")])
            #expect(Self.failure(await References.get(service, "/img/" + full.sign(path) + path))?.status == 403)
        }
        let policy = SourcePolicy(allowedPrefixes: ["https://*.example.com/images/", "local:///a*/"])
        #expect(throws: Never.self) { try policy.check(.remote(URL(string: "https://cdn.example.com/images/a.png")!)) }
        #expect(throws: SourcePolicy.Forbidden.self) {
            try policy.check(.remote(URL(string: "https://evil.com/x.example.com/images/a.png")!))
        }
        #expect(throws: SourcePolicy.Forbidden.self) {
            try policy.check(.remote(URL(string: "https://a.b/.example.com/images/a.png")!))
        }
        #expect(SourcePolicy.matches(prefix: "local:///a*/", "local:///abc/d.png"))
        #expect(!SourcePolicy.matches(prefix: "local:///a*/", "local:///b/abc/d.png"))
        #expect(SourcePolicy.matches(prefix: "http://*.*.x/", "http://a.b.x/y"))
    }

    @Test("smart gravity crops to where the image draws the eye, through the service")
    func smartCrop() async throws {
        // A flat image with a textured block in its right quarter.
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("smart-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        var pixels: [UInt8] = []
        for y in 0..<200 {
            for x in 0..<400 {
                let textured = x >= 320 && x < 390 && y >= 60 && y < 140
                let v: UInt8 = textured ? ((x / 3 + y / 3) % 2 == 0 ? 10 : 240) : 150
                pixels += [v, v, v, 255]
            }
        }
        try Data(try PNGEncoder().encode(RasterImage(width: 400, height: 200, pixels: pixels, hasAlpha: false)!))
            .write(to: folder.appendingPathComponent("t.png"))
        var configuration = References.configuration()
        configuration.sources = SourcePolicy(localRoot: folder.path)
        try await References.withService(configuration) { service in
            let smart = try #require(
                Self.bytes(await References.get(service, "/_/rs:fill:100:100/g:sm/plain/local:///t.png@png")))
            let centre = try #require(
                Self.bytes(await References.get(service, "/_/rs:fill:100:100/plain/local:///t.png@png")))
            let (a, b) = (try ImageDecoder().decode(.bytes(smart)), try ImageDecoder().decode(.bytes(centre)))
            #expect(a.width == 100 && a.height == 100)
            // The smart crop holds the texture (dark pixels); the centre crop is flat grey.
            #expect(a.pixels.enumerated().contains { $0.offset % 4 == 0 && $0.element < 60 })
            #expect(!b.pixels.enumerated().contains { $0.offset % 4 == 0 && $0.element < 60 })
        }
    }

    @Test("asking for a huge scaled image to crop a small box is refused before any pixel is made")
    func scaledBomb() async throws {
        try await References.withService { service in
            // 320x240 enlarged until 100000 wide would be 100000x75000 before the crop.
            let reply = await References.get(service, "/_/rs:fill:10:10:1/mw:100000/plain/local:///photo.png@png")
            #expect(Self.failure(reply)?.status == 422)
            // A watermark pushed off the image is not drawn, and nothing traps.
            #expect(
                Self.bytes(await References.get(service, "/_/wm:1:soea:-5000:-5000/plain/local:///photo.png@png"))
                    != nil)
            #expect(
                Self.bytes(await References.get(service, "/_/wm:1:nowe:5000:5000/plain/local:///photo.png@png")) != nil)
            // A mark scaled to a pixel and tiled without gaps: one layer, no list of a million places.
            let tiled = try #require(
                Self.bytes(await References.get(service, "/_/wm:1:re:0:0:0.0001/plain/local:///photo.png@png")))
            #expect(try ImageDecoder().decode(.bytes(tiled)).width == 320)
        }
    }
}
