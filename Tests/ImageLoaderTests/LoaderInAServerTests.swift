import AsyncHTTPClient
import Foundation
import ImageLoaderSupport
import Logging
import NIOCore
import RasterImage
import ServiceLifecycle
import TestSupport
import Testing

@testable import ImageLoader

/// The API a server uses: bytes in hand (decoded and thumbnailed in place), the
/// original's bytes through the cache (`data(for:)`), per-request header fields and
/// deadlines, the application's own HTTP client, and a `ServiceGroup`'s shutdown.
@Suite("The loader in a server")
struct LoaderInAServerTests: PhotoFixtures {
    @Test("bytes from a ByteBuffer: decoded and thumbnailed in place, with the loader's limits and memory cache")
    func bytesInput() async throws {
        try await withOrigin { origin, harness in
            let loader = try harness.loader()
            let buffer = ByteBuffer(bytes: Self.photo)
            let decoded = try await loader.decode(buffer.readableBytesView, declaredContentType: "image/jpeg")
            #expect(decoded.pixels == (try ImageDecoder().decode(.bytes(Self.photo))).pixels)
            #expect(try ImageDecoder().decode(.bytes(buffer.readableBytesView)).pixels == decoded.pixels)

            let first = try await loader.thumbnail(of: buffer.readableBytesView, options: large)
            #expect(first.source == .bytes)
            #expect(first.image.pixels == (try ImageDecoder().thumbnail(.bytes(Self.photo), options: large)).pixels)
            let encoded = try #require(first.encoded)
            #expect(encoded.format == .jpeg)
            let again = try await loader.thumbnail(of: Self.photo[...], options: large)
            #expect(again.source == .memory)
            #expect(again.encoded?.bytes == encoded.bytes)
            #expect(loader.statistics.thumbnailsMade == 1)

            await #expect(throws: ImageLoadingError.self) {
                try await loader.decode(buffer.readableBytesView, declaredContentType: "image/png")
            }
            // The loader's limits hold for every thumbnail it makes, from bytes or from a URL.
            let limited = try harness.loader { $0.decodingOptions.limits.maxPixelsPerFrame = 1000 }
            origin.serve("/limited.jpg", .init(headers: [Self.jpegType], body: Self.photo))
            for attempt in ["bytes", "url"] {
                do {
                    if attempt == "bytes" {
                        _ = try await limited.thumbnail(of: buffer.readableBytesView, options: small)
                    } else {
                        _ = try await limited.thumbnail(for: origin.url("/limited.jpg"), options: small)
                    }
                    Issue.record("over the limit, yet decoded from \(attempt)")
                } catch let error as ImageLoadingError {
                    guard case .decoding(let reason) = error.reason, case .tooManyPixels = reason.reason else {
                        Issue.record("got \(error) from \(attempt)")
                        continue
                    }
                }
            }
        }
    }

    @Test("a thumbnail's encoded bytes come back from a memory hit and count in the cache's cost")
    func encodedFromMemory() async throws {
        try await withOrigin { origin, harness in
            origin.serve("/e.jpg", .init(headers: [Self.jpegType, ("Cache-Control", "max-age=100")], body: Self.photo))
            let loader = try harness.loader()
            let url = origin.url("/e.jpg")
            let made = try await loader.thumbnail(for: url, options: large)
            let hit = try await loader.thumbnail(for: url, options: large)
            #expect(hit.source == .memory)
            let bytes = try #require(made.encoded?.bytes)
            #expect(hit.encoded?.bytes == bytes)
            let usage = try #require(loader.memoryCache?.usage)
            #expect(usage.bytes == made.image.cost + bytes.count)
        }
    }

    @Test("data(for:): the original's bytes and headers, through the disk cache, sharing a request in flight")
    func dataForURL() async throws {
        try await withOrigin { origin, harness in
            let answer = Gate()
            origin.serve(
                "/d.jpg",
                .init(
                    headers: [Self.jpegType, ("Cache-Control", "max-age=100"), ("ETag", "\"d\"")], body: Self.photo,
                    gate: answer))
            let loader = try harness.loader()
            let url = origin.url("/d.jpg")
            async let data = loader.data(for: url)
            async let image = loader.image(for: url)
            try await waitUntil("both on one download") { loader.context.downloads.counts.joined == 1 }
            answer.open()
            let (d, i) = try await (data, image)
            #expect(origin.count("/d.jpg") == 1)
            #expect(d.bytes == Self.photo && d.format == .jpeg && d.value("etag") == "\"d\"")
            #expect(i.image.width == 800)
            let again = try await loader.data(for: url)
            #expect(again.source == .disk && again.bytes == Self.photo)
            #expect(origin.count("/d.jpg") == 1)
        }
    }

    @Test("data(for:) is a load of the pipeline: callers share it, and its revalidation outlives the caller")
    func dataSharesTheLoad() async throws {
        try await withOrigin { origin, harness in
            let held = Gate()
            origin.route("/sd.png") { request, count in
                if request.header("If-None-Match") == "\"sd\"" {
                    return .init(
                        status: 304,
                        headers: [("ETag", "\"sd\""), ("Cache-Control", "max-age=10, stale-while-revalidate=100")],
                        gate: held)
                }
                return .init(
                    headers: [
                        ("Content-Type", "image/png"), ("ETag", "\"sd\""),
                        ("Cache-Control", "max-age=10, stale-while-revalidate=100"),
                    ],
                    body: TestImages.png)
            }
            let loader = try harness.loader()
            let url = origin.url("/sd.png")
            #expect(try await loader.data(for: url).source == .networkToDisk)
            harness.clock.advance(by: 20)
            // The stale bytes at once; the caller has left, the revalidation is held at the origin.
            let stale = try await loader.data(for: url)
            #expect(stale.freshness == .staleWhileRevalidate && stale.bytes == TestImages.png)
            try await waitUntil("the revalidation at the origin") { origin.count("/sd.png") == 2 }
            // Another caller joins the load under way and gets what it handed out.
            let joined = loader.statistics.coalesced
            let second = try await loader.data(for: url)
            #expect(second.freshness == .staleWhileRevalidate)
            #expect(loader.statistics.coalesced == joined + 1)
            held.open()
            await loader.waitForBackgroundWork()
            #expect(loader.statistics.notModified == 1)
            let fresh = try await loader.data(for: url)
            #expect(fresh.source == .disk && fresh.freshness == .fresh)
            #expect(origin.count("/sd.png") == 2)
        }
    }

    @Test("per-request header fields reach the origin and separate the work; a deadline ends the wait")
    func headersAndDeadline() async throws {
        try await withOrigin { origin, harness in
            origin.serve("/h.png", .init(headers: [("Content-Type", "image/png")], body: TestImages.png))
            // Held until the origin stops: only the deadline can end the wait.
            origin.serve(
                "/slow.png", .init(headers: [("Content-Type", "image/png")], body: TestImages.png, gate: Gate()))
            let loader = try harness.loader()
            _ = try await loader.image(
                for: origin.url("/h.png"), options: LoadOptions(headers: [HeaderField("X-Tenant", "a")]))
            #expect(origin.requests("/h.png").first?.header("X-Tenant") == "a")
            let deadline = ContinuousClock.now + .milliseconds(300)
            do {
                _ = try await loader.image(for: origin.url("/slow.png"), options: LoadOptions(deadline: deadline))
                Issue.record("answered after the deadline")
            } catch let error as ImageLoadingError {
                #expect(error.reason == .timeout)
                // The loader's own timeout is 120 s: an end well before it is the deadline's,
                // however long a busy machine (the other suites alongside) took to wake us.
                #expect(ContinuousClock.now - deadline < .seconds(60))
            }
        }
    }

    @Test("a loader on the application's own HTTPClient leaves it running after shutdown")
    func ownHTTPClient() async throws {
        try await withOrigin { origin, harness in
            origin.serve("/o.png", .init(headers: [("Content-Type", "image/png")], body: TestImages.png))
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            let loader = try harness.loader { $0.httpClient = client }
            #expect(try await loader.image(for: origin.url("/o.png")).image.width == 48)
            try await loader.shutdown()
            let response = try await client.execute(
                HTTPClientRequest(url: origin.url("/o.png").absoluteString), timeout: .seconds(5))
            #expect(response.status == .ok)
            try await client.shutdown()
        }
    }

    @Test("in a ServiceGroup, graceful shutdown finishes the load in flight, then shuts the loader down")
    func serviceShutdown() async throws {
        try await withOrigin { origin, harness in
            let answer = Gate()
            origin.serve("/s.png", .init(headers: [("Content-Type", "image/png")], body: TestImages.png, gate: answer))
            let loader = try harness.loader()
            let group = ServiceGroup(services: [loader], logger: Logger(label: "test"))
            let running = Task { try await group.run() }
            let load = Task { try await loader.image(for: origin.url("/s.png")) }
            try await waitUntil("the request in flight") { origin.count("/s.png") == 1 }
            await group.triggerGracefulShutdown()
            // The origin answers once the shutdown has begun: the load in flight still completes.
            try await waitUntil("the shutdown under way") { loader.isShuttingDown }
            answer.open()
            try await running.value
            #expect(try await load.value.image.width == 48)
            do {
                _ = try await loader.image(for: origin.url("/s.png"), options: LoadOptions(cachePolicy: .reload))
                Issue.record("loaded after shutdown")
            } catch let error as ImageLoadingError {
                #expect(error.reason == .shutDown)
            }
        }
    }
}
