/// Workers and a result cache sized for a memory limit (a container's control group):
/// each worker may hold the largest source and its decoded pixels (`maxSourceBytes`
/// plus 4 bytes a pixel of `maxSourcePixels`), beside a reserve for the process itself
/// and its connections, and the result cache. Without a limit: a worker per core and
/// the default cache.
///
/// ```swift
/// let budget = MemoryBudget(
///     limit: MemoryAllocator.controlGroupLimit(), cores: 4, maxSourceBytes: 64 << 20, maxSourcePixels: 50_000_000)
/// configuration.workers = budget.workers
/// ```
package struct MemoryBudget: Sendable, Equatable {
    package let limit: Int?
    package let workers: Int
    package let resultCacheBytes: Int

    /// What the process needs besides the workers and the result cache: code, the
    /// runtime, the loader's buffers, connections (measured idle: about 20 MiB).
    package static let reserve = 96 << 20
    /// The result cache without a limit, and at most with one.
    package static let defaultResultCache = 128 << 20

    package init(limit: Int?, cores: Int, maxSourceBytes: Int, maxSourcePixels: Int) {
        self.limit = limit
        guard let limit else {
            (workers, resultCacheBytes) = (max(1, cores), Self.defaultResultCache)
            return
        }
        let resultCache = min(Self.defaultResultCache, limit / 8)
        let perWorker = max(1, maxSourceBytes.saturatingAdding(maxSourcePixels.saturatingMultiplied(by: 4)))
        let fitting = max(1, (limit - Self.reserve - resultCache) / perWorker)
        (workers, resultCacheBytes) = (max(1, min(cores, fitting)), resultCache)
    }
}

extension Int {
    fileprivate func saturatingAdding(_ other: Int) -> Int {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }

    fileprivate func saturatingMultiplied(by other: Int) -> Int {
        let (product, overflow) = multipliedReportingOverflow(by: other)
        return overflow ? .max : product
    }
}
