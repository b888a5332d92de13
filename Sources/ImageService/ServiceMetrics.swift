import CoreMetrics
import Foundation
import RasterImage

/// The service's figures, through swift-metrics (a Prometheus registry in
/// `imageloader serve`): requests by status, processing and source-fetch durations,
/// the queue's depth, hits by tier and bytes sent.
final class ServiceMetrics: Sendable {
    private let factory: any MetricsFactory
    private let processing: CoreMetrics.Timer
    private let fetching: CoreMetrics.Timer
    private let queueDepth: Gauge
    private let bytesOut: Counter
    private let statuses = Lock([Int: Counter]())
    private let tiers = Lock([String: Counter]())

    init(factory: any MetricsFactory) {
        self.factory = factory
        processing = Timer(label: "imageservice_processing_seconds", factory: factory)
        fetching = Timer(label: "imageservice_source_fetch_seconds", factory: factory)
        queueDepth = Gauge(label: "imageservice_queue_depth", factory: factory)
        bytesOut = Counter(label: "imageservice_response_bytes_total", factory: factory)
    }

    func responded(status: Int, bytes: Int) {
        let counter = statuses.withLock { counters in
            if let counter = counters[status] { return counter }
            let counter = Counter(
                label: "imageservice_requests_total", dimensions: [("status", String(status))], factory: factory)
            counters[status] = counter
            return counter
        }
        counter.increment()
        if bytes > 0 { bytesOut.increment(by: Int64(bytes)) }
    }

    /// A request answered from `tier`: `result` (the processed-image cache), or where
    /// the source came from (`disk`, `revalidated`, `network`, `local`).
    func hit(_ tier: String) {
        let counter = tiers.withLock { counters in
            if let counter = counters[tier] { return counter }
            let counter = Counter(
                label: "imageservice_cache_hits_total", dimensions: [("tier", tier)], factory: factory)
            counters[tier] = counter
            return counter
        }
        counter.increment()
    }

    func queue(_ depth: Int) { queueDepth.record(depth) }

    func timingProcessing<T>(_ body: () async throws -> T) async rethrows -> T {
        try await timing(processing, body)
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
