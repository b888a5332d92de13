import Foundation
import RasterImage
import TestSupport
import Testing

@testable import ImageLoader

/// The pipeline under load: shared work, cancellation, scheduling, prefetching.
@Suite("The pipeline under load")
struct PipelineTests {
    static let png = ("Content-Type", "image/png")

    @Test("1,000 concurrent loads of 10 URLs make exactly 10 requests and 10 decodes")
    func coalescing() async throws {
        try await withOrigin { origin, harness in
            // The origin holds its answers until every load has joined one of the ten.
            let answers = Gate()
            for n in 0..<10 {
                origin.serve(
                    "/c\(n).png",
                    .init(headers: [Self.png, ("Cache-Control", "max-age=100")], body: TestImages.png, gate: answers))
            }
            let loader = try harness.loader()
            let sources = await withTaskGroup(of: LoadedImage.Source?.self) { group in
                for i in 0..<1000 {
                    group.addTask { try? await loader.image(for: origin.url("/c\(i % 10).png")).source }
                }
                try? await waitUntil("every load joined") { loader.statistics.coalesced == 990 }
                answers.open()
                var sources: [LoadedImage.Source?] = []
                for await source in group { sources.append(source) }
                return sources
            }
            #expect(sources.count == 1000)
            #expect(sources.allSatisfy { $0 != nil })
            for n in 0..<10 { #expect(origin.count("/c\(n).png") == 1) }
            let statistics = loader.statistics
            #expect(statistics.requests == 10)
            #expect(statistics.decodes == 10)
            #expect(statistics.coalesced == 990)
        }
    }

    @Test("a cancelled caller stops waiting at once, and work nobody waits for stops")
    func cancellation() async throws {
        try await withOrigin { origin, harness in
            let answer = Gate()
            origin.serve(
                "/slow.png",
                .init(headers: [Self.png, ("Cache-Control", "max-age=100")], body: TestImages.png, gate: answer))
            let loader = try harness.loader()
            let caller = Task { try await loader.image(for: origin.url("/slow.png")) }
            try await waitUntil("the request in flight") { origin.count("/slow.png") == 1 }
            caller.cancel()
            // The wait ends with the cancellation, while the origin still holds its answer.
            let result = await caller.result
            guard case .failure(let error as ImageLoadingError) = result else {
                Issue.record("got \(result)")
                return
            }
            #expect(error.reason == .cancelled)
            // The origin answers after everyone left: nothing is decoded or stored.
            answer.open()
            await loader.waitForBackgroundWork()
            #expect(loader.statistics.decodes == 0)
            #expect(loader.diskCache?.statistics.entries == 0)
            #expect(loader.peek(origin.url("/slow.png")) == nil)
        }
    }

    @Test("when one of two callers leaves, the other still gets the image from the same request")
    func cancellationWithAnotherCaller() async throws {
        try await withOrigin { origin, harness in
            let answer = Gate()
            origin.serve(
                "/shared.png",
                .init(headers: [Self.png, ("Cache-Control", "max-age=100")], body: TestImages.png, gate: answer))
            let loader = try harness.loader()
            let leaving = Task { try await loader.image(for: origin.url("/shared.png")) }
            let staying = Task { try await loader.image(for: origin.url("/shared.png")) }
            try await waitUntil("both callers on the request") {
                origin.count("/shared.png") == 1 && loader.statistics.coalesced == 1
            }
            leaving.cancel()
            _ = await leaving.result
            answer.open()
            #expect(try await staying.value.source == .networkToDisk)
            #expect(origin.count("/shared.png") == 1)
        }
    }

    @Test("a load asked to finish fills the caches even when its caller leaves")
    func finishesWhenCancelled() async throws {
        try await withOrigin { origin, harness in
            let answer = Gate()
            origin.serve(
                "/fill.png",
                .init(headers: [Self.png, ("Cache-Control", "max-age=100")], body: TestImages.png, gate: answer))
            let loader = try harness.loader()
            let options = LoadOptions(finishesWhenCancelled: true)
            let caller = Task { try await loader.image(for: origin.url("/fill.png"), options: options) }
            try await waitUntil("the request in flight") { origin.count("/fill.png") == 1 }
            caller.cancel()
            _ = await caller.result
            answer.open()
            await loader.waitForBackgroundWork()
            #expect(loader.statistics.decodes == 1)
            #expect(loader.diskCache?.statistics.entries == 1)
            #expect(try await loader.image(for: origin.url("/fill.png")).source == .memory)
        }
    }

    /// Queues loads behind a single slot held by a request the origin holds; returns the
    /// order in which the origin received them once it lets the first one go.
    func queuedOrder(
        order: QueueOrder, priorities: [(String, LoadPriority)], raise: (String, LoadPriority)? = nil
    ) async throws -> [String] {
        var result: [String] = []
        try await withOrigin { origin, harness in
            let release = Gate()
            origin.serve("/block.png", .init(headers: [Self.png], body: TestImages.png, gate: release))
            for (path, _) in priorities { origin.serve(path, .init(headers: [Self.png], body: TestImages.png)) }
            let loader = try harness.loader {
                $0.concurrentLoads = 1
                $0.queueOrder = order
            }
            let blocker = Task { try await loader.image(for: origin.url("/block.png")) }
            // The slot is held once the origin has the request; each load is queued, in
            // this order, before the next is asked for.
            try await waitUntil("the blocking request") { origin.count("/block.png") == 1 }
            var waiting: [Task<LoadedImage, any Error>] = []
            for (index, (path, priority)) in priorities.enumerated() {
                waiting.append(
                    Task { try await loader.image(for: origin.url(path), options: LoadOptions(priority: priority)) })
                try await waitUntil("\(path) queued") { loader.context.network.waiting == index + 1 }
            }
            if let (path, priority) = raise { loader.setPriority(priority, for: origin.url(path)) }
            release.open()
            _ = try await blocker.value
            for task in waiting { _ = try await task.value }
            result = origin.arrivalOrder.filter { $0 != "/block.png" }
        }
        return result
    }

    @Test("queued loads go by priority, then first come first served")
    func fifo() async throws {
        let order = try await queuedOrder(
            order: .fifo, priorities: [("/a", .low), ("/b", .normal), ("/c", .high), ("/d", .normal)])
        #expect(order == ["/c", "/b", "/d", "/a"])
    }

    @Test("LIFO serves the newest of a priority first")
    func lifo() async throws {
        let order = try await queuedOrder(
            order: .lifo, priorities: [("/a", .low), ("/b", .normal), ("/c", .high), ("/d", .normal)])
        #expect(order == ["/c", "/d", "/b", "/a"])
    }

    @Test("a priority raised while queued takes effect")
    func priorityChange() async throws {
        let order = try await queuedOrder(
            order: .fifo, priorities: [("/e", .low), ("/f", .low), ("/g", .normal)], raise: ("/f", .veryHigh))
        #expect(order == ["/f", "/g", "/e"])
    }

    @Test("prefetching fills the caches at low priority; a cancelled prefetch never asks")
    func prefetch() async throws {
        try await withOrigin { origin, harness in
            for path in ["/p1.png", "/p2.png", "/p3.png"] {
                origin.serve(path, .init(headers: [Self.png, ("Cache-Control", "max-age=100")], body: TestImages.png))
            }
            let release = Gate()
            origin.serve("/block.png", .init(headers: [Self.png], body: TestImages.png, gate: release))
            let loader = try harness.loader { $0.concurrentLoads = 1 }
            let blocker = Task { try await loader.image(for: origin.url("/block.png")) }
            try await waitUntil("the blocking request") { origin.count("/block.png") == 1 }
            loader.prefetch([origin.url("/p1.png"), origin.url("/p2.png"), origin.url("/p3.png")])
            loader.cancelPrefetching([origin.url("/p3.png")])
            release.open()
            _ = try await blocker.value
            await loader.waitForBackgroundWork()
            #expect(origin.count("/p1.png") == 1 && origin.count("/p2.png") == 1)
            #expect(origin.count("/p3.png") == 0)
            #expect(try await loader.image(for: origin.url("/p1.png")).source == .memory)
        }
    }

    @Test("failedToFetch and peek answer synchronously")
    func synchronousQueries() async throws {
        try await withOrigin { origin, harness in
            origin.route("/flip.png") { _, count in
                count == 1 ? .init(status: 500) : .init(headers: [Self.png], body: TestImages.png)
            }
            let loader = try harness.loader { $0.maxAttemptsForErrors = 5 }
            let url = origin.url("/flip.png")
            #expect(!loader.failedToFetch(url))
            _ = try? await loader.image(for: url)
            #expect(loader.failedToFetch(url))
            #expect(loader.peek(url) == nil)
            _ = try await loader.image(for: url)
            #expect(!loader.failedToFetch(url))
            #expect(loader.peek(url)?.width == 48)
        }
    }

    @Test("statistics count hits, misses, requests, 304s, bytes and decodes")
    func statistics() async throws {
        try await withOrigin { origin, harness in
            origin.route("/s.png") { request, _ in
                request.header("If-None-Match") == "\"s\""
                    ? .init(status: 304, headers: [("ETag", "\"s\"")])
                    : .init(
                        headers: [Self.png, ("ETag", "\"s\""), ("Cache-Control", "max-age=10")], body: TestImages.png)
            }
            let loader = try harness.loader()
            let url = origin.url("/s.png")
            _ = try await loader.image(for: url)  // miss, request, decode
            _ = try await loader.image(for: url)  // memory hit
            harness.clock.advance(by: 20)
            _ = try await loader.image(for: url)  // miss (stale), request, 304
            let statistics = loader.statistics
            #expect(statistics.misses == 2)
            #expect(statistics.memoryHits == 1)
            #expect(statistics.requests == 2)
            #expect(statistics.notModified == 1)
            #expect(statistics.decodes == 1)
            #expect(statistics.bytesReceived == TestImages.png.count)
        }
    }
}
