import Foundation
import ImageLoader
import RasterImage
import TestSupport
import Testing

/// Origins that misbehave: each fault ends in a typed error within a bounded time, and
/// leaves a cache that serves the next good response.
@Suite("Network faults")
struct NetworkFaultTests {
    /// Runs `body` with a fault origin and a harness. The loader's total timeout is long
    /// unless the test is about it: on a starved pool it could pass before the loader
    /// sees the fault the test is about (a reset became a timeout once).
    func withFaults(
        timeout: Duration = .seconds(60), _ body: (FaultOrigin, LoaderHarness, ImageLoader) async throws -> Void
    ) async throws {
        let origin = try FaultOrigin()
        let harness = LoaderHarness()
        defer { origin.stop() }
        let loader = try harness.loader {
            $0.http.timeout = timeout
            $0.http.readTimeout = .milliseconds(800)
            $0.maxAttemptsForErrors = 100  // every attempt reaches the origin
        }
        do {
            try await body(origin, harness, loader)
        } catch {
            await harness.cleanUp()
            throw error
        }
        await harness.cleanUp()
    }

    /// How long a fault may take to become an error, once the loader has answered a good
    /// request. Generous: the whole test run shares two cores, where a load can wait
    /// many seconds for a thread; every fault here would otherwise last until a total
    /// timeout at least twice as long (``withFaults``' 60 s; 120 s where the read timeout
    /// is tested), or forever. `IMAGELOADER_TEST_TIME_SCALE` stretches it under the
    /// sanitizers.
    static let bound = 30.0 * testTimeScale

    /// A good PNG response, cacheable for an hour.
    static let good = FaultOrigin.response(
        headers: [("Content-Type", "image/png"), ("Cache-Control", "max-age=3600")], body: TestImages.png)

    /// The load fails with `expected` within `seconds`; then the good response is cached
    /// and served from the cache (memory or disk), with no new request.
    func expectFailureThenRecovery(
        _ origin: FaultOrigin, _ loader: ImageLoader, path: String, within seconds: Double,
        sourceLocation: SourceLocation = #_sourceLocation, _ expected: (ImageLoadingError.Reason) -> Bool
    ) async throws {
        // A good load first: the time measured is the fault's, not a wait for the test
        // run's busy threads or the HTTP client's start.
        origin.script("/warm", [.send(NetworkFaultTests.good)])
        _ = try await loader.image(for: origin.url("/warm"), options: LoadOptions(cachePolicy: .reload))
        let start = ContinuousClock.now
        let error = await loader.loadError(origin.url(path), sourceLocation: sourceLocation)
        let elapsed = ContinuousClock.now - start
        #expect(
            error.map { expected($0.reason) } == true, "\(String(describing: error))", sourceLocation: sourceLocation)
        #expect(elapsed < .seconds(seconds), "took \(elapsed)", sourceLocation: sourceLocation)
        origin.script(path, [.send(NetworkFaultTests.good)])
        let first = try await loader.image(for: origin.url(path))
        #expect(first.source == .networkToDisk, sourceLocation: sourceLocation)
        #expect(first.image.width == 16 || first.image.width > 0, sourceLocation: sourceLocation)
        let requests = origin.count(path)
        let second = try await loader.image(for: origin.url(path))
        #expect(second.source == .memory, sourceLocation: sourceLocation)
        #expect(origin.count(path) == requests, sourceLocation: sourceLocation)
    }

    @Test("a body sent a byte at a time fails at the total deadline, not when it ends")
    func trickle() async throws {
        try await withFaults(timeout: .milliseconds(1500)) { origin, _, loader in
            let head = FaultOrigin.response(headers: [("Content-Type", "image/png")], contentLength: 100_000)
            // A byte every 0.3 s, never idle for the read timeout, for twice the bound.
            origin.script(
                "/slow", [.send(head), .trickle(count: Int(NetworkFaultTests.bound * 2 / 0.3), interval: 0.3)])
            try await expectFailureThenRecovery(origin, loader, path: "/slow", within: NetworkFaultTests.bound) {
                $0 == .timeout
            }
        }
    }

    @Test("an origin that accepts and never answers fails at the read timeout")
    func silence() async throws {
        // The total timeout far past the bound: only the read timeout can end it in time.
        try await withFaults(timeout: .seconds(120)) { origin, _, loader in
            origin.script("/silent", [.hang])
            try await expectFailureThenRecovery(origin, loader, path: "/silent", within: NetworkFaultTests.bound) {
                $0 == .timeout
            }
        }
    }

    @Test("sub-second timeouts are kept: 300 ms is neither rounded down to nothing nor up to seconds")
    func subSecondTimeout() async throws {
        try await withFaults(timeout: .milliseconds(300)) { origin, harness, loader in
            origin.script("/late", [.sleep(NetworkFaultTests.bound * 2), .send(NetworkFaultTests.good)])
            origin.script("/warm", [.send(NetworkFaultTests.good)])
            _ = try? await loader.image(for: origin.url("/warm"))  // 300 ms may not be enough on a busy run
            let start = ContinuousClock.now
            let error = await loader.loadError(origin.url("/late"))
            #expect(error?.reason == .timeout)
            #expect(ContinuousClock.now - start < .seconds(NetworkFaultTests.bound))
            // A 500 ms connect timeout still connects (rounded down to 0 it failed at once).
            origin.script("/fast", [.send(NetworkFaultTests.good)])
            let quick = try harness.loader {
                $0.http.connectTimeout = .milliseconds(500)
                $0.http.readTimeout = .milliseconds(500)
                $0.cacheDirectory = nil
            }
            #expect(try await quick.image(for: origin.url("/fast")).source == .network)
        }
    }

    @Test("an endless chunked body stops at the response size limit")
    func endlessBody() async throws {
        let origin = try FaultOrigin()
        defer { origin.stop() }
        let harness = LoaderHarness()
        let loader = try harness.loader {
            $0.http.maxResponseBytes = 1 << 20
            $0.http.timeout = .seconds(20)
        }
        let head = Array("HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
        origin.script("/endless", [.send(head), .endlessChunks(size: 8192)])
        try await expectFailureThenRecovery(origin, loader, path: "/endless", within: NetworkFaultTests.bound) {
            $0 == .responseTooLarge(limit: 1 << 20)
        }
        await harness.cleanUp()
    }

    @Test("a reset in the middle of the body is a network error")
    func resetMidBody() async throws {
        try await withFaults { origin, _, loader in
            let head = FaultOrigin.response(
                headers: [("Content-Type", "image/png")], contentLength: TestImages.png.count)
            origin.script("/reset", [.send(head + TestImages.png.prefix(100)), .sleep(0.05), .reset])
            try await expectFailureThenRecovery(origin, loader, path: "/reset", within: NetworkFaultTests.bound) {
                reason in
                switch reason {
                case .network, .invalidResponse: true
                default: false
                }
            }
        }
    }

    @Test("a Content-Length longer than the body is an invalid response, never a cached image")
    func contentLengthTooLong() async throws {
        try await withFaults { origin, _, loader in
            let lying = FaultOrigin.response(
                headers: [("Content-Type", "image/png"), ("Cache-Control", "max-age=3600"), ("Connection", "close")],
                body: TestImages.png, contentLength: TestImages.png.count + 500)
            origin.script("/long", [.send(lying)])
            try await expectFailureThenRecovery(origin, loader, path: "/long", within: NetworkFaultTests.bound) {
                reason in
                if case .invalidResponse = reason { return true }
                if case .network = reason { return true }
                return false
            }
        }
    }

    @Test("a Content-Length shorter than the image gives a truncated image: an error, nothing cached")
    func contentLengthTooShort() async throws {
        try await withFaults { origin, _, loader in
            let lying = FaultOrigin.response(
                headers: [("Content-Type", "image/png"), ("Cache-Control", "max-age=3600")], body: TestImages.png,
                contentLength: TestImages.png.count / 2)
            origin.script("/short", [.send(lying)])
            try await expectFailureThenRecovery(origin, loader, path: "/short", within: NetworkFaultTests.bound) {
                reason in
                if case .decoding(let error) = reason { return error.reason == .truncated }
                return false
            }
        }
    }

    @Test("a redirect loop ends at the redirect limit; a redirect to another scheme is refused")
    func redirects() async throws {
        try await withFaults { origin, _, loader in
            origin.script("/loop", [.send(FaultOrigin.response(status: 302, headers: [("Location", "/loop")]))])
            try await expectFailureThenRecovery(origin, loader, path: "/loop", within: NetworkFaultTests.bound) {
                $0 == .tooManyRedirects(limit: 5)
            }
            origin.script(
                "/ftp", [.send(FaultOrigin.response(status: 301, headers: [("Location", "ftp://127.0.0.1/x.png")]))])
            try await expectFailureThenRecovery(origin, loader, path: "/ftp", within: NetworkFaultTests.bound) {
                $0 == .unsupportedURL
            }
            origin.script(
                "/file", [.send(FaultOrigin.response(status: 301, headers: [("Location", "file:///etc/passwd")]))])
            try await expectFailureThenRecovery(origin, loader, path: "/file", within: NetworkFaultTests.bound) {
                $0 == .unsupportedURL
            }
        }
    }

    @Test("header fields past the size limit are an invalid response")
    func hugeHeaders() async throws {
        try await withFaults { origin, _, loader in
            let fields = (0..<40).map { ("X-Filler-\($0)", String(repeating: "a", count: 2000)) }
            origin.script("/huge", [.send(FaultOrigin.response(headers: fields, body: TestImages.png))])
            try await expectFailureThenRecovery(origin, loader, path: "/huge", within: NetworkFaultTests.bound) {
                if case .invalidResponse = $0 { return true }
                return false
            }
            // Past what the HTTP parser itself accepts: still a typed error.
            let more = (0..<100).map { ("X-Filler-\($0)", String(repeating: "b", count: 1000)) }
            origin.script("/huger", [.send(FaultOrigin.response(headers: more, body: TestImages.png))])
            try await expectFailureThenRecovery(origin, loader, path: "/huger", within: NetworkFaultTests.bound) {
                if case .invalidResponse = $0 { return true }
                if case .network = $0 { return true }
                return false
            }
        }
    }

    @Test("extreme and garbage dates and max-ages are read as invalid, and the entry survives a restart")
    func extremeDates() async throws {
        let cases: [[(String, String)]] = [
            [("Expires", "Sun, 06 Nov 999999999999 08:49:37 GMT")],
            [("Last-Modified", "Sun, 06 Nov 999999999999 08:49:37 GMT")],
            [("Date", "Sun, 06 Nov -999999999999999 08:49:37 GMT"), ("Expires", "0")],
            [("Cache-Control", "max-age=999999999999999999999999999, stale-while-revalidate=99999999999999999999")],
            [("Age", "1e400"), ("Cache-Control", "max-age=60")],
            [("Age", "99999999999999999999999"), ("Cache-Control", "max-age=60")],
            [("Expires", "Thu, 32 Dec 2094 99:99:99 GMT"), ("Last-Modified", "garbage")],
            [("Date", "Sun, 06 Nov 9999 23:59:60 GMT"), ("Cache-Control", "max-age=2147483648")],
        ]
        // Sixteen loads that must succeed.
        try await withFaults { origin, harness, loader in
            for (index, fields) in cases.enumerated() {
                let path = "/dates\(index)"
                origin.script(
                    path,
                    [
                        .send(
                            FaultOrigin.response(
                                headers: [("Content-Type", "image/png")] + fields, body: TestImages.png))
                    ])
                let loaded = try await loader.image(for: origin.url(path))
                #expect(loaded.image.width > 0, "\(fields)")
                // A new loader on the same folder reads the stored entry back.
                let again = try harness.loader()
                let reloaded = try await again.image(for: origin.url(path))
                #expect(reloaded.image == loaded.image, "\(fields)")
            }
        }
    }

    @Test("a 304 to a request that had no validators is an error, and caches nothing")
    func unconditional304() async throws {
        try await withFaults { origin, _, loader in
            origin.script("/304", [.send(FaultOrigin.response(status: 304, headers: [("ETag", "\"x\"")]))])
            try await expectFailureThenRecovery(origin, loader, path: "/304", within: NetworkFaultTests.bound) {
                $0 == .httpStatus(304)
            }
        }
    }

    @Test("an empty 200 is a typed decoding error")
    func empty200() async throws {
        try await withFaults { origin, _, loader in
            origin.script("/empty", [.send(FaultOrigin.response(headers: [("Content-Type", "image/png")]))])
            try await expectFailureThenRecovery(origin, loader, path: "/empty", within: NetworkFaultTests.bound) {
                reason in
                if case .decoding = reason { return true }
                if case .contentType = reason { return true }
                return false
            }
        }
    }
}
