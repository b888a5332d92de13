import Foundation
import RasterImage
import Testing

@testable import ImageService

/// imgproxy's parser tests (v4.0.12: `handlers/path_test.go`, `security/signature_test.go`,
/// `options/parser/presets_test.go` and `processing_options_test.go`), ported with
/// imgproxy's literal inputs and expectations.
@Suite("imgproxy's parser tests, ported")
struct ImgproxyParserTests {
    static func base64(_ text: String) -> String {
        Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func parse(_ path: String, rules: URLRules = URLRules()) throws -> ProcessingURL {
        try ProcessingURL.parse("/unsafe" + path, signature: nil, allowsUnsigned: true, rules: rules)
    }

    static func source(_ url: ProcessingURL) -> String? {
        if case .remote(let remote) = url.source { return remote.absoluteString }
        return nil
    }

    // MARK: handlers/path_test.go

    @Test("TestParsePath: the signature split off; query dropped; slashes and %3A repaired; no separator a 404")
    func parsePath() throws {
        let cases: [(String, String?)] = [
            (
                "/dummy_signature/rs:fill:300:200/plain/http://example.com/image.jpg",
                "rs:fill:300:200/plain/http://example.com/image.jpg"
            ),
            (
                "/dummy_signature/rs:fill:300:200/plain/https:/example.com/path/to/image.jpg",
                "rs:fill:300:200/plain/https://example.com/path/to/image.jpg"
            ),
            (
                "/dummy_signature/rs%3Afill%3A300%3A200/plain/https://example.com/path/to/image.jpg",
                "rs:fill:300:200/plain/https://example.com/path/to/image.jpg"
            ),
            ("/dummy_signature/rs%3Afill%3A300%3A200/abc/abc", "rs:fill:300:200/abc/abc"),
            ("/invalid_path_without_slash", nil), ("/", nil), ("/signature_only", nil),
        ]
        for (path, expected) in cases {
            let signed = path.dropFirst().split(separator: "/", maxSplits: 1).dropFirst().first.map(String.init)
            if let expected {
                #expect(ProcessingURL.repaired(Substring(signed ?? "")) == expected, "\(path)")
            } else {
                #expect(throws: ProcessingURL.Failure.self, "\(path)") {
                    try ProcessingURL.parse(path, signature: nil, allowsUnsigned: true)
                }
                #expect((try? ProcessingURL.parse(path, signature: nil, allowsUnsigned: true)) == nil)
            }
        }
        // PathWithPrefix and the query (Hummingbird's path has none) through the service's own prefix.
        let parsed = try Self.parse("/rs:fill:300:200/plain/http://example.com/image.jpg")
        #expect(Self.source(parsed) == "http://example.com/image.jpg")
        #expect(ProcessingURL.Failure.malformedPath.status == 404)
    }

    @Test("TestRedenormalizePathHTTPProtocol: scheme:/ back to scheme://, local:/ to local:///, the rest alone")
    func redenormalize() {
        let cases = [
            ("plain/http:/example.com/image.jpg", "plain/http://example.com/image.jpg"),
            ("plain/https:/example.com/image.jpg", "plain/https://example.com/image.jpg"),
            ("plain/local:/image.jpg", "plain/local:///image.jpg"),
            (
                "/rs:fill:300:200/plain/http:/example.com/image.jpg",
                "rs:fill:300:200/plain/http://example.com/image.jpg"
            ),
            ("/plain/http://example.com/image.jpg", "plain/http://example.com/image.jpg"),
            ("/rs:fill:300:200/plain/example.com/image.jpg", "rs:fill:300:200/plain/example.com/image.jpg"),
            ("", ""), ("/", ""), ("/http:/example.com/image.jpg", "http:/example.com/image.jpg"),
            ("/plain/example.com/image.jpg", "plain/example.com/image.jpg"), ("/plain/http:", "plain/http:"),
            ("/plain/http:/test", "plain/http://test"),
        ]
        for (input, expected) in cases {
            #expect(ProcessingURL.repaired(Substring(input)) == expected, "\(input)")
        }
    }

    // MARK: security/signature_test.go

    @Test("TestVerifySignature*: key test-key, salt test-salt; truncated, rotated and trusted signatures")
    func signatures() throws {
        let hex = { (text: String) in Data(text.utf8).map { String(format: "%02x", $0) }.joined() }
        let one = try URLSignature(hexPairs: [(key: hex("test-key"), salt: hex("test-salt"))])
        #expect(one.isValid("oWaL7QoW5TsgbuiS9-5-DI8S3Ibbo1gdB2SteJh3a20", for: "/asd"))
        #expect(!one.isValid("oWaL7QoW5Ts", for: "/asd"))
        let truncated = try URLSignature(hexPairs: [(key: hex("test-key"), salt: hex("test-salt"))], size: 8)
        #expect(truncated.isValid("oWaL7QoW5Ts", for: "/asd"))
        let two = try URLSignature(hexPairs: [
            (key: hex("test-key"), salt: hex("test-salt")), (key: hex("test-key2"), salt: hex("test-salt2")),
        ])
        #expect(two.isValid("jYz1UZ7j1BCdSzH3pZhaYf0iuz0vusoOTdqJsUT6WXI", for: "/asd"))
        #expect(two.isValid("oWaL7QoW5TsgbuiS9-5-DI8S3Ibbo1gdB2SteJh3a20", for: "/asd"))
        #expect(!two.isValid("dtLwhdnPPis", for: "/asd"))
        var trusted = one
        trusted.trusted = ["truested"]
        #expect(trusted.isTrusted("truested") && !trusted.isTrusted("untrusted"))
        #expect(throws: ProcessingURL.Failure.badSignature) {
            try ProcessingURL.parse("/untrusted/asd", signature: trusted, allowsUnsigned: false)
        }
        // Without a key, any signature text without ":" stands in (imgproxy's unsigned mode).
        #expect(throws: ProcessingURL.Failure.badSignature) {
            try ProcessingURL.parse("/a:b/plain/http://x/y.png", signature: nil, allowsUnsigned: true)
        }
    }

    // MARK: options/parser/presets_test.go

    @Test("TestParsePreset*: NAME=OPTIONS; no =, an empty name or value, a bad option refused; blanks and # skipped")
    func presets() throws {
        var rules = URLRules()
        try rules.addPresets(["test=resize:fit:100:200/sharpen:2"])
        #expect(
            rules.presets["test"]
                == [.init(name: "resize", arguments: ["fit", "100", "200"]), .init(name: "sharpen", arguments: ["2"])])
        for bad in [
            "resize:fit:100:200/sharpen:2", "=resize:fit:100:200/sharpen:2", "test=",
            "test=resize:fit:100:200/sharpen:2/blur", "test=resize:fit:-1:-2/sharpen:2",
        ] {
            var fresh = URLRules()
            #expect(throws: URLRules.InvalidPreset.self, "\(bad)") { try fresh.addPresets([bad]) }
        }
        for ignored in ["   ", "#  test=resize:fit:100:200/sharpen:2"] {
            var fresh = URLRules()
            try fresh.addPresets([ignored])
            #expect(fresh.presetNames.isEmpty, "\(ignored)")
        }
        // A preset may name one defined after it.
        var forward = URLRules()
        try forward.addPresets(["a=preset:b", "b=q:50"])
        #expect(try Self.parse("/pr:a/plain/http://images.dev/x.jpg", rules: forward).options.quality == 50)
    }

    // MARK: options/parser/processing_options_test.go

    @Test("TestParseBase64URL*, TestParsePlainURL*: sources, extensions, base URL, replacements, filenames")
    func sources() throws {
        let origin = "http://images.dev/lorem/ipsum.jpg?param=value"
        var url = try Self.parse("/size:100:100/\(Self.base64(origin)).png")
        #expect(Self.source(url) == origin && url.format == .png)
        url = try Self.parse("/size:100:100/\(Self.base64(origin))")
        #expect(Self.source(url) == origin && url.format == nil)
        var withName = URLRules()
        withName.base64URLIncludesFilename = true
        url = try Self.parse("/size:100:100/\(Self.base64(origin)).png/puppy.jpg", rules: withName)
        #expect(Self.source(url) == origin && url.format == .png)

        var based = URLRules()
        based.baseURL = "http://images.dev/"
        url = try Self.parse("/size:100:100/\(Self.base64("lorem/ipsum.jpg?param=value")).png", rules: based)
        #expect(Self.source(url) == "http://images.dev/lorem/ipsum.jpg?param=value")
        url = try Self.parse("/size:100:100/plain/lorem/ipsum.jpg@png", rules: based)
        #expect(Self.source(url) == "http://images.dev/lorem/ipsum.jpg" && url.format == .png)
        url = try Self.parse("/size:100:100/plain/lorem%2Fipsum.jpg%3Fparam%3Dvalue@png", rules: based)
        #expect(Self.source(url) == "http://images.dev/lorem/ipsum.jpg?param=value")

        var replaced = URLRules()
        replaced.urlReplacements = [
            try #require(.init(pattern: "^test://([^/]*)/", template: "test2://images.dev/${1}/dolor/")),
            try #require(.init(pattern: "^test2://", template: "http://")),
        ]
        url = try Self.parse("/size:100:100/\(Self.base64("test://lorem/ipsum.jpg?param=value")).png", rules: replaced)
        #expect(Self.source(url) == "http://images.dev/lorem/dolor/ipsum.jpg?param=value")
        url = try Self.parse("/size:100:100/plain/test://lorem/ipsum.jpg@png", rules: replaced)
        #expect(Self.source(url) == "http://images.dev/lorem/dolor/ipsum.jpg")
        // The same rewrite in IMGPROXY_URL_REPLACEMENTS' wildcard form.
        var wildcard = URLRules()
        wildcard.urlReplacements = [
            try #require(.init(wildcard: "test://*/", template: "test2://images.dev/${1}/dolor/")),
            try #require(.init(wildcard: "test2://", template: "http://")),
        ]
        url = try Self.parse("/plain/test://lorem/ipsum.jpg", rules: wildcard)
        #expect(Self.source(url) == "http://images.dev/lorem/dolor/ipsum.jpg")

        url = try Self.parse("/size:100:100/plain/http%3A%2F%2Fimages.dev%2Florem%2Fipsum.jpg%3Fparam%3Dvalue@png")
        #expect(Self.source(url) == origin && url.format == .png)
    }

    @Test("TestParseWithArgumentsSeparator, TestParsePathFormat, Preset*, Skip*, Expires*, OnlyPresets, AllowedOptions")
    func options() throws {
        var comma = URLRules()
        comma.argumentsSeparator = ","
        var url = try Self.parse("/size,100,100,1/plain/http://images.dev/lorem/ipsum.jpg", rules: comma)
        #expect(url.options.width == 100 && url.options.height == 100 && url.options.enlarge)
        #expect(try Self.parse("/format:webp/plain/http://images.dev/lorem/ipsum.jpg").format == .webp)
        // Every format imgproxy's open-source edition writes parses (SVG too: a raster
        // source asking for it is integration_test's TestErrorSavingToSVG, a 422 when
        // processed); a Pro format is a 422, as imgproxy's for one it cannot save; an
        // unknown name a 404.
        for (name, format) in [
            ("svg", ProcessingOptions.Format.svg), ("bmp", .bmp), ("tiff", .tiff), ("heic", .heic), ("ico", .ico),
        ] {
            #expect(try Self.parse("/rs:fill:4:4/plain/local:///test1.png@\(name)").format == format)
        }
        #expect(throws: ProcessingURL.Failure.cannotWrite("pdf")) {
            try Self.parse("/rs:fill:4:4/plain/local:///test1.png@pdf")
        }
        #expect(ProcessingURL.Failure.cannotWrite("pdf").status == 422)
        #expect(throws: ProcessingURL.Failure.invalidArgument(option: "ext", value: "xyz")) {
            try Self.parse("/plain/local:///test1.png@xyz")
        }

        var presets = URLRules()
        try presets.addPresets(["test1=resizing_type:fill", "test2=blur:0.2/quality:50"])
        url = try Self.parse("/preset:test1:test2/plain/http://images.dev/lorem/ipsum.jpg", rules: presets)
        #expect(url.options.resizingType == .fill && url.options.blur == 0.2 && url.options.quality == 50)
        var defaults = URLRules()
        try defaults.addPresets(["default=resizing_type:fill/blur:0.2/quality:50"])
        url = try Self.parse("/quality:70/plain/http://images.dev/lorem/ipsum.jpg", rules: defaults)
        #expect(url.options.resizingType == .fill && url.options.blur == 0.2 && url.options.quality == 70)
        var loop = URLRules()
        try loop.addPresets(["test1=resizing_type:fill/preset:test2", "test2=blur:0.2/preset:test1"])
        url = try Self.parse("/preset:test1/plain/http://images.dev/lorem/ipsum.jpg", rules: loop)
        #expect(url.options.resizingType == .fill && url.options.blur == 0.2)

        #expect(try Self.parse("/cachebuster:123/plain/http://images.dev/a.jpg").options.cacheBuster == "123")
        #expect(try Self.parse("/ph:1/plain/http://images.dev/a.jpg").options.preserveHDR)
        url = try Self.parse("/skp:jpg:png/plain/http://images.dev/lorem/ipsum.jpg")
        #expect(url.options.skipProcessing == [.jpeg, .png])
        // Every name skp takes, in any case, and the source format it names.
        let skipped: [(String, ImageFormat)] = [
            ("jpg", .jpeg), ("JPEG", .jpeg), ("png", .png), ("gif", .gif), ("webp", .webp), ("avif", .avif),
            ("heic", .heif), ("heif", .heif), ("jxl", .jxl), ("tiff", .tiff), ("tif", .tiff), ("bmp", .bmp),
            ("ico", .ico), ("svg", .svg),
        ]
        for (name, format) in skipped {
            let parsed = try Self.parse("/skp:\(name)/plain/http://images.dev/a.jpg")
            #expect(parsed.options.skipProcessing == [format], "\(name)")
        }
        #expect(throws: ProcessingURL.Failure.self) {
            try Self.parse("/skp:jpg:png:bad_format/plain/http://images.dev/lorem/ipsum.jpg")
        }
        #expect(try Self.parse("/exp:32503669200/plain/http://images.dev/a.jpg").options.expires == 32_503_669_200)
        #expect(throws: ProcessingURL.Failure.self) { try Self.parse("/exp:1609448400/plain/http://images.dev/a.jpg") }

        var only = URLRules()
        only.onlyPresets = true
        try only.addPresets(["test1=blur:0.2", "test2=quality:50"])
        let origin = "http://images.dev/lorem/ipsum.jpg"
        url = try Self.parse("/test1:test2/plain/\(origin)@png", rules: only)
        #expect(
            url.options.blur == 0.2 && url.options.quality == 50 && url.format == .png && Self.source(url) == origin)
        url = try Self.parse("/test1:test2/\(Self.base64(origin + "?param=value")).png", rules: only)
        #expect(url.options.quality == 50 && Self.source(url) == origin + "?param=value")

        var allowed = URLRules()
        allowed.allowedOptions = ["w", "h", "pr"]
        try allowed.addPresets(["test1=blur:0.2"])
        let encoded = Self.base64(origin + "?param=value")
        for (options, refused) in [
            ("w:100/h:200", false), ("w:100/h:200/blur:10", true), ("w:100/h:200/pr:test1", false),
            ("w:100/h:200/pr:test1/blur:10", true),
        ] {
            let result = Result { try Self.parse("/\(options)/\(encoded).png", rules: allowed) }
            if refused {
                #expect(throws: ProcessingURL.Failure.optionNotAllowed("blur"), "\(options)") { try result.get() }
            } else {
                #expect((try? result.get()) != nil, "\(options)")
            }
        }
    }

    @Test("TestParsePathClientHints, ...Redefine: hints are defaults (width over the DPR), the URL's own win")
    func clientHints() throws {
        var configuration = ImageService.Configuration()
        configuration.clientHints = true
        for (dpr, width, expectedWidth, expectedDPR) in [
            (nil, nil, 0, 1.0), (nil, "100", 100, 1.0), ("2.0", nil, 0, 2.0), ("2.0", "100", 50, 2.0),
        ] as [(String?, String?, Int, Double)] {
            let features = ClientFeatures(accept: nil, dpr: [dpr], width: [width], configuration: configuration)
            let url = try ProcessingURL.parse(
                "/unsafe/plain/http://images.dev/lorem/ipsum.jpg@png", signature: nil, allowsUnsigned: true,
                starting: features.startingOptions)
            #expect(
                url.options.width == expectedWidth && url.options.dpr == expectedDPR, "\(dpr ?? "-") \(width ?? "-")")
        }
        let features = ClientFeatures(accept: nil, dpr: ["2.0"], width: ["100"], configuration: configuration)
        let url = try ProcessingURL.parse(
            "/unsafe/width:150/dpr:3.0/plain/http://images.dev/lorem/ipsum.jpg@png", signature: nil,
            allowsUnsigned: true, starting: features.startingOptions)
        #expect(url.options.width == 150 && url.options.dpr == 3.0)
    }
}
