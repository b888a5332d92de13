import CoreMetrics
import Foundation
import ImageLoaderSupport
import RasterImage

/// The service's figures, through swift-metrics (a Prometheus registry in
/// `imageloader serve`): requests by status, processing and source-fetch durations,
/// the queue's depth and the requests holding a worker's place, cache hits by tier, sources by where they came from, bytes sent.
final class ServiceMetrics: Sendable {
    private let factory: any MetricsFactory
    private let processing: CoreMetrics.Timer
    private let fetching: CoreMetrics.Timer
    private let queueDepth: Gauge
    private let active: Gauge
    private let bytesOut: Counter
    private let workers: Int
    private let workersBusy: Gauge
    private let utilization: Gauge
    /// Images being processed now (``timingProcessing(_:)``).
    private let processingNow = Lock(0)
    private let statuses = Lock([Int: Counter]())
    private let tiers = Lock([String: Counter]())
    private let sources = Lock([String: Counter]())
    private let storageOutcomes = Lock([String: Counter]())

    init(factory: any MetricsFactory, workers: Int) {
        self.factory = factory
        self.workers = max(1, workers)
        Gauge(label: "imageservice_workers", factory: factory).record(self.workers)
        workersBusy = Gauge(label: "imageservice_workers_busy", factory: factory)
        utilization = Gauge(label: "imageservice_workers_utilization", factory: factory)
        processing = Timer(label: "imageservice_processing_seconds", factory: factory)
        fetching = Timer(label: "imageservice_source_fetch_seconds", factory: factory)
        queueDepth = Gauge(label: "imageservice_queue_depth", factory: factory)
        active = Gauge(label: "imageservice_requests_active", factory: factory)
        bytesOut = Counter(label: "imageservice_response_bytes_total", factory: factory)
    }

    func responded(status: Int, bytes: Int) {
        count(statuses, status, "imageservice_requests_total", ("status", String(status)))
        if bytes > 0 { bytesOut.increment(by: Int64(bytes)) }
    }

    /// A result answered from the processed-image cache.
    /// A result storage lookup or write: `hit`, `miss`, `write`, `write_failure`.
    func resultStorage(_ outcome: String) {
        count(storageOutcomes, outcome, "imageservice_result_storage_total", ("outcome", outcome))
    }

    func resultHit() { count(tiers, "result", "imageservice_cache_hits_total", ("tier", "result")) }

    /// A source fetched: `from` is `disk` or `revalidated` (hits of the loader's disk
    /// cache, also counted as hits), `network` or `local`.
    func sourceFetched(from: String) {
        count(sources, from, "imageservice_source_fetches_total", ("from", from))
        if from == "disk" || from == "revalidated" {
            count(tiers, from, "imageservice_cache_hits_total", ("tier", from))
        }
    }

    /// Increments the counter under `key`, made on first use with `label` and `dimension`
    /// (an autoclosure: the hot path builds no strings).
    private func count<Key: Hashable>(
        _ counters: Lock<[Key: Counter]>, _ key: Key, _ label: String, _ dimension: @autoclosure () -> (String, String)
    ) {
        let counter = counters.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = Counter(label: label, dimensions: [dimension()], factory: factory)
            counters[key] = counter
            return counter
        }
        counter.increment()
    }

    func queue(_ depth: Int) { queueDepth.record(depth) }

    /// How many requests hold a place of the workers (fetching, decoding or processing).
    func active(_ count: Int) { active.record(count) }

    /// Times `body`, an image's decode, processing and encode (with any wait for one of
    /// the workers' threads), and counts it in `imageservice_workers_busy` and
    /// `imageservice_workers_utilization` (busy over workers: 1 when every worker is
    /// busy, more when fetched sources wait for one), the signal to autoscale on.
    func timingProcessing<T>(_ body: () async throws -> T) async rethrows -> T {
        countProcessing(1)
        defer { countProcessing(-1) }
        return try await timing(processing, body)
    }

    private func countProcessing(_ change: Int) {
        let now = processingNow.withLock { count in
            count += change
            return count
        }
        workersBusy.record(now)
        utilization.record(Double(now) / Double(workers))
    }

    func timingFetch<T>(_ body: () async throws -> T) async rethrows -> T {
        try await timing(fetching, body)
    }

    private func timing<T>(_ timer: CoreMetrics.Timer, _ body: () async throws -> T) async rethrows -> T {
        let start = ContinuousClock.now
        defer {
            let elapsed = (ContinuousClock.now - start).components
            timer.recordNanoseconds(elapsed.seconds * 1_000_000_000 + elapsed.attoseconds / 1_000_000_000)
        }
        return try await body()
    }
}
