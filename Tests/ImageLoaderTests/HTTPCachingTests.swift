import Foundation
import RasterImage
import TestSupport
import Testing

@testable import ImageLoader

/// RFC 9111 (private cache), RFC 5861 and RFC 8246 against a real origin: every rule
/// is checked by how many requests reached the origin and which conditional headers
/// they carried, through both paths a URL's bytes take through the cache: an image
/// load (``ImageLoader/image(for:options:)``) and the bytes themselves
/// (``ImageLoader/data(for:options:)``, what the service fetches its sources with).
/// Where an image load's events say more, they are checked too.
@Suite("HTTP caching rules")
struct HTTPCachingTests {
    static let png = ("Content-Type", "image/png")

    @Test(
        "max-age: fresh responses come from the cache, from disk after a restart, with no request",
        arguments: CachePath.allCases)
    func maxAge(_ path: CachePath) async throws {
        try await withOrigin { origin, harness in
            origin.serve(
                "/a.png",
                .init(headers: [Self.png, ("Cache-Control", "max-age=100")], body: TestImages.png))
            let loader = try harness.loader()
            #expect(try await path.fetch(loader, origin.url("/a.png")).source == .networkToDisk)
            harness.clock.advance(by: 50)
            #expect(try await path.fetch(loader, origin.url("/a.png")).tier == .cache)
            if path == .image {
                #expect(await loader.allEvents(for: origin.url("/a.png")).moments == [.cached(.memory)])
            }
            try await loader.shutdown()

            // A new loader on the same folder: the disk entry survived.
            let restarted = try harness.loader()
            let loaded = try await path.fetch(restarted, origin.url("/a.png"))
            #expect(loaded.source == .disk)
            #expect(loaded.matches(TestImages.png))
            #expect(origin.count("/a.png") == 1)

            // Past max-age: revalidated.
            harness.clock.advance(by: 60)
            _ = try await path.fetch(restarted, origin.url("/a.png"))
            #expect(origin.count("/a.png") == 2)
            try await restarted.shutdown()
        }
    }

    @Test("Expires minus Date gives the lifetime when there is no max-age", arguments: CachePath.allCases)
    func expires(_ path: CachePath) async throws {
        try await withOrigin { origin, harness in
            let clock = harness.clock
            origin.route("/e.png") { _, _ in
                .init(
                    headers: [Self.png, ("Date", clock.httpDate()), ("Expires", clock.httpDate(100))],
                    body: TestImages.png)
            }
            let loader = try harness.loader { $0.cacheImagesInMemory = false }
            _ = try await path.fetch(loader, origin.url("/e.png"))
            clock.advance(by: 99)
            #expect(try await path.fetch(loader, origin.url("/e.png")).source == .disk)
            clock.advance(by: 2)
            if path == .image {
                #expect(
                    await loader.allEvents(for: origin.url("/e.png")).moments == [
                        .cached(.disk, .needsRevalidation), .sending(hadCache: true), .completed(.networkToDisk),
                    ])
            } else {
                #expect(try await path.fetch(loader, origin.url("/e.png")).source == .networkToDisk)
            }
            #expect(origin.count("/e.png") == 2)
            try await loader.shutdown()
        }
    }

    @Test("an invalid Expires means already stale", arguments: CachePath.allCases)
    func invalidExpires(_ path: CachePath) async throws {
        try await withOrigin { origin, harness in
            origin.serve(
                "/x.png",
                .init(
                    headers: [
                        Self.png, ("Expires", "0"), ("Last-Modified", HTTPDates.format(Date(timeIntervalSince1970: 0))),
                    ], body: TestImages.png))
            let loader = try harness.loader()
            _ = try await path.fetch(loader, origin.url("/x.png"))
            _ = try await path.fetch(loader, origin.url("/x.png"))
            #expect(origin.count("/x.png") == 2)
            try await loader.shutdown()
        }
    }

    @Test(
        "without explicit freshness, 10% of the time since Last-Modified, and nothing without Last-Modified",
        arguments: CachePath.allCases)
    func heuristic(_ path: CachePath) async throws {
        try await withOrigin { origin, harness in
            let clock = harness.clock
            origin.route("/h.png") { _, _ in
                .init(
                    headers: [Self.png, ("Date", clock.httpDate()), ("Last-Modified", clock.httpDate(-10 * 3600))],
                    body: TestImages.png)
            }
            origin.serve("/none.png", .init(headers: [Self.png], body: TestImages.png))
            let loader = try harness.loader()
            _ = try await path.fetch(loader, origin.url("/h.png"))
            clock.advance(by: 3500)  // under an hour: fresh
            #expect(try await path.fetch(loader, origin.url("/h.png")).tier == .cache)
            clock.advance(by: 200)  // past an hour: stale
            _ = try await path.fetch(loader, origin.url("/h.png"))
            #expect(origin.count("/h.png") == 2)

            _ = try await path.fetch(loader, origin.url("/none.png"))
            _ = try await path.fetch(loader, origin.url("/none.png"))
            #expect(origin.count("/none.png") == 2)
            try await loader.shutdown()
        }
    }

    @Test("the Age header and the apparent age count against max-age", arguments: CachePath.allCases)
    func age(_ path: CachePath) async throws {
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
            _ = try await path.fetch(loader, origin.url("/age.png"))
            _ = try await path.fetch(loader, origin.url("/apparent.png"))
            clock.advance(by: 5)
            #expect(try await path.fetch(loader, origin.url("/age.png")).tier == .cache)
            #expect(try await path.fetch(loader, origin.url("/apparent.png")).tier == .cache)
            clock.advance(by: 30)  // 90 + 35 > 100 and 70 + 35 > 100
            _ = try await path.fetch(loader, origin.url("/age.png"))
            _ = try await path.fetch(loader, origin.url("/apparent.png"))
            #expect(origin.count("/age.png") == 2)
            #expect(origin.count("/apparent.png") == 2)
            try await loader.shutdown()
        }
    }

    @Test("no-store is never written, to disk or to memory", arguments: CachePath.allCases)
    func noStore(_ path: CachePath) async throws {
        try await withOrigin { origin, harness in
            origin.serve(
                "/n.png", .init(headers: [Self.png, ("Cache-Control", "no-store, max-age=100")], body: TestImages.png))
            let loader = try harness.loader()
            #expect(try await path.fetch(loader, origin.url("/n.png")).source == .network)
            #expect(try await path.fetch(loader, origin.url("/n.png")).source == .network)
            #expect(origin.count("/n.png") == 2)
            #expect(loader.diskCache?.statistics.entries == 0)
            #expect(loader.peek(origin.url("/n.png")) == nil)
            try await loader.shutdown()
        }
    }

    @Test("a response that may not be stored replaces nothing: the old entry is removed", arguments: CachePath.allCases)
    func notStorableRemovesEntry(_ path: CachePath) async throws {
        try await withOrigin { origin, harness in
            origin.route("/ns.png") { _, count in
                count == 1
                    ? .init(headers: [Self.png, ("Cache-Control", "max-age=10")], body: TestImages.png)
                    : .init(headers: [Self.png, ("Cache-Control", "no-store")], body: TestImages.otherPNG)
            }
            let loader = try harness.loader()
            _ = try await path.fetch(loader, origin.url("/ns.png"))
            #expect(loader.diskCache?.statistics.entries == 1)
            harness.clock.advance(by: 20)
            let second = try await path.fetch(loader, origin.url("/ns.png"))
            #expect(second.source == .network && second.matches(TestImages.otherPNG))
            #expect(loader.diskCache?.statistics.entries == 0)
            #expect(loader.peek(origin.url("/ns.png")) == nil)
            // Nothing stale is left to serve: the next load asks again.
            _ = try await path.fetch(loader, origin.url("/ns.png"))
            #expect(origin.count("/ns.png") == 3)
            try await loader.shutdown()
        }
    }

    @Test("no-cache is stored but always revalidated, with the exact validators", arguments: CachePath.allCases)
    func noCache(_ path: CachePath) async throws {
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
            _ = try await path.fetch(loader, origin.url("/c.png"))
            if path == .image {
                #expect(
                    await loader.allEvents(for: origin.url("/c.png")).moments == [
                        .cached(.memory, .needsRevalidation), .sending(hadCache: true), .completed(.networkNotModified),
                    ])
            } else {
                let again = try await path.fetch(loader, origin.url("/c.png"))
                #expect(again.source == .networkNotModified && again.matches(TestImages.png))
            }
            let second = origin.requests("/c.png")[1]
            #expect(second.header("If-None-Match") == "W/\"v1\"")  // the weak tag kept as it was
            #expect(second.header("If-Modified-Since") == lastModified)  // the stored value, unchanged
            #expect(origin.requests("/c.png")[0].header("If-None-Match") == nil)
            try await loader.shutdown()
        }
    }

    @Test("must-revalidate never serves stale, not even when the origin fails", arguments: CachePath.allCases)
    func mustRevalidate(_ path: CachePath) async throws {
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
            _ = try await path.fetch(loader, origin.url("/m.png"))
            harness.clock.advance(by: 20)
            if path == .image {
                #expect(
                    await loader.allEvents(for: origin.url("/m.png")).moments == [
                        .cached(.memory, .needsRevalidation), .sending(hadCache: true), .failed(.httpStatus(503)),
                    ])
            }
            await #expect(throws: ImageLoadingError(.httpStatus(503), url: origin.url("/m.png").absoluteString)) {
                try await path.fetch(loader, origin.url("/m.png"))
            }
            try await loader.shutdown()
        }
    }

    @Test(
        "Vary: a stored response answers only requests with the same header values; Vary: * never",
        arguments: CachePath.allCases)
    func vary(_ path: CachePath) async throws {
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
            _ = try await path.fetch(a, origin.url("/v.png"))
            try await a.shutdown()

            let alsoA = try harness.loader { $0.requestHeaders = [HeaderField("X-Variant", "a")] }
            #expect(try await path.fetch(alsoA, origin.url("/v.png")).source == .disk)
            try await alsoA.shutdown()
            #expect(origin.count("/v.png") == 1)

            let b = try harness.loader { $0.requestHeaders = [HeaderField("X-Variant", "b")] }
            let other = try await path.fetch(b, origin.url("/v.png"))
            #expect(other.source == .networkToDisk)
            #expect(other.matches(TestImages.otherPNG))
            #expect(origin.requests("/v.png")[1].header("If-None-Match") == nil)

            _ = try await path.fetch(b, origin.url("/star.png"))
            _ = try await path.fetch(b, origin.url("/star.png"))
            #expect(origin.count("/star.png") == 2)
            try await b.shutdown()
        }
    }

    @Test(
        "a 304 updates the stored headers (not Content-Length) and starts the age again", arguments: CachePath.allCases)
    func notModifiedUpdates(_ path: CachePath) async throws {
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
            _ = try await path.fetch(loader, origin.url("/u.png"))
            harness.clock.advance(by: 20)
            let revalidated = try await path.fetch(loader, origin.url("/u.png"))
            #expect(revalidated.source == .networkNotModified && revalidated.matches(TestImages.png))
            harness.clock.advance(by: 90)  // 90 < the new max-age=100, counted from the 304
            #expect(try await path.fetch(loader, origin.url("/u.png")).tier == .cache)
            #expect(origin.count("/u.png") == 2)
            try await loader.shutdown()

            // What is on disk: the new headers, the original length.
            let restarted = try harness.loader()
            #expect(try await path.fetch(restarted, origin.url("/u.png")).source == .disk)
            let stored = try #require(restarted.diskCache?.storedResponse(for: origin.url("/u.png").absoluteString))
            #expect(stored.value("X-Version") == "2")
            #expect(stored.value("Content-Length") == String(TestImages.png.count))
            try await restarted.shutdown()
        }
    }

    @Test(
        "stale-while-revalidate serves the stale response at once and revalidates in the background",
        arguments: CachePath.allCases)
    func staleWhileRevalidate(_ path: CachePath) async throws {
        try await withOrigin { origin, harness in
            let answer = Gate()
            origin.route("/swr.png") { request, count in
                count == 1
                    ? .init(
                        headers: [
                            Self.png, ("Cache-Control", "max-age=10, stale-while-revalidate=100"), ("ETag", "\"s\""),
                        ], body: TestImages.png)
                    : .init(
                        status: request.header("If-None-Match") == "\"s\"" ? 304 : 500,
                        headers: [("Cache-Control", "max-age=10, stale-while-revalidate=100"), ("ETag", "\"s\"")],
                        gate: answer)
            }
            let loader = try harness.loader()
            _ = try await path.fetch(loader, origin.url("/swr.png"))
            harness.clock.advance(by: 50)
            // The origin holds its answer until the stale response has been returned.
            let stale = try await path.fetch(loader, origin.url("/swr.png"))
            #expect(stale.freshness == .staleWhileRevalidate && stale.tier == .cache)
            answer.open()
            await loader.waitForBackgroundWork()
            #expect(origin.count("/swr.png") == 2)
            #expect(origin.requests("/swr.png")[1].header("If-None-Match") == "\"s\"")
            // Revalidated: fresh again.
            let fresh = try await path.fetch(loader, origin.url("/swr.png"))
            #expect(fresh.tier == .cache && fresh.freshness == .fresh)
            #expect(origin.count("/swr.png") == 2)

            // Past the window: an ordinary revalidation; the stale image is offered
            // first, but image(for:) may not use it.
            harness.clock.advance(by: 200)
            if path == .image {
                #expect(
                    await loader.allEvents(for: origin.url("/swr.png")).moments == [
                        .cached(.memory, .needsRevalidation), .sending(hadCache: true), .completed(.networkNotModified),
                    ])
            } else {
                #expect(try await path.fetch(loader, origin.url("/swr.png")).source == .networkNotModified)
            }
            #expect(origin.count("/swr.png") == 3)
            try await loader.shutdown()
        }
    }

    @Test(
        "stale-if-error serves the stale response when the origin fails within the window, not after",
        arguments: CachePath.allCases)
    func staleIfError(_ path: CachePath) async throws {
        try await withOrigin { origin, harness in
            origin.route("/sie.png") { _, count in
                count == 1
                    ? .init(
                        headers: [Self.png, ("Cache-Control", "max-age=10, stale-if-error=100")], body: TestImages.png)
                    : .init(status: 503)
            }
            let loader = try harness.loader()
            _ = try await path.fetch(loader, origin.url("/sie.png"))
            harness.clock.advance(by: 50)
            if path == .image {
                #expect(
                    await loader.allEvents(for: origin.url("/sie.png")).moments == [
                        .cached(.memory, .needsRevalidation), .sending(hadCache: true), .cached(.memory, .staleIfError),
                        .failed(.httpStatus(503)),
                    ])
            }
            let stale = try await path.fetch(loader, origin.url("/sie.png"))
            #expect(stale.freshness == .staleIfError && stale.matches(TestImages.png))
            harness.clock.advance(by: 100)
            await #expect(throws: ImageLoadingError(.httpStatus(503), url: origin.url("/sie.png").absoluteString)) {
                try await path.fetch(loader, origin.url("/sie.png"))
            }
            try await loader.shutdown()
        }
    }

    @Test("a connection failure counts as an error for stale-if-error too", arguments: CachePath.allCases)
    func staleIfErrorOnConnectionFailure(_ path: CachePath) async throws {
        let origin = try await TestOrigin.start()
        let harness = LoaderHarness()
        origin.serve(
            "/gone.png",
            .init(headers: [Self.png, ("Cache-Control", "max-age=10, stale-if-error=100")], body: TestImages.png))
        let loader = try harness.loader { $0.http.connectTimeout = .seconds(1) }
        let url = origin.url("/gone.png")
        _ = try await path.fetch(loader, url)
        await origin.stop()
        harness.clock.advance(by: 50)
        if path == .image {
            let moments = await loader.allEvents(for: url).moments
            #expect(
                moments.prefix(3) == [
                    .cached(.memory, .needsRevalidation), .sending(hadCache: true), .cached(.memory, .staleIfError),
                ])
            if case .failed(.cannotConnect(let failure)) = moments.last, failure.kind == .refused {
            } else {
                Issue.record("got \(moments)")
            }
        } else {
            let stale = try await path.fetch(loader, url)
            #expect(stale.freshness == .staleIfError && stale.source == .disk)
        }
        await harness.cleanUp()
    }

    @Test(
        "an unreachable origin: a stored copy answers within staleWhenUnreachable, unless must-revalidate or no-cache",
        arguments: CachePath.allCases)
    func staleWhenUnreachable(_ path: CachePath) async throws {
        let origin = try await TestOrigin.start()
        let harness = LoaderHarness()
        // No stale-if-error anywhere: only the loader's setting can allow these.
        for (name, control) in [
            ("plain", "max-age=10"), ("must", "max-age=10, must-revalidate"), ("nocache", "no-cache"),
        ] {
            origin.serve(
                "/\(name).png",
                .init(headers: [Self.png, ("Cache-Control", control), ("ETag", "\"e\"")], body: TestImages.png))
        }
        // A gateway in front of a dead server: its 503 says the same as a refused connection.
        origin.route("/gateway.png") { _, count in
            count == 1
                ? .init(headers: [Self.png, ("Cache-Control", "max-age=10")], body: TestImages.png) : .init(status: 503)
        }
        // Whatever fails below, the loaders are shut down.
        do {
            let loader = try harness.loader {
                $0.http.connectTimeout = .seconds(1)
                $0.staleWhenUnreachable = 100
            }
            let strict = try harness.loader { $0.http.connectTimeout = .seconds(1) }
            for name in ["plain", "must", "nocache", "gateway"] {
                _ = try await path.fetch(loader, origin.url("/\(name).png"))
            }
            _ = try await path.fetch(strict, origin.url("/plain.png"))
            harness.clock.advance(by: 50)
            let gateway = try await path.fetch(loader, origin.url("/gateway.png"))
            #expect(gateway.freshness == .staleIfError && gateway.matches(TestImages.png))
            await origin.stop()

            let stale = try await path.fetch(loader, origin.url("/plain.png"))
            #expect(stale.freshness == .staleIfError && stale.matches(TestImages.png))
            for name in ["must", "nocache"] {
                await #expect(throws: ImageLoadingError.self, "\(name)") {
                    try await path.fetch(loader, origin.url("/\(name).png"))
                }
            }
            // Without the setting: the error, as before.
            await #expect(throws: ImageLoadingError.self) { try await path.fetch(strict, origin.url("/plain.png")) }
            // Past the window (10 s of freshness, 100 more): the error.
            harness.clock.advance(by: 100)
            await #expect(throws: ImageLoadingError.self) { try await path.fetch(loader, origin.url("/plain.png")) }
        } catch {
            Issue.record("\(error)")
        }
        await harness.cleanUp()
    }

    @Test(
        "immutable is not revalidated while fresh, even when a revalidation is asked for", arguments: CachePath.allCases
    )
    func immutable(_ path: CachePath) async throws {
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
            _ = try await path.fetch(loader, origin.url("/i.png"))
            _ = try await path.fetch(loader, origin.url("/plain.png"))
            harness.clock.advance(by: 10)
            let reload = LoadOptions(cachePolicy: .revalidate)
            #expect(try await path.fetch(loader, origin.url("/i.png"), reload).tier == .cache)
            #expect(try await path.fetch(loader, origin.url("/plain.png"), reload).source == .networkNotModified)
            #expect(origin.count("/i.png") == 1)
            #expect(origin.count("/plain.png") == 2)
            // Past its lifetime, immutable is revalidated like anything else.
            harness.clock.advance(by: 100)
            _ = try await path.fetch(loader, origin.url("/i.png"))
            #expect(origin.count("/i.png") == 2)
            try await loader.shutdown()
        }
    }

    @Test("a 304 naming another entity tag is not trusted: the bytes are fetched again", arguments: CachePath.allCases)
    func mismatchedNotModified(_ path: CachePath) async throws {
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
            _ = try await path.fetch(loader, origin.url("/t.png"))
            harness.clock.advance(by: 5)
            let reloaded = try await path.fetch(loader, origin.url("/t.png"))
            #expect(reloaded.source == .networkToDisk)
            #expect(reloaded.matches(TestImages.otherPNG))
            #expect(origin.count("/t.png") == 3)
            #expect(origin.requests("/t.png")[2].header("If-None-Match") == nil)
            try await loader.shutdown()
        }
    }

    @Test("reload ignores the caches and replaces what is stored", arguments: CachePath.allCases)
    func reload(_ path: CachePath) async throws {
        try await withOrigin { origin, harness in
            origin.serve(
                "/r.png",
                .init(headers: [Self.png, ("Cache-Control", "max-age=1000"), ("ETag", "\"r\"")], body: TestImages.png))
            let loader = try harness.loader()
            _ = try await path.fetch(loader, origin.url("/r.png"))
            #expect(
                try await path.fetch(loader, origin.url("/r.png"), LoadOptions(cachePolicy: .reload)).source
                    == .networkToDisk)
            #expect(origin.count("/r.png") == 2)
            #expect(origin.requests("/r.png")[1].header("If-None-Match") == nil)
            try await loader.shutdown()
        }
    }

    @Test(
        "failures are remembered: past the attempts allowed, the origin is not asked again",
        arguments: CachePath.allCases)
    func rememberedFailures(_ path: CachePath) async throws {
        try await withOrigin { origin, harness in
            origin.serve("/f.png", .init(status: 500, headers: [("Cache-Control", "max-age=60")]))
            let loader = try harness.loader { $0.maxAttemptsForErrors = 2 }
            let url = origin.url("/f.png")
            for _ in 0..<2 {
                await #expect(throws: ImageLoadingError(.httpStatus(500), url: url.absoluteString)) {
                    try await path.fetch(loader, url)
                }
            }
            await #expect(
                throws: ImageLoadingError(.rememberedFailure(status: 500, attempts: 2), url: url.absoluteString)
            ) {
                try await path.fetch(loader, url)
            }
            #expect(origin.count("/f.png") == 2)
            // Past the window (the response's max-age), the origin is asked again.
            harness.clock.advance(by: 61)
            await #expect(throws: ImageLoadingError.self) { try await path.fetch(loader, url) }
            #expect(origin.count("/f.png") == 3)
            try await loader.shutdown()
        }
    }

    @Test("an image load and data(for:) sharing one download write the entry once")
    func sharedDownloadWritesOnce() async throws {
        try await withOrigin { origin, harness in
            let answer = Gate()
            origin.serve(
                "/w.png",
                .init(headers: [Self.png, ("Cache-Control", "max-age=100")], body: TestImages.png, gate: answer))
            let folder = FaultyFolder()
            let loader = try harness.loader(folder: folder)
            let writes = Tally()
            folder.writeFault.withLock {
                $0 = { path in
                    if path.hasSuffix(".response") { writes.increment() }
                    return nil
                }
            }
            let url = origin.url("/w.png")
            async let image = loader.image(for: url)
            async let data = loader.data(for: url)
            try await waitUntil("both joined one request") { loader.context.downloads.counts.joined == 1 }
            answer.open()
            let (loadedImage, loadedData) = try await (image, data)
            #expect(loadedImage.source == .networkToDisk && loadedData.source == .networkToDisk)
            #expect(origin.count("/w.png") == 1)
            #expect(writes.value == 1)
            try await loader.shutdown()
        }
    }
}
