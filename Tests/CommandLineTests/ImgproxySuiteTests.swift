import Foundation
import RasterImage
import TestSupport
import Testing

@testable import ImageService

/// imgproxy's own test suite (github.com/imgproxy/imgproxy v4.0.12: `integration_test/`,
/// `handlers/`, `server/`, `clientfeatures/`, `processing/`), ported as black-box
/// requests to `imageloader serve` configured with imgproxy's `IMGPROXY_*` variables,
/// with imgproxy's literal expectations: statuses, header fields, sizes, formats and
/// colour types. Each test names the Go test it comes from. The images are stand-ins
/// with the same names, sizes, formats, depths and alpha (Fixtures/generate-imgproxy.py);
/// where imgproxy compares image hashes, pixels are compared with a stated tolerance
/// against the source or a property that holds whatever the encoder.
///
/// imgproxy runs its tests with unsigned URLs allowed (no key) and, for the handler
/// tests, loopback sources allowed: here `--allow-unsigned` and
/// `IMGPROXY_ALLOW_LOOPBACK_SOURCE_ADDRESSES`. Where the service differs on purpose,
/// the test says so and checks the service's answer (the DocC page "Differences from
/// imgproxy" lists each).
@Suite("imgproxy's test suite, ported", .serialized)
struct ImgproxySuiteTests {
    static let root = Command.fixture("imgproxy")

    static func bytes(_ name: String) -> [UInt8] {
        Array((try? Data(contentsOf: URL(fileURLWithPath: root + "/" + name))) ?? Data())
    }

    /// `imageloader serve` with imgproxy's test setup and `environment`, stopped after `body`.
    func serving(
        _ environment: [String: String] = [:], arguments: [String] = [],
        _ body: @escaping (ServedProcess) async throws -> Void
    ) async throws {
        var variables = [
            "IMGPROXY_LOCAL_FILESYSTEM_ROOT": Self.root, "IMGPROXY_ALLOW_LOOPBACK_SOURCE_ADDRESSES": "true",
        ]
        variables.merge(environment) { $1 }
        let server = try await ServedProcess.start(
            ["--allow-unsigned", "--disk-cache-mb", "0"] + arguments, environment: variables)
        defer { server.kill() }
        try await body(server)
    }

    func decoded(_ answer: ServedProcess.Answer) throws -> RasterImage {
        try ImageDecoder().decode(.bytes(answer.body))
    }

    // MARK: integration_test/processing_handler_test.go

    @Test(
        "TestSignatureValidationFailure: unsafe and bad signatures 403, a good one 200 (key test-key, salt test-salt)")
    func signatures() async throws {
        let environment = [
            "IMGPROXY_KEY": Data("test-key".utf8).map { String(format: "%02x", $0) }.joined(),
            "IMGPROXY_SALT": Data("test-salt".utf8).map { String(format: "%02x", $0) }.joined(),
        ]
        try await serving(environment) { (server: ServedProcess) async throws in
            for (path, status) in [
                ("/unsafe/rs:fill:4:4/plain/local:///test1.png", 403),
                ("/bad-signature/rs:fill:4:4/plain/local:///test1.png", 403),
                ("/My9d3xq_PYpVHsPrCyww0Kh1w5KZeZhIlWhsa4az1TI/rs:fill:4:4/plain/local:///test1.png", 200),
            ] {
                #expect(try await server.get(path).status == status, "\(path)")
            }
        }
    }

    @Test("TestSourceValidation: allowed-source patterns; a source not allowed is a 404")
    func sourceValidation() async throws {
        // imgproxy redirects every download to test1.png; here the patterns are checked as
        // the service applies them, and the status through the server.
        let cases: [([String], String, Bool)] = [
            (["local://", "http://images.dev/"], "http://images.dev/lorem/ipsum.jpg", true),
            (["local://", "http://*.mycdn.dev/"], "http://a-1.mycdn.dev/lorem/ipsum.jpg", true),
            (["local://", "http://*.mycdn.dev/"], "http://a-1.b-2.mycdn.dev/lorem/ipsum.jpg", true),
            (["local://", "http://images.dev/"], "s3://images/lorem/ipsum.jpg", false),
            (["local://", "http://*.mycdn.dev/"], "http://other.dev/.mycdn.dev/lorem/ipsum.jpg", false),
        ]
        for (patterns, source, allowed) in cases {
            // As the service judges a request: the URL parsed, then the source checked;
            // either refusing it is imgproxy's 404.
            let policy = SourcePolicy(allowedPrefixes: patterns, localRoot: Self.root)
            let url = try? ProcessingURL.parse("/unsafe/plain/" + source, signature: nil, allowsUnsigned: true)
            let passes = url.map { (try? policy.check($0.source)) != nil } ?? false
            #expect(passes == allowed, "\(patterns) \(source)")
        }
        try await serving(["IMGPROXY_ALLOWED_SOURCES": "http://images.dev/"]) { (server: ServedProcess) async throws in
            #expect(try await server.get("/unsafe/plain/local:///test1.png").status == 404)
            #expect(try await server.get("/unsafe/plain/s3://images/lorem/ipsum.jpg").status == 404)
        }
    }

    @Test("TestSourceNetworkValidation: a loopback origin with and without IMGPROXY_ALLOW_LOOPBACK_SOURCE_ADDRESSES")
    func sourceNetworkValidation() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        origin.serve("/test1.png", .init(body: Self.bytes("test1.png")))
        let path = "/unsafe/rs:fill:4:4/plain/" + origin.url("/test1.png").absoluteString
        try await serving(["IMGPROXY_ALLOW_LOOPBACK_SOURCE_ADDRESSES": "true"]) {
            (server: ServedProcess) async throws in
            #expect(try await server.get(path).status == 200)
        }
        try await serving(["IMGPROXY_ALLOW_LOOPBACK_SOURCE_ADDRESSES": "false"]) {
            (server: ServedProcess) async throws in
            #expect(try await server.get(path).status == 404)
        }
    }

    @Test("TestSkipProcessing{Config,PO,SameFormat,DifferentFormat}, TestRawOption: the source's own bytes, or not")
    func skipProcessing() async throws {
        let source = Self.bytes("test1.png")
        try await serving(["IMGPROXY_SKIP_PROCESSING_FORMATS": "png"]) { (server: ServedProcess) async throws in
            #expect(try await server.get("/unsafe/rs:fill:4:4/plain/local:///test1.png").body == source)
            #expect(try await server.get("/unsafe/rs:fill:4:4/plain/local:///test1.png@png").body == source)
            let converted = try await server.get("/unsafe/rs:fill:4:4/plain/local:///test1.png@jpg")
            #expect(converted.status == 200 && converted.body != source)
        }
        try await serving { (server: ServedProcess) async throws in
            #expect(try await server.get("/unsafe/rs:fill:4:4/skp:png/plain/local:///test1.png").body == source)
            let raw = try await server.get("/unsafe/raw:1/plain/local:///test1.png")
            #expect(raw.status == 200 && raw.body == source)
        }
    }

    /// An origin that answers `test1.png` with `headers`, and records what it was sent.
    func origin(_ headers: [(String, String)], status: Int = 200) async throws -> TestOrigin {
        let origin = try await TestOrigin.start()
        origin.serve("/test1.png", .init(status: status, headers: headers, body: Self.bytes("test1.png")))
        return origin
    }

    static func httpDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }

    /// The `max-age` of a `Cache-Control` value, or nil.
    static func maxAge(_ value: String?) -> Int? {
        guard let value, let range = value.range(of: #"max-age=\d+"#, options: .regularExpression) else { return nil }
        return Int(value[range].dropFirst("max-age=".count))
    }

    @Test(
        "TestCacheControlPassthrough{CacheControl,Expires,Disabled}: the origin's freshness passed on only when asked")
    func cacheControlPassthrough() async throws {
        let hour = Self.httpDate(Date().addingTimeInterval(3600))
        let both = try await origin([("Cache-Control", "max-age=1234, public"), ("Expires", hour)])
        defer { Task { await both.stop() } }
        let expires = try await origin([("Expires", Self.httpDate(Date().addingTimeInterval(1239)))])
        defer { Task { await expires.stop() } }
        try await serving(["IMGPROXY_CACHE_CONTROL_PASSTHROUGH": "true"]) { (server: ServedProcess) async throws in
            let passed = try await server.get("/unsafe/rs:fill:4:4/plain/" + both.url("/test1.png").absoluteString)
            #expect(passed.status == 200 && passed.header("Cache-Control") == "max-age=1234, public")
            #expect(passed.header("Expires") == nil)
            let fromExpires = try await server.get(
                "/unsafe/rs:fill:4:4/plain/" + expires.url("/test1.png").absoluteString)
            // imgproxy's regexp "max-age=123[0-9], public" allows for the seconds the request takes.
            #expect(
                fromExpires.header("Cache-Control")?.range(
                    of: #"^max-age=12[0-3][0-9], public$"#, options: .regularExpression)
                    != nil, "\(fromExpires.header("Cache-Control") ?? "none")")
            #expect(fromExpires.header("Expires") == nil)
        }
        try await serving(["IMGPROXY_CACHE_CONTROL_PASSTHROUGH": "false"]) { (server: ServedProcess) async throws in
            let answer = try await server.get("/unsafe/rs:fill:4:4/plain/" + both.url("/test1.png").absoluteString)
            #expect(answer.header("Cache-Control") != "max-age=1234, public" && answer.header("Expires") == nil)
            #expect(answer.header("Cache-Control") == "max-age=31536000, public")
        }
    }

    @Test("TestETagDisabled, TestETagDataMatch, EtagBusterTest: the source's ETag; a client's passed on to the origin")
    func entityTags() async throws {
        try await serving(["IMGPROXY_USE_ETAG": "false"]) { (server: ServedProcess) async throws in
            let answer = try await server.get("/unsafe/rs:fill:4:4/plain/local:///test1.png")
            #expect(answer.status == 200 && answer.header("ETag") == nil)
        }
        // The origin answers 304 to anything (it never sends a body): the service passes
        // the client's If-None-Match on, and answers 304 with the origin's tag.
        let etag = "\"loremipsumdolor\""
        let unchanged = try await TestOrigin.start()
        defer { Task { await unchanged.stop() } }
        unchanged.serve("/image", .init(status: 304, headers: [("ETag", etag)]))
        try await serving(["IMGPROXY_USE_ETAG": "true"]) { (server: ServedProcess) async throws in
            let answer = try await server.get(
                "/unsafe/plain/" + unchanged.url("/image").absoluteString, headers: [("If-None-Match", etag)])
            #expect(answer.status == 304 && answer.header("ETag") == etag)
            #expect(unchanged.requests("/image").first?.header("If-None-Match") == etag)
        }
        let tagged = try await origin([("ETag", etag)])
        defer { Task { await tagged.stop() } }
        try await serving(["IMGPROXY_USE_ETAG": "true", "IMGPROXY_ETAG_BUSTER": "buster"]) {
            (server: ServedProcess) async throws in
            let path = "/unsafe/rs:fill:4:4/plain/" + tagged.url("/test1.png").absoluteString
            let answer = try await server.get(path)
            // imgproxy's tag: the buster, then the base64url of the origin's tag as sent.
            #expect(answer.header("ETag") == "\"buster/ImxvcmVtaXBzdW1kb2xvciI\"")
            let again = try await server.get(path, headers: [("If-None-Match", "\"buster/ImxvcmVtaXBzdW1kb2xvciI\"")])
            #expect(again.status == 304)
            let stale = try await server.get(path, headers: [("If-None-Match", etag)])
            #expect(stale.status == 200)
        }
    }

    @Test(
        "TestLastModified{Enabled,Disabled,Buster}, TestModifiedSinceReq*: the source's date, a client's passed on"
    )
    func lastModified() async throws {
        let modified = "Wed, 21 Oct 2015 07:28:00 GMT"
        let dated = try await origin([("Last-Modified", modified)])
        defer { Task { await dated.stop() } }
        let path = "/unsafe/rs:fill:4:4/plain/" + dated.url("/test1.png").absoluteString
        try await serving(["IMGPROXY_USE_LAST_MODIFIED": "true"]) { (server: ServedProcess) async throws in
            #expect(try await server.get(path).header("Last-Modified") == modified)
        }
        try await serving(["IMGPROXY_USE_LAST_MODIFIED": "false"]) { (server: ServedProcess) async throws in
            #expect(try await server.get(path).header("Last-Modified") == nil)
        }
        let buster = Date(timeIntervalSince1970: floor(Date().timeIntervalSince1970))
        let formatter = ISO8601DateFormatter()
        try await serving(
            ["IMGPROXY_USE_LAST_MODIFIED": "true", "IMGPROXY_LAST_MODIFIED_BUSTER": formatter.string(from: buster)]
        ) { (server: ServedProcess) async throws in
            #expect(try await server.get(path).header("Last-Modified") == Self.httpDate(buster))
        }

        // The origin sees the client's If-Modified-Since only when Last-Modified is used;
        // it answers 304 for a date after its own, 200 otherwise.
        let fileDate = try #require(Self.parseHTTPDate(modified))
        let judging = try await TestOrigin.start()
        defer { Task { await judging.stop() } }
        judging.route("/image") { request, _ in
            guard let since = request.header("If-Modified-Since").flatMap(Self.parseHTTPDate), fileDate <= since else {
                return .init(headers: [("Last-Modified", modified)], body: Self.bytes("test1.png"))
            }
            return .init(status: 304, headers: [("Last-Modified", modified)])
        }
        let image = "/unsafe/plain/" + judging.url("/image").absoluteString
        for (enabled, since, status) in [
            (false, modified, 200), (true, modified, 304),
            (false, "Thu, 25 Feb 2021 01:45:00 GMT", 200), (true, "Thu, 25 Feb 2021 01:45:00 GMT", 304),
            (false, "Tue, 01 Oct 2013 17:31:00 GMT", 200), (true, "Tue, 01 Oct 2013 17:31:00 GMT", 200),
        ] {
            let before = judging.count("/image")
            try await serving(["IMGPROXY_USE_LAST_MODIFIED": String(enabled)]) { (server: ServedProcess) async throws in
                let answer = try await server.get(image, headers: [("If-Modified-Since", since)])
                #expect(answer.status == status, "enabled \(enabled), since \(since)")
            }
            let sent = judging.requests("/image").dropFirst(before).first?.header("If-Modified-Since")
            #expect(sent == (enabled ? since : nil), "enabled \(enabled), since \(since)")
        }
    }

    static func parseHTTPDate(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.date(from: text)
    }

    @Test("TestMaxSrcFileSizeGlobal, TestMaxBytes: a source over the size is a 422; mb keeps the result under it")
    func sizes() async throws {
        let origin = try await origin([])
        defer { Task { await origin.stop() } }
        try await serving(["IMGPROXY_MAX_SRC_FILE_SIZE": "1"]) { (server: ServedProcess) async throws in
            let answer = try await server.get("/unsafe/rs:fill:4:4/plain/" + origin.url("/test1.png").absoluteString)
            #expect(answer.status == 422)
        }
        let source = Self.bytes("test-images/jpg/jpg.jpg")
        let limit = source.count / 2
        try await serving { (server: ServedProcess) async throws in
            let answer = try await server.get("/unsafe/mb:\(limit)/plain/local:///test-images/jpg/jpg.jpg@jpg")
            #expect(answer.status == 200 && answer.body.count <= limit, "\(answer.body.count) > \(limit)")
        }
    }

    @Test("TestQualitySettings: q:99 is near the source, q:1 far from it, and fq:jpg:1 is q:1 (IMGPROXY_QUALITY 99)")
    func qualitySettings() async throws {
        let source = try ImageDecoder().decode(.bytes(Self.bytes("test-images/jpg/jpg.jpg")))
        try await serving(["IMGPROXY_QUALITY": "99"]) { (server: ServedProcess) async throws in
            let base = "/plain/local:///test-images/jpg/jpg.jpg@jpg"
            let best = try decoded(await server.get("/unsafe/q:99" + base))
            let plain = try decoded(await server.get("/unsafe" + base))
            let worst = try await server.get("/unsafe/q:1" + base)
            let perFormat = try await server.get("/unsafe/fq:jpg:1" + base)
            // Mean absolute difference per channel, 0-255: imgproxy's hash distances 0.0001
            // and 0.005 are "the same picture", 304 "another one".
            #expect(Self.meanDifference(best, source) < 1.5)
            #expect(Self.meanDifference(plain, source) < 1.5)
            #expect(Self.meanDifference(try decoded(worst), source) > 4)
            #expect(worst.body == perFormat.body)
        }
    }

    static func meanDifference(_ a: RasterImage, _ b: RasterImage) -> Double {
        guard a.width == b.width, a.height == b.height else { return .infinity }
        var total = 0
        for y in 0..<a.height {
            for x in 0..<a.width {
                let (p, q) = (a.pixel(x: x, y: y)!, b.pixel(x: x, y: y)!)
                total += abs(Int(p.r) - Int(q.r)) + abs(Int(p.g) - Int(q.g)) + abs(Int(p.b) - Int(q.b))
            }
        }
        return Double(total) / Double(a.width * a.height * 3)
    }

    @Test("TestPresetUsage: the default preset (pixelate:10) applies; pr:default names it again")
    func presetUsage() async throws {
        try await serving(["IMGPROXY_PRESETS": "default=pixelate:10"]) { (server: ServedProcess) async throws in
            let answer = try await server.get("/unsafe/preset:default/plain/local:///geometry.png")
            #expect(answer.status == 200 && answer.body != Self.bytes("geometry.png"))
            // Pixelated: each 10x10 block is one colour.
            let image = try decoded(answer)
            var blocky = true
            for y in 0..<image.height {
                for x in 0..<image.width where x % 10 != 0 || y % 10 != 0 {
                    let corner = image.pixel(x: x - x % 10, y: y - y % 10)!
                    let pixel = image.pixel(x: x, y: y)!
                    if abs(Int(corner.r) - Int(pixel.r)) > 1 || abs(Int(corner.g) - Int(pixel.g)) > 1 { blocky = false }
                }
            }
            #expect(blocky)
        }
    }

    @Test("TestBMPUnsupportedBitDepthRejected: imgproxy's 500; the service's 422 (a difference on purpose)")
    func unsupportedBMP() async throws {
        try await serving { (server: ServedProcess) async throws in
            #expect(try await server.get("/unsafe/rs:fill:4:4/plain/local:///bmp-invalid-bpp.bmp").status == 422)
        }
    }
}
