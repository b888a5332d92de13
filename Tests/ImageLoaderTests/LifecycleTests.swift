import Dispatch
import Foundation
import ImageLoaderSupport
import RasterImage
import TestSupport
import Testing

@testable import ImageLoader

/// Prefetches cancel only what they started; shutdown waits for everything in flight.
@Suite("Lifecycle: prefetches and shutdown")
struct LifecycleTests {
    static let png = ("Content-Type", "image/png")

    @Test("cancelPrefetching does not cancel a stale-while-revalidate revalidation a caller started")
    func prefetchLeavesRevalidation() async throws {
        try await withOrigin { origin, harness in
            let answer = Gate()
            origin.route("/p.png") { _, count in
                count == 1
                    ? .init(
                        headers: [
                            Self.png, ("Cache-Control", "max-age=10, stale-while-revalidate=100"), ("ETag", "\"p\""),
                        ],
                        body: TestImages.png)
                    : .init(status: 304, headers: [("ETag", "\"p\""), ("Cache-Control", "max-age=10")], gate: answer)
            }
            let loader = try harness.loader()
            let url = origin.url("/p.png")
            _ = try await loader.image(for: url)
            harness.clock.advance(by: 50)
            // The stale image at once; the revalidation is with the origin, which holds it.
            #expect(try await loader.image(for: url).freshness == .staleWhileRevalidate)
            try await waitUntil("the revalidation at the origin") { origin.count("/p.png") == 2 }
            loader.prefetch([url])  // joins nothing new: the revalidation is under way
            loader.cancelPrefetching([url])
            answer.open()
            await loader.waitForBackgroundWork()
            #expect(loader.statistics.notModified == 1)
            // Revalidated: fresh from memory, no request.
            #expect(try await loader.image(for: url).source == .memory)
            #expect(origin.count("/p.png") == 2)
            try await loader.shutdown()
        }
    }

    @Test("shutdown waits for data(for:) in flight: it completes, and its entry is on disk")
    func shutdownWaitsForData() async throws {
        try await withOrigin { origin, harness in
            let answer = Gate()
            origin.serve(
                "/d.png",
                .init(headers: [Self.png, ("Cache-Control", "max-age=100")], body: TestImages.png, gate: answer))
            let loader = try harness.loader()
            let url = origin.url("/d.png")
            let data = Task { try await loader.data(for: url) }
            try await waitUntil("the request at the origin") { origin.count("/d.png") == 1 }
            let shutdown = Task { try await loader.shutdown() }
            try await waitUntil("shutdown under way") { loader.isShuttingDown }
            answer.open()
            try await shutdown.value
            // Shutdown returned only after the bytes were stored.
            #expect(try await data.value.source == .networkToDisk)
            let cache = try DiskCache(directory: harness.directory, clock: { harness.clock.now })
            #expect(cache.response(for: url.absoluteString)?.body == TestImages.png)
            // And work asked for afterwards is refused.
            await #expect(throws: ImageLoadingError(.shutDown, url: url.absoluteString)) {
                try await loader.data(for: url)
            }
        }
    }

    @Test("shutdown waits for decode(_:) and thumbnail(of:), those running and those queued for a worker")
    func shutdownWaitsForDecodes() async throws {
        let harness = LoaderHarness()
        defer { Task { await harness.cleanUp() } }
        let decoder = HeldDecoder()
        let loader = try harness.loader {
            $0.decoder = decoder
            $0.decodingThreads = 1
        }
        // One decode holds the only worker; a thumbnail and a second decode queue behind it.
        let running = Task { try await loader.decode(TestImages.png) }
        try await waitUntil("the first decode on the worker") { decoder.entered == 1 }
        let thumbnail = Task {
            try await loader.thumbnail(of: TestImages.png, options: ThumbnailOptions(maxPixelSize: 8))
        }
        let queued = Task { try await loader.decode(TestImages.otherPNG) }
        try await waitUntil("both queued for the worker") { loader.context.decoding.waiting == 2 }
        let shutdown = Task { try await loader.shutdown() }
        try await waitUntil("shutdown under way") { loader.context.operations.isClosed }
        decoder.release()
        try await shutdown.value
        #expect(try await running.value.width == 48)
        #expect(try await thumbnail.value.image.width == 8)
        #expect(try await queued.value.width > 0)
        #expect(loader.context.operations.running == 0)
    }
}

/// A decoder whose first decode holds its worker thread until the test releases it.
final class HeldDecoder: ImageDecoding {
    private let gate = DispatchSemaphore(value: 0)
    private let count = Lock(0)

    var entered: Int { count.withLock { $0 } }

    func release() { gate.signal() }

    func decode(_ source: ImageSource, options: DecodingOptions) throws(ImageDecodingError) -> RasterImage {
        let first = count.withLock { count -> Bool in
            count += 1
            return count == 1
        }
        if first { gate.wait() }
        return try ImageDecoder().decode(source, options: options)
    }

    func info(_ source: ImageSource, options: DecodingOptions) throws(ImageDecodingError) -> ImageInfo {
        try ImageDecoder().info(source, options: options)
    }
}

/// How many cores a job on the loader's workers may spread over.
@Suite("Cores for a job: every core alone, a share beside others")
struct CoreShareTests {
    @Test("work that starts alone may use every core; work that starts beside other work keeps its worker's share")
    func aloneOrShared() async throws {
        let harness = LoaderHarness()
        defer { Task { await harness.cleanUp() } }
        let loader = try harness.loader { $0.decodingThreads = 2 }
        let every = min(ProcessInfo.processInfo.activeProcessorCount, System.processorsOnline)
        let share = max(1, ProcessInfo.processInfo.activeProcessorCount / 2)
        // Given a job alone on the workers
        let alone = try await loader.processing(TestImages.png, declaredContentType: nil) { _ in
            ResizeParallelism.cores
        }
        // Then it may use every core
        #expect(alone == every)
        // Given one job holding a worker
        let hold = DispatchSemaphore(value: 0)
        let entered = Lock(false)
        let held = Task {
            try await loader.processing(TestImages.png, declaredContentType: nil) { _ in
                entered.withLock { $0 = true }
                hold.wait()
                return ResizeParallelism.cores
            }
        }
        try await waitUntil("the first job on a worker") { entered.withLock { $0 } }
        // When a second starts beside it
        let beside = try await loader.processing(TestImages.png, declaredContentType: nil) { _ in
            ResizeParallelism.cores
        }
        hold.signal()
        // Then the second keeps its worker's share, and the first kept every core
        #expect(beside == min(share, System.processorsOnline))
        #expect(try await held.value == every)
    }
}
