import Foundation
import NIOCore
import RasterImage
import TestSupport
import Testing

@testable import ImageLoader

@Suite("The seeds' options and HTTP behaviour")
struct LoaderOptionsTests {
    static let png = ("Content-Type", "image/png")

    @Test(
        "error responses are remembered: after N failures within the window, no request; the window ends; a restart remembers"
    )
    func errorCaching() async throws {
        try await withOrigin { origin, harness in
            origin.serve("/missing.png", .init(status: 404))
            let configure: (inout ImageLoader.Configuration) -> Void = {
                $0.maxAttemptsForErrors = 2
                $0.defaultCacheControlMaxAgeForErrors = 60
            }
            let loader = try harness.loader(configure)
            let url = origin.url("/missing.png")
            #expect(await loader.allEvents(for: url).moments == [.sending(hadCache: false), .failed(.httpStatus(404))])
            #expect(await loader.allEvents(for: url).moments == [.sending(hadCache: false), .failed(.httpStatus(404))])
            #expect(await loader.allEvents(for: url).moments == [.failed(.rememberedFailure(status: 404, attempts: 2))])
            #expect(origin.count("/missing.png") == 2)
            try await loader.shutdown()

            let restarted = try harness.loader(configure)
            #expect(
                await restarted.allEvents(for: url).moments == [.failed(.rememberedFailure(status: 404, attempts: 2))])
            #expect(origin.count("/missing.png") == 2)

            harness.clock.advance(by: 61)
            #expect(
                await restarted.allEvents(for: url).moments == [.sending(hadCache: false), .failed(.httpStatus(404))])
            #expect(origin.count("/missing.png") == 3)
            try await restarted.shutdown()
        }
    }

    @Test("an error's own max-age sets its window, no-store keeps it from being remembered, success forgets it")
    func errorCachingHeaders() async throws {
        try await withOrigin { origin, harness in
            origin.serve("/nostore.png", .init(status: 500, headers: [("Cache-Control", "no-store")]))
            origin.serve("/short.png", .init(status: 503, headers: [("Cache-Control", "max-age=5")]))
            origin.route("/flaky.png") { _, count in
                count == 2
                    ? .init(headers: [Self.png, ("Cache-Control", "max-age=0")], body: TestImages.png)
                    : .init(status: 500)
            }
            let loader = try harness.loader {
                $0.maxAttemptsForErrors = 1
                $0.defaultCacheControlMaxAgeForErrors = 600
            }
            for _ in 0..<3 { _ = try? await loader.image(for: origin.url("/nostore.png")) }
            #expect(origin.count("/nostore.png") == 3)

            _ = try? await loader.image(for: origin.url("/short.png"))
            _ = try? await loader.image(for: origin.url("/short.png"))
            #expect(origin.count("/short.png") == 1)
            harness.clock.advance(by: 6)
            _ = try? await loader.image(for: origin.url("/short.png"))
            #expect(origin.count("/short.png") == 2)

            _ = try? await loader.image(for: origin.url("/flaky.png"))  // fails: remembered once
            harness.clock.advance(by: 601)
            _ = try await loader.image(for: origin.url("/flaky.png"))  // succeeds: forgotten
            _ = try? await loader.image(for: origin.url("/flaky.png"))  // fails again: a request is made
            #expect(origin.count("/flaky.png") == 3)
            try await loader.shutdown()
        }
    }

    @Test("without the server's policy, images are kept until cleaned up, whatever their headers")
    func ignoringServerPolicy() async throws {
        try await withOrigin { origin, harness in
            origin.serve(
                "/k.png",
                .init(headers: [Self.png, ("Cache-Control", "max-age=0, must-revalidate")], body: TestImages.png))
            let loader = try harness.loader { $0.useServerCachePolicy = false }
            _ = try await loader.image(for: origin.url("/k.png"))
            harness.clock.advance(by: 365 * 86_400)
            #expect(try await loader.image(for: origin.url("/k.png")).source == .memory)
            try await loader.shutdown()
            let restarted = try harness.loader { $0.useServerCachePolicy = false }
            #expect(try await restarted.image(for: origin.url("/k.png")).source == .disk)
            #expect(origin.count("/k.png") == 1)
            try await restarted.shutdown()
        }
    }

    @Test("the default max-age gives freshness to responses that state none")
    func defaultMaxAge() async throws {
        try await withOrigin { origin, harness in
            origin.serve("/d.png", .init(headers: [Self.png], body: TestImages.png))
            origin.serve(
                "/explicit.png", .init(headers: [Self.png, ("Cache-Control", "max-age=10")], body: TestImages.png))
            let loader = try harness.loader { $0.defaultCacheControlMaxAge = 100 }
            _ = try await loader.image(for: origin.url("/d.png"))
            _ = try await loader.image(for: origin.url("/explicit.png"))
            harness.clock.advance(by: 50)
            #expect(try await loader.image(for: origin.url("/d.png")).source == .memory)
            _ = try await loader.image(for: origin.url("/explicit.png"))  // its own max-age wins
            #expect(origin.count("/explicit.png") == 2)
            harness.clock.advance(by: 60)
            _ = try await loader.image(for: origin.url("/d.png"))
            #expect(origin.count("/d.png") == 2)
            try await loader.shutdown()
        }
    }

    @Test("both the Content-Type and the bytes must be accepted; a refused response is not cached")
    func acceptedContentTypes() async throws {
        try await withOrigin { origin, harness in
            origin.serve(
                "/html.png",
                .init(headers: [("Content-Type", "text/html"), ("Cache-Control", "max-age=100")], body: TestImages.png))
            origin.serve(
                "/lie.png",
                .init(
                    headers: [("Content-Type", "image/png"), ("Cache-Control", "max-age=100")], body: TestImages.jpeg))
            origin.serve(
                "/g.gif",
                .init(headers: [("Content-Type", "image/gif"), ("Cache-Control", "max-age=100")], body: TestImages.gif))
            origin.serve(
                "/ok.jpg",
                .init(
                    headers: [("Content-Type", "image/jpg"), ("Cache-Control", "max-age=100")], body: TestImages.jpeg))
            let loader = try harness.loader {
                $0.acceptedContentTypes = AcceptedContentTypes(["image/png", "image/jpg"])
            }
            let expectations: [(String, ContentTypeError)] = [
                ("/html.png", .notAccepted(contentType: "text/html")),
                ("/lie.png", .mismatch(declared: "image/png", detected: .jpeg)),
                ("/g.gif", .notAccepted(contentType: "image/gif")),
            ]
            for (path, expected) in expectations {
                for _ in 0..<2 {
                    let error = await loader.loadError(origin.url(path))
                    #expect(error?.reason == .contentType(expected), "\(path)")
                }
                #expect(origin.count(path) == 2, "\(path) was cached")
            }
            #expect(try await loader.image(for: origin.url("/ok.jpg")).image.format == .jpeg)
            #expect(origin.requests("/ok.jpg")[0].header("Accept") == "image/jpg, image/png")
            try await loader.shutdown()
            // When declared types are not checked, the bytes alone decide: a PNG labelled
            // text/html and a JPEG labelled PNG load; a GIF is still not accepted, and
            // text labelled as a PNG is no image
            origin.serve(
                "/text.png",
                .init(headers: [("Content-Type", "image/png")], body: Array("<html>not found</html>".utf8)))
            let bytesDecide = try harness.loader {
                $0.acceptedContentTypes = AcceptedContentTypes(["image/png", "image/jpg"])
                $0.checksDeclaredContentType = false
                $0.cacheDirectory = nil
            }
            #expect(try await bytesDecide.image(for: origin.url("/html.png")).image.format == .png)
            #expect(try await bytesDecide.image(for: origin.url("/lie.png")).image.format == .jpeg)
            let data = try await bytesDecide.data(for: origin.url("/html.png"))
            #expect(data.bytes == TestImages.png && data.format == .png)
            #expect(
                await bytesDecide.loadError(origin.url("/g.gif"))?.reason
                    == .contentType(.notAccepted(contentType: "image/gif")))
            #expect(await bytesDecide.loadError(origin.url("/text.png"))?.reason == .contentType(.unrecognizedFormat))
            try await bytesDecide.shutdown()
        }
    }

    @Test("bytes that do not decode are an error and are not cached")
    func undecodable() async throws {
        try await withOrigin { origin, harness in
            let broken = Array(TestImages.png.prefix(60))
            origin.serve("/broken.png", .init(headers: [Self.png, ("Cache-Control", "max-age=100")], body: broken))
            let loader = try harness.loader()
            for _ in 0..<2 {
                let error = await loader.loadError(origin.url("/broken.png"))
                guard case .decoding(let decoding) = error?.reason else {
                    Issue.record("\(String(describing: error))")
                    continue
                }
                #expect(decoding.reason == .truncated)
            }
            #expect(origin.count("/broken.png") == 2)
            try await loader.shutdown()
        }
    }

    @Test("credentials go to the first origin and never to another after a redirect; custom headers go everywhere")
    func credentialsAndRedirects() async throws {
        try await withOrigin { origin, harness in
            // 127.0.0.1 and localhost are different origins on the same server.
            origin.serve("/private.png", .init(headers: [Self.png], body: TestImages.png))
            origin.serve("/hop", .init(status: 302, headers: [("Location", "/private.png")]))
            origin.serve(
                "/away", .init(status: 301, headers: [("Location", "http://localhost:\(origin.port)/elsewhere.png")]))
            origin.serve("/elsewhere.png", .init(headers: [Self.png], body: TestImages.png))
            let loader = try harness.loader {
                $0.http.credentials = ("user", "secret")
                $0.requestHeaders = [HeaderField("X-Client", "tests")]
            }
            _ = try await loader.image(for: origin.url("/hop"))
            _ = try await loader.image(for: origin.url("/away"))
            let expected = "Basic " + Data("user:secret".utf8).base64EncodedString()
            #expect(origin.requests("/hop")[0].header("Authorization") == expected)
            #expect(origin.requests("/private.png")[0].header("Authorization") == expected)
            #expect(origin.requests("/away")[0].header("Authorization") == expected)
            #expect(origin.requests("/elsewhere.png")[0].header("Authorization") == nil)
            #expect(origin.requests("/elsewhere.png")[0].header("X-Client") == "tests")
            try await loader.shutdown()
        }
    }

    @Test("redirects stop at the limit")
    func redirectLimit() async throws {
        try await withOrigin { origin, harness in
            origin.serve("/loop", .init(status: 307, headers: [("Location", "/loop")]))
            let loader = try harness.loader { $0.http.maxRedirects = 3 }
            #expect(await loader.loadError(origin.url("/loop"))?.reason == .tooManyRedirects(limit: 3))
            #expect(origin.count("/loop") == 4)
            try await loader.shutdown()
        }
    }

    @Test("the total timeout and the size limit are typed errors")
    func limits() async throws {
        try await withOrigin { origin, harness in
            // Held until the origin stops: only the total timeout can end the load.
            origin.serve("/slow.png", .init(headers: [Self.png], body: TestImages.png, gate: Gate()))
            origin.serve("/big.png", .init(headers: [Self.png], body: TestImages.bytes("png-photo.png")))
            let loader = try harness.loader {
                $0.http.timeout = .seconds(1)
                $0.http.maxResponseBytes = 10_000
            }
            #expect(await loader.loadError(origin.url("/slow.png"))?.reason == .timeout)
            try await loader.shutdown()
            // The size limit alone, with time to spare on a busy machine.
            let sized = try harness.loader { $0.http.maxResponseBytes = 10_000 }
            #expect(await sized.loadError(origin.url("/big.png"))?.reason == .responseTooLarge(limit: 10_000))
            try await sized.shutdown()
        }
    }

    /// Origins no connection can be made to, each for a reason that waiting would not mend.
    enum Unconnectable: String, CaseIterable, CustomTestStringConvertible {
        case refused, unresolvable, unreachable, tlsToPlainHTTP

        var testDescription: String { rawValue }
    }

    @Test(
        "a connection that cannot be made ends the load at once, with a typed reason and no retry",
        arguments: Unconnectable.allCases)
    func cannotConnect(_ origin: Unconnectable) async throws {
        // A port held bound but not listening: a stopped server's port could be taken by
        // another test's server before the request is made.
        let refusing = try RefusingPort()
        defer { refusing.close() }
        let plain = try await TestOrigin.start()
        defer { Task { await plain.stop() } }
        plain.serve("/x.png", .init(headers: [Self.png], body: TestImages.png))
        let (url, kind, host): (URL, ConnectionFailure.Kind, String) =
            switch origin {
            case .refused: (refusing.url("/x.png"), .refused, "127.0.0.1")
            // `.invalid` names never resolve (RFC 6761).
            case .unresolvable:
                (URL(string: "http://no-such-host.invalid/x.png")!, .nameNotResolved, "no-such-host.invalid")
            // The limited broadcast address: Linux refuses to connect there (ENETUNREACH, or
            // EACCES without SO_BROADCAST) before a packet leaves.
            case .unreachable: (URL(string: "http://255.255.255.255:9/x.png")!, .unreachable, "255.255.255.255")
            case .tlsToPlainHTTP: (URL(string: "https://127.0.0.1:\(plain.port)/x.png")!, .tlsHandshake, "127.0.0.1")
            }
        let harness = LoaderHarness()
        defer { Task { await harness.cleanUp() } }
        // The connect timeout past the total one: waiting for either would end the load
        // as `.timeout`, which this test refuses.
        let loader = try harness.loader {
            $0.http.connectTimeout = .seconds(600)
            $0.http.timeout = .seconds(90)
        }
        let error = await loader.loadError(url)
        guard case .cannotConnect(let failure) = error?.reason else {
            Issue.record("\(String(describing: error))")
            return
        }
        #expect(failure.kind == kind && failure.host == host)
        #expect(failure.port == url.port ?? 80)
        // One line, without NIO's decoration.
        let text = try #require(error?.description)
        #expect(!text.contains("errno") && !text.contains(")) ") && !text.contains("\n"), "\(text)")
        // The plain origin saw the TLS handshake's bytes as no request it could answer.
        if origin == .tlsToPlainHTTP { #expect(plain.count("/x.png") == 0) }
        try await loader.shutdown()
    }

    @Test("the system's connect errors are told apart: what waiting cannot mend, and what a retry may")
    func connectErrorClasses() {
        let expected: [(Int32, ConnectionFailure.Kind?)] = [
            (ECONNREFUSED, .refused), (ENETUNREACH, .unreachable), (EHOSTUNREACH, .unreachable),
            (EACCES, .unreachable), (ECONNRESET, nil), (ETIMEDOUT, nil), (EADDRNOTAVAIL, nil),
        ]
        for (code, kind) in expected {
            let error = IOError(errnoCode: code, reason: "connect")
            #expect(ConnectionFailure(error, host: "h", port: 1)?.kind == kind, "errno \(code)")
        }
        #expect(HTTPDataLoader.isTransient(IOError(errnoCode: ECONNRESET, reason: "connect")))
        #expect(HTTPDataLoader.isTransient(IOError(errnoCode: EADDRNOTAVAIL, reason: "connect")))
        #expect(!HTTPDataLoader.isTransient(IOError(errnoCode: ECONNREFUSED, reason: "connect")))
        #expect(HTTPDataLoader.retryDelays.count == 2)
        let refused = ConnectionFailure(.refused, host: "::1", port: 8080, detail: "connection refused")
        #expect(refused.description == "connection refused by [::1]:8080 (nothing listens there)")
    }

    @Test("file URLs are decoded from the file, then served from memory")
    func fileURLs() async throws {
        let harness = LoaderHarness()
        defer { Task { await harness.cleanUp() } }
        let loader = try harness.loader()
        let url = TestImages.fixtures.appendingPathComponent("images/gif-animation.gif")
        #expect(await loader.allEvents(for: url).moments == [.completed(.localFile)])
        let cached = try await loader.image(for: url)
        #expect(cached.source == .memory)
        #expect(cached.image.frames.count == 5)
        let missing = await loader.allEvents(for: URL(fileURLWithPath: "/nonexistent.png")).moments
        guard case .failed(.decoding(let error)) = missing.first else {
            Issue.record("\(missing)")
            return
        }
        #expect(error.reason == .unreadable)
        #expect(
            await loader.allEvents(for: URL(string: "ftp://example.com/a.png")!).moments == [.failed(.unsupportedURL)])
        try await loader.shutdown()
    }
}
