import Foundation
import ImageLoaderSupport
import Logging
import RasterImage

/// What every load shares: the configuration, the caches, the HTTP stack, the workers,
/// the schedulers and the counters.
struct PipelineContext: Sendable {
    let configuration: ImageLoader.Configuration
    let policy: HTTPCachePolicy
    let diskCache: DiskCache?
    let memoryCache: MemoryCache?
    let dataLoader: any DataLoading
    let workers: WorkerPool
    let network: WorkScheduler
    let decoding: WorkScheduler
    let metrics: LoaderMetrics
    let recentFailures: RecentFailures
    /// The work outside the pipeline's loads, which shutdown waits for.
    let operations = Operations()
    /// One request per URL and header fields, whatever products wait for it.
    let downloads = Downloads()
    /// One decode per download and plan, shared by the products made from it.
    let decodes = SharedWork<DecodeKey, ReducedImage, ImageProduct, Never>()
    var logger: Logger { configuration.logger }
    /// The configuration's clock, kept apart: a hit reads it, and reading it through
    /// the configuration would copy the configuration.
    let clock: @Sendable () -> Date
    var now: Date { clock() }

    /// The request headers every request carries (and Vary compares).
    let requestHeaders: [HeaderField]

    /// Whether `url` is one the loader fetches: one with a host, of a scheme the data
    /// loader takes (http and https, and the stores' when it reads object storage).
    func isFetchable(_ url: URL) -> Bool {
        url.host != nil && dataLoader.canLoad(url)
    }
    /// The cores one worker's resize may use: its share of the machine. (Worked out
    /// once: `activeProcessorCount` reads the cgroup's files on every call.)
    let resizeCores: Int
    /// The cores the process may use: a job's share when it runs alone.
    let allCores: Int

    init(
        configuration: ImageLoader.Configuration, diskCache: DiskCache?, memoryCache: MemoryCache?,
        dataLoader: any DataLoading, workers: WorkerPool
    ) {
        self.configuration = configuration
        clock = configuration.clock
        policy = configuration.cachePolicy
        self.diskCache = diskCache
        self.memoryCache = memoryCache
        self.dataLoader = dataLoader
        self.workers = workers
        network = WorkScheduler(limit: configuration.concurrentLoads, order: .init(configuration.queueOrder))
        decoding = WorkScheduler(limit: configuration.decodingThreads, order: .init(configuration.queueOrder))
        metrics = LoaderMetrics()
        recentFailures = RecentFailures()
        var headers = configuration.requestHeaders
        if !headers.contains(where: { $0.hasName("Accept") }) {
            let types = configuration.acceptedContentTypes.types.sorted().joined(separator: ", ")
            headers.append(HeaderField("Accept", types))
        }
        requestHeaders = headers
        allCores = max(1, ProcessInfo.processInfo.activeProcessorCount)
        resizeCores = max(1, allCores / max(1, configuration.decodingThreads))
    }

    /// Runs blocking work on the workers, mapping a stopped pool to `.shutDown`. A
    /// resize (or a HEIF's tiles) inside spreads over `cores`, by default this worker's
    /// share of the cores only.
    func blocking<T: Sendable>(
        _ url: String, cores: Int? = nil, _ body: @escaping @Sendable () throws -> T
    ) async throws -> T {
        let share = cores ?? resizeCores
        do {
            return try await workers.run { try ResizeParallelism.withCores(share, body) }
        } catch {
            throw ImageLoadingError(mapping: error, url: url)
        }
    }

    /// CPU-heavy work (decoding, resampling): waits for a decoding slot by priority,
    /// then runs on a worker thread. Nothing starts once the load is cancelled. Work
    /// that starts alone (no other decoding running or waiting) may spread over every
    /// core the process has (``ResizeParallelism``: banded resizes, a HEIF's tiles);
    /// otherwise over its worker's share, so the workers together never ask for more
    /// threads than there are cores.
    func cpu<T: Sendable>(
        _ url: String, priority: PriorityHandle, _ body: @escaping @Sendable () throws -> T
    ) async throws -> T {
        do {
            return try await decoding.run(priority: priority) {
                try Task.checkCancellation()
                let alone = decoding.running <= 1 && decoding.waiting == 0
                return try await blocking(url, cores: alone ? allCores : resizeCores, body)
            }
        } catch is CancellationError {
            throw ImageLoadingError(.cancelled, url: url)
        }
    }

    /// The one way a decode (and what is made with it) runs: `body` with the configured
    /// decoder, on a worker at `priority` (``cpu(_:priority:_:)``), its time measured as
    /// a decode, counted as a thumbnail made when `makesThumbnail`; then `finish` on the
    /// same worker, untimed (an encode).
    func decoding<T, U: Sendable>(
        _ url: String, priority: PriorityHandle, makesThumbnail: Bool = false,
        _ body: @escaping @Sendable (any ImageDecoding) throws -> T,
        then finish: @escaping @Sendable (T) throws -> U
    ) async throws -> U {
        let (decoder, metrics) = (configuration.decoder, self.metrics)
        return try await cpu(url, priority: priority) {
            let value = try metrics.timingDecode { try body(decoder) }
            if makesThumbnail { metrics.thumbnailMade() }
            return try finish(value)
        }
    }

    /// ``decoding(_:priority:makesThumbnail:_:then:)`` with nothing after the decode.
    func decoding<T: Sendable>(
        _ url: String, priority: PriorityHandle, makesThumbnail: Bool = false,
        _ body: @escaping @Sendable (any ImageDecoding) throws -> T
    ) async throws -> T {
        try await decoding(url, priority: priority, makesThumbnail: makesThumbnail, body) { $0 }
    }

    /// The format of `bytes` when the loader accepts it: the sniffed format must be an
    /// accepted type and agree with `declaredContentType` (a response's or an upload's),
    /// unless the configuration ignores declared types.
    func acceptedFormat(_ bytes: some Collection<UInt8>, declaredContentType: String?, url: String)
        throws(ImageLoadingError) -> ImageFormat
    {
        do {
            return try configuration.acceptedContentTypes.validate(
                bytes.prefix(64),
                declaredContentType: configuration.checksDeclaredContentType ? declaredContentType : nil)
        } catch {
            throw ImageLoadingError(.contentType(error), url: url)
        }
    }

    /// Sends `request` through the download stage: a request already in flight for the
    /// same URL and header fields is joined instead of sent again.
    func download(
        _ request: DataRequest, product: ImageProduct?, priority: PriorityHandle,
        progress: @escaping @Sendable (Int, Int?) -> Void
    ) async throws -> Downloads.Outcome {
        let (loader, metrics, network, downloads) = (dataLoader, self.metrics, self.network, self.downloads)
        return try await mappingErrors(request.url.absoluteString) {
            try await downloads.value(
                for: DownloadKey(url: request.url, headers: request.headers), product: product, priority: priority,
                onEvent: { progress($0.received, $0.expected) },
                // A request in flight joined: one saved, as when loads share one (`data(for:)` callers).
                onJoin: { metrics.coalesced() }
            ) { run in
                try await network.run(priority: run.priority) {
                    try Task.checkCancellation()
                    metrics.request()
                    let response = try await loader.load(request) {
                        run.report(DownloadProgress(received: $0, expected: $1))
                    }
                    metrics.received(response.body.count)
                    return response
                }
            }
        }
    }

    /// Until when a response may be used without asking the origin, from now.
    func freshUntil(_ response: StoredResponse?) -> Date {
        guard let response else { return .distantFuture }  // a local file
        guard policy.useServerCachePolicy else { return .distantFuture }
        let now = self.now
        let evaluation = policy.evaluate(response, now: now)
        return evaluation.isFresh ? now.addingTimeInterval(evaluation.lifetime - evaluation.age) : .distantPast
    }

    /// Keeps an image (and a thumbnail's encoded bytes) in memory with its freshness worked out now.
    func remember(_ image: RasterImage, encoded: EncodedImage?, response: StoredResponse?, for key: CacheKey) {
        memoryCache?.insert(
            image, encoded: encoded, response: response, freshUntil: freshUntil(response), for: key)
    }

    /// A fresh image in memory under `key`: the fast path, one lock and a comparison.
    func freshInMemory(_ key: CacheKey) -> (image: RasterImage, encoded: EncodedImage?)? {
        memoryCache?.freshHit(for: key, at: now)
    }

    func logMiss(_ key: String, _ message: String) {
        let level: Logger.Level = configuration.logCacheMisses ? .info : .debug
        logger.log(level: level, "\(message)", metadata: ["url": "\(key)"])
    }
}

/// The URLs whose last load failed, for ``ImageLoader/failedToFetch(_:)``: a user of
/// the package's one bounded cache. Past ``capacity`` URLs the least used failures
/// are forgotten, so a stream of failing URLs (a crawler, an attacker) cannot grow it
/// without end.
final class RecentFailures: Sendable {
    static let defaultCapacity = 10_000
    let capacity: Int
    /// Each failure costs 1: the budget is a count.
    private let failures: BoundedCache<String, ImageLoadingError>

    init(capacity: Int = RecentFailures.defaultCapacity) {
        self.capacity = max(1, capacity)
        failures = BoundedCache(
            limits: .init(maxBytes: self.capacity, maxCount: self.capacity, maxEntryFraction: 1))
    }

    func record(_ error: ImageLoadingError, for key: String) {
        failures.insert(error, cost: 1, for: key)
    }

    func clear(_ key: String) {
        failures.remove(key)
    }

    func failure(for key: String) -> ImageLoadingError? {
        failures.value(for: key)
    }

    var count: Int { failures.usage.count }
}
