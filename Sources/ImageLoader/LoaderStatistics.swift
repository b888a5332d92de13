import CoreMetrics
import Foundation
import ImageLoaderSupport
import RasterImage

/// What a loader has done since it was created. Read it with ``ImageLoader/statistics``;
/// the same figures are exported through swift-metrics (counters named
/// `imageloader_*`) when the application has bootstrapped a metrics backend.
public struct LoaderStatistics: Sendable, Hashable {
    /// Images answered from memory, without any other work.
    public var memoryHits = 0
    /// Images answered from the disk cache without asking the origin.
    public var diskHits = 0
    /// Loads that found nothing usable in the caches (and so asked the origin).
    public var misses = 0
    /// Requests sent to origins (conditional ones included).
    public var requests = 0
    /// 304 answers.
    public var notModified = 0
    /// Loads that ended with an error.
    public var failures = 0
    /// Bytes of response bodies received.
    public var bytesReceived = 0
    /// Images decoded, and the time spent decoding them.
    public var decodes = 0
    /// The time spent in those decodes.
    public var decodeTime: Duration = .zero
    /// Thumbnails resampled (not found in a cache).
    public var thumbnailsMade = 0
    /// Callers that joined a load already under way instead of starting their own.
    public var coalesced = 0
    /// Disk-cache entries found damaged and removed (their checksums no longer matched,
    /// or a stored body no longer decoded): each was fetched again instead.
    public var corruptCacheEntries = 0
}

/// Counts as the loader works; thread safe.
final class LoaderMetrics: Sendable {
    private let values = Lock(LoaderStatistics())
    private let memoryHitCounter = Counter(label: "imageloader_cache_hits_total", dimensions: [("cache", "memory")])
    private let diskHitCounter = Counter(label: "imageloader_cache_hits_total", dimensions: [("cache", "disk")])
    private let missCounter = Counter(label: "imageloader_cache_misses_total")
    private let requestCounter = Counter(label: "imageloader_requests_total")
    private let notModifiedCounter = Counter(label: "imageloader_not_modified_total")
    private let failureCounter = Counter(label: "imageloader_failures_total")
    private let bytesCounter = Counter(label: "imageloader_received_bytes_total")
    private let decodeTimer = Timer(label: "imageloader_decode_duration")
    private let thumbnailCounter = Counter(label: "imageloader_thumbnails_total")
    private let coalescedCounter = Counter(label: "imageloader_coalesced_total")
    private let corruptCounter = Counter(label: "imageloader_cache_corrupt_total")

    var snapshot: LoaderStatistics { values.withLock { $0 } }

    func memoryHit() {
        values.withLock { $0.memoryHits += 1 }
        memoryHitCounter.increment()
    }

    func diskHit() {
        values.withLock { $0.diskHits += 1 }
        diskHitCounter.increment()
    }

    func miss() {
        values.withLock { $0.misses += 1 }
        missCounter.increment()
    }

    func request() {
        values.withLock { $0.requests += 1 }
        requestCounter.increment()
    }

    func notModified() {
        values.withLock { $0.notModified += 1 }
        notModifiedCounter.increment()
    }

    func failure() {
        values.withLock { $0.failures += 1 }
        failureCounter.increment()
    }

    func received(_ bytes: Int) {
        values.withLock { $0.bytesReceived += bytes }
        bytesCounter.increment(by: bytes)
    }

    func decoded(in duration: Duration) {
        values.withLock {
            $0.decodes += 1
            $0.decodeTime += duration
        }
        decodeTimer.recordNanoseconds(
            duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }

    /// Runs a decode, counting it and its time.
    func timingDecode<T>(_ body: () throws -> T) rethrows -> T {
        let start = ContinuousClock.now
        let result = try body()
        decoded(in: ContinuousClock.now - start)
        return result
    }

    func thumbnailMade() {
        values.withLock { $0.thumbnailsMade += 1 }
        thumbnailCounter.increment()
    }

    func corruptEntry() {
        values.withLock { $0.corruptCacheEntries += 1 }
        corruptCounter.increment()
    }

    func coalesced() {
        values.withLock { $0.coalesced += 1 }
        coalescedCounter.increment()
    }
}
