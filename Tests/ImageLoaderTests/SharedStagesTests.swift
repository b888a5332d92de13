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

/// Work shared per stage: one download per URL for every product, one decode per plan,
/// priorities and prefetching through the stages, the event order around stale
/// entries, and the races of callers that arrive and leave at once.
@Suite("Shared stages")
struct SharedStagesTests: PhotoFixtures {
    @Test("an original and two thumbnail sizes asked together: 1 request, 1 decode, 2 resamples")
    func originalAndThumbnails() async throws {
        try await withOrigin { origin, harness in
            let answer = Gate()
            origin.serve(
                "/p.jpg",
                .init(headers: [Self.jpegType, ("Cache-Control", "max-age=100")], body: Self.photo, gate: answer))
            let loader = try harness.loader()
            let url = origin.url("/p.jpg")
            async let original = loader.image(for: url)
            async let big = loader.thumbnail(for: url, options: large)
            async let little = loader.thumbnail(for: url, options: small)
            try await waitUntil("all three on one download") { loader.context.downloads.counts.joined == 2 }
            answer.open()
            let (o, b, l) = try await (original, big, little)
            let statistics = loader.statistics
            #expect(origin.count("/p.jpg") == 1)
            #expect(statistics.requests == 1)
            #expect(statistics.decodes <= 2)
            #expect(statistics.thumbnailsMade == 2)
            // The original as decoded alone; each thumbnail resampled from it, the size
            // it has alone, and close to the one made alone (which scales in the DCT).
            let decoder = ImageDecoder()
            let full = try decoder.decode(.bytes(Self.photo))
            #expect(o.image.pixels == full.pixels)
            for (made, options) in [(b, large), (l, small)] {
                #expect(made.image.pixels == (try full.thumbnail(options: options)).pixels)
                let alone = try decoder.thumbnail(.bytes(Self.photo), options: options)
                #expect((made.image.width, made.image.height) == (alone.width, alone.height))
                #expect(Self.meanDifference(made.image, alone) < 4)
                #expect(made.encoded != nil)
            }
        }
    }

    @Test("two thumbnail sizes without the original: one download, one reduced decode, two resamples")
    func thumbnailsShareAReducedDecode() async throws {
        try await withOrigin { origin, harness in
            let answer = Gate()
            origin.serve(
                "/t.jpg",
                .init(headers: [Self.jpegType, ("Cache-Control", "max-age=100")], body: Self.photo, gate: answer))
            let loader = try harness.loader()
            let url = origin.url("/t.jpg")
            async let big = loader.thumbnail(for: url, options: large)
            async let little = loader.thumbnail(for: url, options: small)
            try await waitUntil("both on one download") { loader.context.downloads.counts.joined == 1 }
            answer.open()
            let (b, l) = try await (big, little)
            #expect(origin.count("/t.jpg") == 1)
            #expect(loader.statistics.decodes == 1)
            #expect(loader.statistics.thumbnailsMade == 2)
            #expect((b.image.width, b.image.height) == (128, 96))
            #expect((l.image.width, l.image.height) == (64, 48))
            // The decode was shrunk in the DCT: half size serves both (128 needs 256 wide).
            let reduced = try ImageDecoder().decode(
                .bytes(Self.photo), options: DecodingOptions(), reducedFor: [large, small])
            #expect((reduced.image.width, reduced.originalWidth) == (400, 800))
            for (made, options) in [(b, large), (l, small)] {
                #expect(made.image.pixels == (try reduced.thumbnail(options: options)).pixels)
                // Close to the thumbnail resampled from the full-size image.
                let reference = try ImageDecoder().decode(.bytes(Self.photo)).thumbnail(options: options)
                #expect(Self.meanDifference(made.image, reference) < 4)
            }
        }
    }

    @Test("a product that leaves does not cancel the download another product waits for; the last one does")
    func cancellationPerStage() async throws {
        try await withOrigin { origin, harness in
            let (answer, aloneAnswer) = (Gate(), Gate())
            origin.serve("/c.jpg", .init(headers: [Self.jpegType], body: Self.photo, gate: answer))
            origin.serve("/alone.jpg", .init(headers: [Self.jpegType], body: Self.photo, gate: aloneAnswer))
            let loader = try harness.loader()
            let url = origin.url("/c.jpg")
            let leaving = Task { try await loader.thumbnail(for: url, options: large) }
            let staying = Task { try await loader.image(for: url) }
            try await waitUntil("both on one download") { loader.context.downloads.counts.joined == 1 }
            leaving.cancel()
            _ = await leaving.result
            answer.open()
            let stayed = try await staying.value
            #expect(stayed.source == .network || stayed.source == .networkToDisk)
            #expect(origin.count("/c.jpg") == 1)
            // Alone, leaving cancels the download: nothing decoded, nothing cached.
            let alone = Task { try await loader.thumbnail(for: origin.url("/alone.jpg"), options: large) }
            try await waitUntil("the request at the origin") { origin.count("/alone.jpg") == 1 }
            alone.cancel()
            _ = await alone.result
            aloneAnswer.open()
            await loader.waitForBackgroundWork()
            #expect(loader.peek(origin.url("/alone.jpg"), product: .thumbnail(large)) == nil)
            #expect(loader.statistics.thumbnailsMade == 0)
        }
    }

    @Test("setPriority reaches a thumbnail, and a shared download runs at its highest waiter's priority")
    func priorities() async throws {
        try await withOrigin { origin, harness in
            for path in ["/x.jpg", "/y.jpg"] { origin.serve(path, .init(headers: [Self.jpegType], body: Self.photo)) }
            let release = Gate()
            origin.serve(
                "/block.png", .init(headers: [("Content-Type", "image/png")], body: TestImages.png, gate: release))
            let loader = try harness.loader { $0.concurrentLoads = 1 }
            let block = Task { try await loader.image(for: origin.url("/block.png")) }
            try await waitUntil("the blocking request") { origin.count("/block.png") == 1 }
            let x = Task {
                try await loader.thumbnail(
                    for: origin.url("/x.jpg"), options: large, loadOptions: LoadOptions(priority: .low))
            }
            let y = Task { try await loader.image(for: origin.url("/y.jpg"), options: LoadOptions(priority: .normal)) }
            try await waitUntil("both queued") { loader.context.network.waiting == 2 }
            loader.setPriority(.veryHigh, for: origin.url("/x.jpg"), product: .thumbnail(large))
            release.open()
            _ = try await (block.value, x.value, y.value)
            let order = origin.arrivalOrder
            #expect(order == ["/block.png", "/x.jpg", "/y.jpg"], "\(order)")
        }
    }

    @Test("prefetch and cancelPrefetching reach thumbnails")
    func prefetchThumbnails() async throws {
        try await withOrigin { origin, harness in
            origin.serve(
                "/p1.jpg", .init(headers: [Self.jpegType, ("Cache-Control", "max-age=100")], body: Self.photo))
            let secondAnswer = Gate()
            origin.serve(
                "/p2.jpg",
                .init(headers: [Self.jpegType, ("Cache-Control", "max-age=100")], body: Self.photo, gate: secondAnswer))
            let loader = try harness.loader()
            let (first, second) = (origin.url("/p1.jpg"), origin.url("/p2.jpg"))
            loader.prefetch([first], product: .thumbnail(small))
            await loader.waitForBackgroundWork()
            #expect(loader.peek(first, product: .thumbnail(small))?.width == 64)
            #expect(loader.peek(first) == nil)  // the thumbnail was made, not the original kept
            #expect(try await loader.thumbnail(for: first, options: small).source == .memory)
            // The memory cache finds it by URL and options, with a fragment or without;
            // and removes it so.
            let cache = try #require(loader.memoryCache)
            let withFragment = try #require(URL(string: first.absoluteString + "#top"))
            #expect(cache.peek(withFragment, product: .thumbnail(small))?.width == 64)
            cache.remove(withFragment, product: .thumbnail(small))
            #expect(loader.peek(first, product: .thumbnail(small)) == nil)
            loader.prefetch([second], product: .thumbnail(small))
            loader.cancelPrefetching([second], product: .thumbnail(small))
            await loader.waitForBackgroundWork()
            secondAnswer.open()
            #expect(loader.peek(second, product: .thumbnail(small)) == nil)
            #expect(loader.statistics.thumbnailsMade == 1)
        }
    }

    @Test("a stale-while-revalidate caller that leaves at once never cancels the revalidation", arguments: 0..<5)
    func revalidationSurvivesTheCaller(round: Int) async throws {
        try await withOrigin { origin, harness in
            // Each revalidation is held at the origin until its caller has left.
            let gates = Lock<[Gate]>([])
            origin.route("/swr.png") { request, count in
                if request.header("If-None-Match") == "\"s\"" {
                    return .init(
                        status: 304,
                        headers: [("ETag", "\"s\""), ("Cache-Control", "max-age=10, stale-while-revalidate=100")],
                        gate: gates.withLock { $0[count - 2] })
                }
                return .init(
                    headers: [
                        ("Content-Type", "image/png"), ("ETag", "\"s\""),
                        ("Cache-Control", "max-age=10, stale-while-revalidate=100"),
                    ],
                    body: TestImages.png)
            }
            let loader = try harness.loader()
            let url = origin.url("/swr.png")
            _ = try await loader.image(for: url)
            for _ in 0..<10 {
                let gate = Gate()
                gates.withLock { $0.append(gate) }
                harness.clock.advance(by: 20)
                // Takes the stale image and leaves at once.
                for await event in loader.events(for: url) {
                    #expect(event.image?.freshness == .staleWhileRevalidate)
                    break
                }
                gate.open()
                await loader.waitForBackgroundWork()
                let again = try await loader.image(for: url)
                #expect(again.source == .memory && again.freshness == .fresh)
            }
            #expect(origin.count("/swr.png") == 11)
        }
    }

    @Test("a caller that arrives and leaves at once is unregistered: the load is cancelled", arguments: 0..<5)
    func registrationOrder(round: Int) async throws {
        try await withOrigin { origin, harness in
            // Nothing is answered until the end (the origin opens its gates when it stops).
            let never = Gate()
            for n in 0..<40 {
                origin.serve(
                    "/r\(n).png", .init(headers: [("Content-Type", "image/png")], body: TestImages.png, gate: never))
            }
            let loader = try harness.loader()
            for n in 0..<40 {
                let task = Task { for await _ in loader.events(for: origin.url("/r\(n).png")) {} }
                task.cancel()
                await task.value
            }
            await loader.waitForBackgroundWork()
            for n in 0..<40 { #expect(loader.peek(origin.url("/r\(n).png")) == nil) }
            #expect(loader.statistics.decodes == 0)
        }
    }

    @Test("events for every staleness case: the stale image first, then the request, then the outcome")
    func staleEventOrder() async throws {
        try await withOrigin { origin, harness in
            let version = VersionBox()
            origin.route("/n.png") { _, _ in
                .init(
                    headers: [
                        ("Content-Type", "image/png"), ("Cache-Control", "no-cache"), ("ETag", "\"\(version.value)\""),
                    ],
                    body: version.value == 1 ? TestImages.png : TestImages.otherPNG)
            }
            let loader = try harness.loader()
            let url = origin.url("/n.png")
            _ = try await loader.image(for: url)
            version.value = 2
            #expect(
                await loader.allEvents(for: url).moments == [
                    .cached(.memory, .needsRevalidation), .sending(hadCache: true), .completed(.networkToDisk),
                ])
            // image(for:) never answers with an image it may not use: it waits for the origin.
            version.value = 3
            let answer = try await loader.image(for: url)
            #expect(answer.source == .networkToDisk && answer.freshness == .fresh)
            // Within stale-while-revalidate: the stale image, usable, then the revalidation's events.
            origin.route("/w.png") { request, _ in
                let headers = [("ETag", "\"w\""), ("Cache-Control", "max-age=10, stale-while-revalidate=100")]
                if request.header("If-None-Match") == "\"w\"" { return .init(status: 304, headers: headers) }
                return .init(headers: [("Content-Type", "image/png")] + headers, body: TestImages.png)
            }
            _ = try await loader.image(for: origin.url("/w.png"))
            harness.clock.advance(by: 20)
            #expect(
                await loader.allEvents(for: origin.url("/w.png")).moments == [
                    .cached(.memory, .staleWhileRevalidate), .sending(hadCache: true), .completed(.networkNotModified),
                ])
            // A user's reload: the cached image is offered, then asked about.
            let reload = await loader.allEvents(for: url, options: LoadOptions(cachePolicy: .revalidate)).moments
            #expect(reload.first == .cached(.memory, .needsRevalidation))
            #expect(reload.dropFirst().first == .sending(hadCache: true))
        }
    }
}
