import Foundation
import ImageLoader
import RasterImage
import TestOrigin
import Testing

/// RFC 9111 (private cache), RFC 5861 and RFC 8246 against a real origin: every rule
/// is checked by how many requests reached the origin and which conditional headers
/// they carried.
@Suite("HTTP caching rules")
struct HTTPCachingTests {
    @Test("max-age: fresh images come from memory, then from disk after a restart, with no request")
    func maxAge() async throws {
        try await withOrigin { origin, harness in
            origin.serve(
                "/a.png",
                .init(headers: [("Content-Type", "image/png"), ("Cache-Control", "max-age=100")], body: TestImages.png))
            let loader = try harness.loader()
            #expect(
                await loader.allEvents(for: origin.url("/a.png")).moments == [
                    .sending(hadCache: false), .completed(.networkToDisk),
                ])
            harness.clock.advance(by: 50)
            #expect(await loader.allEvents(for: origin.url("/a.png")).moments == [.cached(.memory)])
            try await loader.shutdown()

            // A new loader on the same folder: the disk entry survived.
            let restarted = try harness.loader()
            let loaded = try await restarted.image(for: origin.url("/a.png"))
            #expect(loaded.source == .disk)
            #expect(loaded.image.width == 48)
            #expect(origin.count("/a.png") == 1)

            // Past max-age: revalidated.
            harness.clock.advance(by: 60)
            _ = try await restarted.image(for: origin.url("/a.png"))
            #expect(origin.count("/a.png") == 2)
            try await restarted.shutdown()
        }
    }
}

extension HTTPCachingTests {
    static let png = ("Content-Type", "image/png")

    @Test("Expires minus Date gives the lifetime when there is no max-age")
    func expires() async throws {
        try await withOrigin { origin, harness in
            let clock = harness.clock
            origin.route("/e.png") { _, _ in
                .init(
                    headers: [Self.png, ("Date", clock.httpDate()), ("Expires", clock.httpDate(100))],
                    body: TestImages.png)
            }
            let loader = try harness.loader { $0.cacheImagesInMemory = false }
            _ = try await loader.image(for: origin.url("/e.png"))
            clock.advance(by: 99)
            #expect(try await loader.image(for: origin.url("/e.png")).source == .disk)
            clock.advance(by: 2)
            #expect(
                await loader.allEvents(for: origin.url("/e.png")).moments == [
                    .cached(.disk, .needsRevalidation), .sending(hadCache: true), .completed(.networkToDisk),
                ])
            #expect(origin.count("/e.png") == 2)
            try await loader.shutdown()
        }
    }

    @Test("an invalid Expires means already stale")
    func invalidExpires() async throws {
        try await withOrigin { origin, harness in
            origin.serve(
                "/x.png",
                .init(
                    headers: [
                        Self.png, ("Expires", "0"), ("Last-Modified", HTTPDates.format(Date(timeIntervalSince1970: 0))),
                    ], body: TestImages.png))
            let loader = try harness.loader()
            _ = try await loader.image(for: origin.url("/x.png"))
            _ = try await loader.image(for: origin.url("/x.png"))
            #expect(origin.count("/x.png") == 2)
            try await loader.shutdown()
        }
    }

    @Test("without explicit freshness, 10% of the time since Last-Modified, and nothing without Last-Modified")
    func heuristic() async throws {
        try await withOrigin { origin, harness in
            let clock = harness.clock
            origin.route("/h.png") { _, _ in
                .init(
                    headers: [Self.png, ("Date", clock.httpDate()), ("Last-Modified", clock.httpDate(-10 * 3600))],
                    body: TestImages.png)
            }
            origin.serve("/none.png", .init(headers: [Self.png], body: TestImages.png))
            let loader = try harness.loader()
            _ = try await loader.image(for: origin.url("/h.png"))
            clock.advance(by: 3500)  // under an hour: fresh
            #expect(try await loader.image(for: origin.url("/h.png")).source == .memory)
            clock.advance(by: 200)  // past an hour: stale
            _ = try await loader.image(for: origin.url("/h.png"))
            #expect(origin.count("/h.png") == 2)

            _ = try await loader.image(for: origin.url("/none.png"))
            _ = try await loader.image(for: origin.url("/none.png"))
            #expect(origin.count("/none.png") == 2)
            try await loader.shutdown()
        }
    }

    @Test("the Age header and the apparent age count against max-age")
    func age() async throws {
        try await withOrigin { origin, harness in
            let clock = harness.clock
            origin.serve(
                "/age.png",
                .init(headers: [Self.png, ("Cache-Control", "max-age=100"), ("Age", "90")], body: TestImages.png))
            origin.route("/apparent.png") { _, _ in
                .init(
                    headers: [Self.png, ("Cache-Control", "max-age=100"), ("Date", clock.httpDate(-70))],
                    body: TestImages.png)
            }
            let loader = try harness.loader()
            _ = try await loader.image(for: origin.url("/age.png"))
            _ = try await loader.image(for: origin.url("/apparent.png"))
            clock.advance(by: 5)
            #expect(try await loader.image(for: origin.url("/age.png")).source == .memory)
            #expect(try await loader.image(for: origin.url("/apparent.png")).source == .memory)
            clock.advance(by: 30)  // 90 + 35 > 100 and 70 + 35 > 100
            _ = try await loader.image(for: origin.url("/age.png"))
            _ = try await loader.image(for: origin.url("/apparent.png"))
            #expect(origin.count("/age.png") == 2)
            #expect(origin.count("/apparent.png") == 2)
            try await loader.shutdown()
        }
    }

    @Test("no-store is never written, to disk or to memory")
    func noStore() async throws {
        try await withOrigin { origin, harness in
            origin.serve(
                "/n.png", .init(headers: [Self.png, ("Cache-Control", "no-store, max-age=100")], body: TestImages.png))
            let loader = try harness.loader()
            #expect(
                await loader.allEvents(for: origin.url("/n.png")).moments == [
                    .sending(hadCache: false), .completed(.network),
                ])
            #expect(
                await loader.allEvents(for: origin.url("/n.png")).moments == [
                    .sending(hadCache: false), .completed(.network),
                ])
            #expect(origin.count("/n.png") == 2)
            #expect(loader.diskCache?.statistics.entries == 0)
            #expect(loader.peek(origin.url("/n.png")) == nil)
            try await loader.shutdown()
        }
    }

    @Test("no-cache is stored but always revalidated, with the exact validators")
    func noCache() async throws {
        try await withOrigin { origin, harness in
            let lastModified = "Tue, 15 Nov 1994 12:45:26 GMT"
            origin.route("/c.png") { request, count in
                if count > 1 && request.header("If-None-Match") == "W/\"v1\"" {
                    return .init(status: 304, headers: [("ETag", "W/\"v1\"")])
                }
                return .init(
                    headers: [
                        Self.png, ("Cache-Control", "no-cache, max-age=1000"), ("ETag", "W/\"v1\""),
                        ("Last-Modified", lastModified),
                    ],
                    body: TestImages.png)
            }
            let loader = try harness.loader()
            _ = try await loader.image(for: origin.url("/c.png"))
            #expect(
                await loader.allEvents(for: origin.url("/c.png")).moments == [
                    .cached(.memory, .needsRevalidation), .sending(hadCache: true), .completed(.networkNotModified),
                ])
            let second = origin.requests("/c.png")[1]
            #expect(second.header("If-None-Match") == "W/\"v1\"")  // the weak tag kept as it was
            #expect(second.header("If-Modified-Since") == lastModified)  // the stored value, unchanged
            #expect(origin.requests("/c.png")[0].header("If-None-Match") == nil)
            try await loader.shutdown()
        }
    }

    @Test("must-revalidate never serves stale, not even when the origin fails")
    func mustRevalidate() async throws {
        try await withOrigin { origin, harness in
            origin.route("/m.png") { _, count in
                count == 1
                    ? .init(
                        headers: [
                            Self.png,
                            (
                                "Cache-Control",
                                "max-age=10, must-revalidate, stale-if-error=1000, stale-while-revalidate=1000"
                            ), ("ETag", "\"m\""),
                        ], body: TestImages.png)
                    : .init(status: 503)
            }
            let loader = try harness.loader()
            _ = try await loader.image(for: origin.url("/m.png"))
            harness.clock.advance(by: 20)
            #expect(
                await loader.allEvents(for: origin.url("/m.png")).moments == [
                    .cached(.memory, .needsRevalidation), .sending(hadCache: true), .failed(.httpStatus(503)),
                ])
            await #expect(throws: ImageLoadingError.self) { try await loader.image(for: origin.url("/m.png")) }
            try await loader.shutdown()
        }
    }

    @Test("Vary: a stored response answers only requests with the same header values; Vary: * never")
    func vary() async throws {
        try await withOrigin { origin, harness in
            origin.route("/v.png") { request, _ in
                .init(
                    headers: [Self.png, ("Cache-Control", "max-age=1000"), ("Vary", "X-Variant")],
                    body: request.header("X-Variant") == "b" ? TestImages.otherPNG : TestImages.png)
            }
            origin.serve(
                "/star.png",
                .init(headers: [Self.png, ("Cache-Control", "max-age=1000"), ("Vary", "*")], body: TestImages.png))
            let a = try harness.loader { $0.requestHeaders = [HeaderField("X-Variant", "a")] }
            _ = try await a.image(for: origin.url("/v.png"))
            try await a.shutdown()

            let alsoA = try harness.loader { $0.requestHeaders = [HeaderField("X-Variant", "a")] }
            #expect(try await alsoA.image(for: origin.url("/v.png")).source == .disk)
            try await alsoA.shutdown()
            #expect(origin.count("/v.png") == 1)

            let b = try harness.loader { $0.requestHeaders = [HeaderField("X-Variant", "b")] }
            let other = try await b.image(for: origin.url("/v.png"))
            #expect(other.source == .networkToDisk)
            #expect(other.image.hasAlpha == false)  // png-rgb8, not png-rgba8
            #expect(origin.requests("/v.png")[1].header("If-None-Match") == nil)

            _ = try await b.image(for: origin.url("/star.png"))
            _ = try await b.image(for: origin.url("/star.png"))
            #expect(origin.count("/star.png") == 2)
            try await b.shutdown()
        }
    }

    @Test("a 304 updates the stored headers (not Content-Length) and starts the age again")
    func notModifiedUpdates() async throws {
        try await withOrigin { origin, harness in
            origin.route("/u.png") { request, count in
                if count == 1 {
                    return .init(
                        headers: [Self.png, ("Cache-Control", "max-age=10"), ("ETag", "\"u1\""), ("X-Version", "1")],
                        body: TestImages.png)
                }
                #expect(request.header("If-None-Match") == "\"u1\"")
                return .init(
                    status: 304,
                    headers: [
                        ("Cache-Control", "max-age=100"), ("ETag", "\"u1\""), ("X-Version", "2"),
                        ("Content-Length", "5"),
                    ])
            }
            let loader = try harness.loader()
            _ = try await loader.image(for: origin.url("/u.png"))
            harness.clock.advance(by: 20)
            #expect(try await loader.image(for: origin.url("/u.png")).source == .networkNotModified)
            harness.clock.advance(by: 90)  // 90 < the new max-age=100, counted from the 304
            #expect(try await loader.image(for: origin.url("/u.png")).source == .memory)
            #expect(origin.count("/u.png") == 2)
            try await loader.shutdown()

            // What is on disk: the new headers, the original length.
            let restarted = try harness.loader()
            #expect(try await restarted.image(for: origin.url("/u.png")).source == .disk)
            let stored = try #require(restarted.diskCache?.storedResponse(for: origin.url("/u.png").absoluteString))
            #expect(stored.value("X-Version") == "2")
            #expect(stored.value("Content-Length") == String(TestImages.png.count))
            try await restarted.shutdown()
        }
    }

    @Test("stale-while-revalidate serves the stale image at once and revalidates in the background")
    func staleWhileRevalidate() async throws {
        try await withOrigin { origin, harness in
            origin.route("/swr.png") { request, count in
                count == 1
                    ? .init(
                        headers: [
                            Self.png, ("Cache-Control", "max-age=10, stale-while-revalidate=100"), ("ETag", "\"s\""),
                        ], body: TestImages.png)
                    : .init(
                        status: request.header("If-None-Match") == "\"s\"" ? 304 : 500,
                        headers: [("Cache-Control", "max-age=10, stale-while-revalidate=100"), ("ETag", "\"s\"")],
                        delay: 0.3)
            }
            let loader = try harness.loader()
            _ = try await loader.image(for: origin.url("/swr.png"))
            harness.clock.advance(by: 50)
            let stale = try await loader.image(for: origin.url("/swr.png"))
            #expect(stale.isStale && stale.source == .memory)
            await loader.waitForBackgroundWork()
            #expect(origin.count("/swr.png") == 2)
            #expect(origin.requests("/swr.png")[1].header("If-None-Match") == "\"s\"")
            // Revalidated: fresh again.
            #expect(await loader.allEvents(for: origin.url("/swr.png")).moments == [.cached(.memory)])

            // Past the window: an ordinary revalidation; the stale image is offered
            // first, but image(for:) may not use it.
            harness.clock.advance(by: 200)
            #expect(
                await loader.allEvents(for: origin.url("/swr.png")).moments == [
                    .cached(.memory, .needsRevalidation), .sending(hadCache: true), .completed(.networkNotModified),
                ])
            try await loader.shutdown()
        }
    }

    @Test("stale-if-error serves the stale image when the origin fails within the window, not after")
    func staleIfError() async throws {
        try await withOrigin { origin, harness in
            origin.route("/sie.png") { _, count in
                count == 1
                    ? .init(
                        headers: [Self.png, ("Cache-Control", "max-age=10, stale-if-error=100")], body: TestImages.png)
                    : .init(status: 503)
            }
            let loader = try harness.loader()
            _ = try await loader.image(for: origin.url("/sie.png"))
            harness.clock.advance(by: 50)
            #expect(
                await loader.allEvents(for: origin.url("/sie.png")).moments == [
                    .cached(.memory, .needsRevalidation), .sending(hadCache: true), .cached(.memory, .staleIfError),
                    .failed(.httpStatus(503)),
                ])
            #expect(try await loader.image(for: origin.url("/sie.png")).isStale)
            harness.clock.advance(by: 100)
            await #expect(throws: ImageLoadingError.self) { try await loader.image(for: origin.url("/sie.png")) }
            try await loader.shutdown()
        }
    }

    @Test("a connection failure counts as an error for stale-if-error too")
    func staleIfErrorOnConnectionFailure() async throws {
        let origin = try await TestOrigin.start()
        let harness = LoaderHarness()
        defer { Task { await harness.cleanUp() } }
        origin.serve(
            "/gone.png",
            .init(headers: [Self.png, ("Cache-Control", "max-age=10, stale-if-error=100")], body: TestImages.png))
        let loader = try harness.loader { $0.http.connectTimeout = .seconds(1) }
        let url = origin.url("/gone.png")
        _ = try await loader.image(for: url)
        await origin.stop()
        harness.clock.advance(by: 50)
        let moments = await loader.allEvents(for: url).moments
        #expect(
            moments.prefix(3) == [
                .cached(.memory, .needsRevalidation), .sending(hadCache: true), .cached(.memory, .staleIfError),
            ])
        guard case .failed(.network) = moments.last else {
            Issue.record("got \(moments)")
            return
        }
        try await loader.shutdown()
    }

    @Test("immutable is not revalidated while fresh, even when a revalidation is asked for")
    func immutable() async throws {
        try await withOrigin { origin, harness in
            origin.serve(
                "/i.png",
                .init(
                    headers: [Self.png, ("Cache-Control", "max-age=100, immutable"), ("ETag", "\"i\"")],
                    body: TestImages.png))
            origin.route("/plain.png") { request, _ in
                request.header("If-None-Match") == "\"p\""
                    ? .init(status: 304, headers: [("ETag", "\"p\"")])
                    : .init(
                        headers: [Self.png, ("Cache-Control", "max-age=100"), ("ETag", "\"p\"")], body: TestImages.png)
            }
            let loader = try harness.loader()
            _ = try await loader.image(for: origin.url("/i.png"))
            _ = try await loader.image(for: origin.url("/plain.png"))
            harness.clock.advance(by: 10)
            let reload = LoadOptions(cachePolicy: .revalidate)
            #expect(try await loader.image(for: origin.url("/i.png"), options: reload).source == .memory)
            #expect(
                try await loader.image(for: origin.url("/plain.png"), options: reload).source == .networkNotModified)
            #expect(origin.count("/i.png") == 1)
            #expect(origin.count("/plain.png") == 2)
            // Past its lifetime, immutable is revalidated like anything else.
            harness.clock.advance(by: 100)
            _ = try await loader.image(for: origin.url("/i.png"))
            #expect(origin.count("/i.png") == 2)
            try await loader.shutdown()
        }
    }

    @Test("a 304 naming another entity tag is not trusted: the image is fetched again")
    func mismatchedNotModified() async throws {
        try await withOrigin { origin, harness in
            origin.route("/t.png") { request, count in
                switch count {
                case 1:
                    .init(
                        headers: [Self.png, ("Cache-Control", "max-age=1"), ("ETag", "\"one\"")], body: TestImages.png)
                case 2: .init(status: 304, headers: [("ETag", "\"two\"")])
                default: .init(headers: [Self.png, ("ETag", "\"two\"")], body: TestImages.otherPNG)
                }
            }
            let loader = try harness.loader()
            _ = try await loader.image(for: origin.url("/t.png"))
            harness.clock.advance(by: 5)
            let reloaded = try await loader.image(for: origin.url("/t.png"))
            #expect(reloaded.source == .networkToDisk)
            #expect(origin.count("/t.png") == 3)
            #expect(origin.requests("/t.png")[2].header("If-None-Match") == nil)
            try await loader.shutdown()
        }
    }

    @Test("reload ignores the caches and replaces what is stored")
    func reload() async throws {
        try await withOrigin { origin, harness in
            origin.serve(
                "/r.png",
                .init(headers: [Self.png, ("Cache-Control", "max-age=1000"), ("ETag", "\"r\"")], body: TestImages.png))
            let loader = try harness.loader()
            _ = try await loader.image(for: origin.url("/r.png"))
            #expect(
                try await loader.image(for: origin.url("/r.png"), options: LoadOptions(cachePolicy: .reload)).source
                    == .networkToDisk)
            #expect(origin.count("/r.png") == 2)
            #expect(origin.requests("/r.png")[1].header("If-None-Match") == nil)
            try await loader.shutdown()
        }
    }
}
