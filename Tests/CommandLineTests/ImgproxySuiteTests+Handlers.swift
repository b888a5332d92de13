import Foundation
import NIOHTTP1
import RasterImage
import TestSupport
import Testing

/// imgproxy's handler, server and client-feature tests (`handlers/stream`,
/// `handlers/health`, `server/`, `clientfeatures/`), ported.
extension ImgproxySuiteTests {
    // MARK: handlers/stream/handler_test.go (raw:1)

    static let csp = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox"

    @Test(
        "stream TestHandlerBasicRequest, ResponseHeadersPassthrough, ContentDisposition, SecurityHeaders, CanonicalHeader"
    )
    func streamHeaders() async throws {
        let data = Self.bytes("test1.png")
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        origin.serve(
            "/test.png",
            .init(
                headers: [
                    ("Content-Type", "image/png"), ("Accept-Ranges", "bytes"), ("ETag", "etag"),
                    ("Last-Modified", "Wed, 21 Oct 2015 07:28:00 GMT"),
                ], body: data))
        let source = origin.url("/test.png").absoluteString
        try await serving(["IMGPROXY_SET_CANONICAL_HEADER": "true"]) { (server: ServedProcess) async throws in
            let answer = try await server.get("/unsafe/raw:1/plain/" + source)
            #expect(answer.status == 200 && answer.body == data)
            #expect(answer.header("Content-Type") == "image/png")
            #expect(answer.header("Content-Length") == String(data.count))
            #expect(answer.header("Accept-Ranges") == "bytes")
            #expect(answer.header("ETag") == "etag")
            #expect(answer.header("Last-Modified") == "Wed, 21 Oct 2015 07:28:00 GMT")
            #expect(answer.header("Content-Security-Policy") == Self.csp)
            #expect(answer.header("Link")?.contains("<\(source)>; rel=\"canonical\"") == true)
            let named = try await server.get("/unsafe/raw:1/fn:custom_name/att:1/plain/" + source)
            #expect(named.header("Content-Disposition")?.contains("custom_name.png") == true)
            #expect(named.header("Content-Disposition")?.contains("attachment") == true)
            // A range of the bytes, as Accept-Ranges promises.
            let part = try await server.get("/unsafe/raw:1/plain/" + source, headers: [("Range", "bytes=0-7")])
            #expect(part.status == 206 && part.body == Array(data.prefix(8)))
            #expect(part.header("Content-Range") == "bytes 0-7/\(data.count)")
        }
        try await serving(["IMGPROXY_SET_CANONICAL_HEADER": "false"]) { (server: ServedProcess) async throws in
            #expect(try await server.get("/unsafe/raw:1/plain/" + source).header("Link") == nil)
        }
    }

    @Test("stream TestHandlerRequestHeadersPassthrough, TestHandlerErrorResponse, TestHandlerCookiePassthrough")
    func streamRequests() async throws {
        let etag = "\"test-etag-123\""
        let data = Self.bytes("test1.png")
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        origin.serve("/image", .init(headers: [("ETag", etag)], body: data))
        origin.serve("/missing", .init(status: 404, body: Array("Not Found".utf8)))
        try await serving(["IMGPROXY_COOKIE_PASSTHROUGH": "true", "IMGPROXY_COOKIE_PASSTHROUGH_ALL": "true"]) {
            (server: ServedProcess) async throws in
            let answer = try await server.get(
                "/unsafe/raw:1/plain/" + origin.url("/image").absoluteString,
                headers: [("If-None-Match", etag), ("Cookie", "test_cookie=test_value")])
            // The origin got the client's validator and cookie. Its 200 (it ignores the
            // validator) is passed on, with its tag; the service's own comparison would
            // answer 304, which a client that sent the tag also accepts.
            let received = try #require(origin.requests("/image").last)
            #expect(received.header("If-None-Match") == etag)
            #expect(received.header("Cookie") == "test_cookie=test_value")
            #expect([200, 304].contains(answer.status) && answer.header("ETag") == etag)
            let missing = try await server.get("/unsafe/raw:1/plain/" + origin.url("/missing").absoluteString)
            #expect(missing.status == 404)
        }
    }

    @Test("stream TestHandlerCacheControl: passthrough, Expires, exp against the origin's, the TTL (4242)")
    func streamCacheControl() async throws {
        let data = Self.bytes("test1.png")
        let now = Date()
        let cases: [(name: String, passthrough: Bool, headers: [(String, String)], exp: TimeInterval?, expected: Int)] =
            [
                ("Passthrough", true, [("Cache-Control", "max-age=3600, public")], nil, 3600),
                ("ExpiresPassthrough", true, [("Expires", Self.httpDate(now.addingTimeInterval(3600)))], nil, 3600),
                ("PassthroughDisabled", false, [("Cache-Control", "max-age=3600, public")], nil, 4242),
                ("WithProcessingOptionsExpires", false, [], 3600, 3600),
                ("ProcessingOptionsOverridesOrigin", true, [("Cache-Control", "max-age=7200, public")], 1800, 1800),
                (
                    "BothHeadersPassthroughEnabled", true,
                    [
                        ("Cache-Control", "max-age=1800, public"),
                        ("Expires", Self.httpDate(now.addingTimeInterval(3600))),
                    ],
                    nil, 1800
                ),
                (
                    "ProcessingOptionsOverridesBothOriginHeaders", true,
                    [
                        ("Cache-Control", "max-age=7200, public"),
                        ("Expires", Self.httpDate(now.addingTimeInterval(7200))),
                    ],
                    2700, 2700
                ),
                ("NoOriginHeaders", false, [], nil, 4242),
            ]
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        for (index, test) in cases.enumerated() {
            origin.serve("/\(index)", .init(headers: [("Content-Type", "image/png")] + test.headers, body: data))
        }
        for passthrough in [true, false] {
            let environment = ["IMGPROXY_CACHE_CONTROL_PASSTHROUGH": String(passthrough), "IMGPROXY_TTL": "4242"]
            try await serving(environment) { (server: ServedProcess) async throws in
                for (index, test) in cases.enumerated() where test.passthrough == passthrough {
                    let exp = test.exp.map { "/exp:\(Int(now.addingTimeInterval($0).timeIntervalSince1970))" } ?? ""
                    let answer = try await server.get(
                        "/unsafe/raw:1\(exp)/plain/" + origin.url("/\(index)").absoluteString)
                    let maxAge = Self.maxAge(answer.header("Cache-Control")) ?? -1
                    // imgproxy allows a minute of difference where the age is computed.
                    #expect(abs(maxAge - test.expected) <= 60, "\(test.name): \(answer.header("Cache-Control") ?? "")")
                    #expect(answer.header("Expires") == nil, "\(test.name)")
                }
            }
        }
    }

    // MARK: handlers/health, server/server_test.go

    @Test("health TestHealthHandler: text/plain, no-cache, imgproxy is running; IMGPROXY_HEALTH_CHECK_PATH too")
    func health() async throws {
        try await serving(["IMGPROXY_HEALTH_CHECK_PATH": "/healthz"]) { (server: ServedProcess) async throws in
            for path in ["/health", "/healthz"] {
                let answer = try await server.get(path)
                #expect(answer.status == 200 && answer.text == "imgproxy is running", "\(path)")
                #expect(answer.header("Content-Type") == "text/plain" && answer.header("Cache-Control") == "no-cache")
            }
        }
    }

    @Test("server TestWithCORS and TestWithSecret")
    func corsAndSecret() async throws {
        let path = "/unsafe/rs:fill:4:4/plain/local:///test1.png"
        try await serving(["IMGPROXY_ALLOW_ORIGIN": "https://example.com"]) { (server: ServedProcess) async throws in
            let answer = try await server.get(path)
            #expect(answer.header("Access-Control-Allow-Origin") == "https://example.com")
            #expect(answer.header("Access-Control-Allow-Methods") == "GET, OPTIONS")
            let preflight = try await ServedProcess.request(port: server.port, path, method: .OPTIONS)
            #expect(preflight.status == 200 && preflight.header("Access-Control-Allow-Origin") == "https://example.com")
        }
        try await serving { (server: ServedProcess) async throws in
            let answer = try await server.get(path)
            #expect(
                answer.header("Access-Control-Allow-Origin") == nil
                    && answer.header("Access-Control-Allow-Methods") == nil)
        }
        for (secret, authorization, status) in [
            ("test-secret", "Bearer test-secret", 200), ("foo-secret", "Bearer wrong-secret", 403), ("", "", 200),
        ] {
            try await serving(secret.isEmpty ? [:] : ["IMGPROXY_SECRET": secret]) {
                (server: ServedProcess) async throws in
                let headers = authorization.isEmpty ? [] : [("Authorization", authorization)]
                #expect(try await server.get(path, headers: headers).status == status, "\(secret)")
                // Twice: the second from the result cache, held to the same rule.
                #expect(try await server.get(path, headers: headers).status == status, "\(secret), again")
            }
        }
    }

    // MARK: clientfeatures/detector_test.go

    @Test(
        "clientfeatures TestSetVary and TestFeatures*: Vary by the settings; Accept, DPR and Width as imgproxy reads them"
    )
    func clientFeatures() async throws {
        let path = "/unsafe/plain/local:///test-images/png/8-bpp.png"
        let varies: [([String: String], String?)] = [
            (["IMGPROXY_AUTO_WEBP": "true"], "Accept"), (["IMGPROXY_ENFORCE_WEBP": "true"], "Accept"),
            (["IMGPROXY_AUTO_AVIF": "true"], "Accept"), (["IMGPROXY_ENFORCE_AVIF": "true"], "Accept"),
            (["IMGPROXY_AUTO_JXL": "true"], "Accept"), (["IMGPROXY_ENFORCE_JXL": "true"], "Accept"),
            (["IMGPROXY_ENABLE_CLIENT_HINTS": "true"], "Sec-Ch-Dpr, Dpr, Sec-Ch-Width, Width"),
            (
                ["IMGPROXY_AUTO_WEBP": "true", "IMGPROXY_ENABLE_CLIENT_HINTS": "true"],
                "Accept, Sec-Ch-Dpr, Dpr, Sec-Ch-Width, Width"
            ),
            ([:], nil),
        ]
        for (environment, vary) in varies {
            try await serving(environment) { (server: ServedProcess) async throws in
                #expect(try await server.get(path).header("Vary") == vary, "\(environment)")
            }
        }
        let accept = "image/webp,image/avif,image/jxl,image/apng,image/*,*/*;q=0.8"
        for (environment, contentType) in [
            (["IMGPROXY_AUTO_WEBP": "true"], "image/webp"), (["IMGPROXY_AUTO_AVIF": "true"], "image/avif"),
            (["IMGPROXY_AUTO_JXL": "true"], "image/jxl"), ([:], "image/png"),
        ] {
            try await serving(environment) { (server: ServedProcess) async throws in
                let answer = try await server.get(
                    "/unsafe/rs:fit:64:64" + path.dropFirst("/unsafe".count), headers: [("Accept", accept)])
                #expect(answer.header("Content-Type") == contentType, "\(environment)")
                let none = try await server.get(
                    "/unsafe/rs:fit:64:64" + path.dropFirst("/unsafe".count),
                    headers: [("Accept", "image/apng,image/*,*/*;q=0.8")])
                #expect(none.header("Content-Type") == "image/png", "\(environment)")
            }
        }
        // Client hints: the DPR (Sec-CH-DPR first; 0 < dpr <= 8) and the width in physical
        // pixels (Sec-CH-Width first) are the URL's defaults; its own options win.
        try await serving(["IMGPROXY_ENABLE_CLIENT_HINTS": "true"]) { (server: ServedProcess) async throws in
            for (headers, width) in [
                ([("Width", "200")], 200), ([("Width", "200"), ("DPR", "2")], 200),
                ([("Sec-CH-Width", "100"), ("Width", "300")], 100), ([("Width", "-800")], 400),
                ([("Width", "abc")], 400), ([("DPR", "10"), ("Width", "100")], 100),
            ] {
                let image = try decoded(await server.get(path, headers: headers))
                #expect(image.width == width, "\(headers)")
            }
            let own = try decoded(
                await server.get("/unsafe/w:50/plain/local:///test-images/png/8-bpp.png", headers: [("Width", "200")]))
            #expect(own.width == 50)
        }
        try await serving { (server: ServedProcess) async throws in
            #expect(try decoded(await server.get(path, headers: [("Width", "200")])).width == 400)
        }
    }
}

extension ImgproxySuiteTests {
    // MARK: the settings imgproxy reads, each through its variable

    @Test("URL settings: trusted signatures, base URL, URL replacements, base64 file names, separator, allowed options")
    func urlSettings() async throws {
        let hex = { (text: String) in Data(text.utf8).map { String(format: "%02x", $0) }.joined() }
        try await serving(
            [
                "IMGPROXY_KEY": hex("test-key"), "IMGPROXY_SALT": hex("test-salt"),
                "IMGPROXY_TRUSTED_SIGNATURES": "trusted1,trusted2",
            ]
        ) { (server: ServedProcess) async throws in
            #expect(try await server.get("/trusted2/rs:fit:4:4/plain/local:///test1.png").status == 200)
            #expect(try await server.get("/untrusted/rs:fit:4:4/plain/local:///test1.png").status == 403)
        }
        let base64 = { (text: String) in
            Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        try await serving([
            "IMGPROXY_BASE_URL": "local:///test-images/", "IMGPROXY_BASE64_URL_INCLUDES_FILENAME": "true",
            "IMGPROXY_ARGUMENTS_SEPARATOR": ",", "IMGPROXY_ALLOWED_PROCESSING_OPTIONS": "rs,f",
        ]) { (server: ServedProcess) async throws in
            let image = try decoded(await server.get("/unsafe/rs,fit,40,40/\(base64("png/8-bpp.png")).png/cat.png"))
            #expect(image.width == 40 && image.height == 40)
            #expect(try await server.get("/unsafe/rs,fit,40,40/bl,2/plain/png/8-bpp.png").status == 404)
        }
        try await serving(["IMGPROXY_URL_REPLACEMENTS": "pics://*/=local:///test-images/${1}/;other://=local:///"]) {
            (server: ServedProcess) async throws in
            let image = try decoded(await server.get("/unsafe/rs:fit:30:30/plain/pics://png/8-bpp.png@png"))
            #expect(image.width == 30)
            #expect(try await server.get("/unsafe/rs:fit:30:30/plain/other://test1.png@png").status == 200)
        }
    }

    @Test("fallback image (data, status, TTL), debug headers, development errors, format quality")
    func responseSettings() async throws {
        let fallback = Data(Self.bytes("test1.png")).base64EncodedString()
        try await serving([
            "IMGPROXY_FALLBACK_IMAGE_DATA": fallback, "IMGPROXY_FALLBACK_IMAGE_HTTP_CODE": "200",
            "IMGPROXY_FALLBACK_IMAGE_TTL": "77", "IMGPROXY_ENABLE_DEBUG_HEADERS": "true",
        ]) { (server: ServedProcess) async throws in
            let missing = try await server.get("/unsafe/rs:fill:4:4/plain/local:///nothing-here.png@png")
            #expect(missing.status == 200 && missing.header("Cache-Control") == "max-age=77, public")
            let image = try decoded(missing)
            #expect(image.width == 4 && image.height == 4)
            let answer = try await server.get("/unsafe/rs:fit:50:50/plain/local:///geometry.png@png")
            #expect(answer.header("X-Origin-Width") == "200" && answer.header("X-Origin-Height") == "100")
            #expect(answer.header("X-Result-Width") == "50" && answer.header("X-Result-Height") == "25")
            #expect(answer.header("X-Origin-Content-Length") == String(Self.bytes("geometry.png").count))
        }
        try await serving(["IMGPROXY_FALLBACK_IMAGE_DATA": fallback]) { (server: ServedProcess) async throws in
            // Without a status of its own, the failure's.
            let missing = try await server.get("/unsafe/rs:fill:4:4/plain/local:///nothing-here.png@png")
            let image = try decoded(missing)
            #expect(missing.status == 404 && image.width == 4 && missing.header("Cache-Control") == "no-store")
        }
        try await serving(["IMGPROXY_DEVELOPMENT_ERRORS_MODE": "true"]) { (server: ServedProcess) async throws in
            let answer = try await server.get("/unsafe/nope:1/plain/local:///test1.png")
            #expect(answer.status == 404 && answer.header("Content-Type")?.hasPrefix("text/html") == true)
            #expect(answer.text.contains("nope"))
        }
        try await serving(["IMGPROXY_FORMAT_QUALITY": "jpeg=5"]) { (server: ServedProcess) async throws in
            let low = try await server.get("/unsafe/plain/local:///test2.jpg@jpg")
            let high = try await server.get("/unsafe/q:95/plain/local:///test2.jpg@jpg")
            #expect(low.body.count * 2 < high.body.count)
        }
    }

    @Test("sources: User-Agent, redirects, download timeout, cookies for the same host, address classes")
    func sourceSettings() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        let data = Self.bytes("test1.png")
        origin.serve("/a.png", .init(body: data))
        for index in 0..<4 {
            origin.serve("/r\(index)", .init(status: 302, headers: [("Location", "/r\(index + 1)")]))
        }
        origin.serve("/r4", .init(body: data))
        origin.serve("/slow.png", .init(body: data, delay: 3))
        try await serving([
            "IMGPROXY_USER_AGENT": "tester/1", "IMGPROXY_MAX_REDIRECTS": "3", "IMGPROXY_DOWNLOAD_TIMEOUT": "1",
            "IMGPROXY_COOKIE_PASSTHROUGH": "true", "IMGPROXY_COOKIE_BASE_URL": "http://127.0.0.1:1/",
        ]) { (server: ServedProcess) async throws in
            let answer = try await server.get(
                "/unsafe/plain/" + origin.url("/a.png").absoluteString, headers: [("Cookie", "session=abc")])
            #expect(answer.status == 200)
            #expect(origin.requests("/a.png").last?.header("User-Agent") == "tester/1")
            #expect(origin.requests("/a.png").last?.header("Cookie") == "session=abc")
            #expect(try await server.get("/unsafe/plain/" + origin.url("/r0").absoluteString).status == 404)
            #expect(try await server.get("/unsafe/plain/" + origin.url("/r1").absoluteString).status == 200)
            #expect(try await server.get("/unsafe/plain/" + origin.url("/slow.png").absoluteString).status == 504)
        }
        // Cookies set for another host stay with the client.
        try await serving(["IMGPROXY_COOKIE_PASSTHROUGH": "true", "IMGPROXY_COOKIE_BASE_URL": "https://shop.example/"])
        {
            (server: ServedProcess) async throws in
            let answer = try await server.get(
                "/unsafe/plain/" + origin.url("/a.png").absoluteString, headers: [("Cookie", "session=abc")])
            #expect(answer.status == 200 && origin.requests("/a.png").last?.header("Cookie") == nil)
        }
        try await serving([
            "IMGPROXY_ALLOW_LOOPBACK_SOURCE_ADDRESSES": "false", "IMGPROXY_ALLOW_PRIVATE_SOURCE_ADDRESSES": "true",
        ]) {
            (server: ServedProcess) async throws in
            // Private is not loopback: 127.0.0.1 stays refused.
            #expect(try await server.get("/unsafe/plain/" + origin.url("/a.png").absoluteString).status == 404)
        }
    }
}

extension ImgproxySuiteTests {
    @Test("server TestRequestID: a plain X-Request-ID is kept, another replaced, a missing one made")
    func requestID() async throws {
        try await serving { (server: ServedProcess) async throws in
            let kept = try await server.get("/health", headers: [("X-Request-ID", "valid-id-123")])
            #expect(kept.header("X-Request-ID") == "valid-id-123")
            let replaced = try await server.get("/health", headers: [("X-Request-ID", "invalid id with spaces!")])
            let made = try await server.get("/health")
            for answer in [replaced, made] {
                let id = try #require(answer.header("X-Request-ID"))
                #expect(
                    id != "invalid id with spaces!"
                        && id.range(of: #"^[A-Za-z0-9_\-]+$"#, options: .regularExpression) != nil)
            }
        }
    }
}
