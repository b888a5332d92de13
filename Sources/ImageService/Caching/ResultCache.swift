import Foundation
import ImageLoader
import ImageLoaderSupport
import NIOCore
import RasterImage

/// A processed image ready to send: its bytes (a buffer every response shares, never
/// copied) and the headers that go with them.
struct ProcessedResult: Sendable {
    let body: ByteBuffer

    var meta: ResponseMeta

    init(bytes: [UInt8], meta: ResponseMeta) {
        body = ByteBuffer(bytes: bytes)
        self.meta = meta
    }
}

/// How the result cache (and the result bucket) keys an answer: the request's path exactly as received (its
/// signature checked when the entry was made, so a hit needs no parsing and no HMAC)
/// and the client's features (``ClientFeatures``: the formats it takes that the
/// service may choose, its hints).
struct ResultCacheKey: Hashable, Sendable {
    let path: String
    let features: ClientFeatures
}

/// Processed images in memory, bounded by their bytes: a ``BoundedCache`` (SIEVE, so a
/// hit costs a dictionary lookup and a flag under a lock) whose stale entries are
/// dropped when found.
struct ResultCache: Sendable {
    private let results: BoundedCache<ResultCacheKey, ProcessedResult>

    init(maxBytes: Int) {
        results = BoundedCache(limits: .init(maxBytes: maxBytes))
    }

    /// The result for `key` while it is fresh at `now`.
    func fresh(_ key: ResultCacheKey, at now: Date) -> ProcessedResult? {
        results.value(for: key) { $0.meta.keepUntil > now ? .use : .drop }
    }

    /// Keeps `result` unless it alone takes more than a quarter of the cache.
    func insert(_ result: ProcessedResult, for key: ResultCacheKey) {
        results.insert(result, cost: result.body.readableBytes, for: key)
    }
}
