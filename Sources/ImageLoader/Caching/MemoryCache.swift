import Foundation
import ImageLoaderSupport
import RasterImage

/// Decoded images in memory, sized by their decoded bytes (`RasterImage.cost`) plus,
/// for thumbnails, their encoded bytes, evicted by SIEVE (a hit marks its image; to make
/// room, a hand passes from the oldest towards the newest, sparing each marked image
/// once; it hits more often than least-recently-used on skewed workloads, and a hit is
/// cheaper: see `Benchmarks/cache_policy.py`). Safe from any thread; ``peek(_:product:)``
/// answers synchronously, for code that cannot await.
///
/// ```swift
/// var configuration = MemoryCache.Configuration()
/// configuration.maxBytes = 64 << 20
/// configuration.timeToLive = 300
/// let cache = MemoryCache(configuration: configuration)
/// ```
public final class MemoryCache: Sendable {
    /// The cache's limits.
    public struct Configuration: Sendable, Hashable {
        /// Most decoded bytes held. Default: ``MemoryCache/defaultMaxBytes``.
        public var maxBytes: Int = MemoryCache.defaultMaxBytes
        /// Most images held, or no limit.
        public var maxCount: Int?
        /// Seconds an image stays after it was added, or for ever.
        public var timeToLive: TimeInterval?
        /// The largest share of `maxBytes` one image may take (default a quarter), so one
        /// huge image cannot push out everything else.
        public var maxEntryFraction: Double = 0.25

        /// The defaults: ``MemoryCache/defaultMaxBytes``, no count limit, no time to live.
        public init() {}
    }

    /// An eighth of the memory this process may use (the machine's, or the container's
    /// cgroup limit when lower), between 32 MiB and 1 GiB.
    public static let defaultMaxBytes: Int = {
        let limit = MemoryLimit.available
        return min(1 << 30, max(32 << 20, limit / 8))
    }()

    /// A class, so that a hit copies one reference out of the cache, not five fields.
    final class Entry: Sendable {
        let image: RasterImage
        /// A thumbnail's encoded bytes, kept so a hit can be sent without encoding again.
        let encoded: EncodedImage?
        /// The HTTP response it came from; `nil` for local files.
        let response: StoredResponse?
        let added: Date
        /// Until when it may be used without asking the origin, worked out when it was
        /// added, so a hit costs a comparison, not a parse of its headers.
        let freshUntil: Date

        /// What it holds: the decoded pixels and the encoded bytes.
        var cost: Int { image.cost + (encoded?.bytes.count ?? 0) }

        init(image: RasterImage, encoded: EncodedImage?, response: StoredResponse?, added: Date, freshUntil: Date) {
            self.image = image
            self.encoded = encoded
            self.response = response
            self.added = added
            self.freshUntil = freshUntil
        }
    }

    private let entries: BoundedCache<CacheKey, Entry>
    private let timeToLive: TimeInterval?
    private let clock: @Sendable () -> Date

    /// An empty cache with `configuration`'s limits; `clock` reads the time to live's time.
    public init(configuration: Configuration = Configuration(), clock: @escaping @Sendable () -> Date = { Date() }) {
        entries = BoundedCache(
            limits: .init(
                maxBytes: configuration.maxBytes, maxCount: configuration.maxCount,
                maxEntryFraction: configuration.maxEntryFraction))
        timeToLive = configuration.timeToLive
        self.clock = clock
    }

    /// The limits in force.
    public var configuration: Configuration {
        let limits = entries.limits
        var configuration = Configuration()
        configuration.maxBytes = limits.maxBytes
        configuration.maxCount = limits.maxCount
        configuration.maxEntryFraction = limits.maxEntryFraction
        configuration.timeToLive = timeToLive
        return configuration
    }

    /// Changes the byte limit, evicting at once if the cache is over it.
    public func setMaxBytes(_ maxBytes: Int) {
        entries.setMaxBytes(maxBytes)
    }

    /// The image of `url` made as `product` if it is held and not past its time to live
    /// (a thumbnail is found by the options that shape it, whatever their limits).
    ///
    /// ```swift
    /// let original = cache.peek(url)
    /// let small = cache.peek(url, product: .thumbnail(ThumbnailOptions(maxPixelSize: 256)))
    /// ```
    public func peek(_ url: URL, product: ImageProduct = .original) -> RasterImage? {
        entry(for: CacheKey(url: url.droppingFragment, product: product))?.image
    }

    /// The entry for `key`, marked as used, unless it is past its time to live (then it is removed).
    func entry(for key: CacheKey) -> Entry? {
        let now = clock()
        return entries.value(for: key) { isLive($0, at: now) ? .use : .drop }
    }

    /// The image (and encoded bytes) for `key` when it is held, within its time to
    /// live and fresh at `now`: the hit path. A stale image is kept for revalidation.
    func freshHit(for key: CacheKey, at now: Date) -> (image: RasterImage, encoded: EncodedImage?)? {
        let entry = entries.value(for: key) { entry in
            guard isLive(entry, at: now) else { return .drop }
            return entry.freshUntil > now ? .use : .keep
        }
        return entry.map { ($0.image, $0.encoded) }
    }

    /// Adds (or replaces) an image. Returns `false` when it is larger than one entry may be.
    @discardableResult
    func insert(
        _ image: RasterImage, encoded: EncodedImage? = nil, response: StoredResponse?, freshUntil: Date,
        for key: CacheKey
    ) -> Bool {
        let entry = Entry(image: image, encoded: encoded, response: response, added: clock(), freshUntil: freshUntil)
        return entries.insert(entry, cost: entry.cost, for: key)
    }

    /// Removes the image of `url` made as `product`.
    public func remove(_ url: URL, product: ImageProduct = .original) {
        remove(CacheKey(url: url.droppingFragment, product: product))
    }

    /// Removes the image under `key`.
    func remove(_ key: CacheKey) {
        entries.remove(key)
    }

    /// Removes every image.
    public func removeAll() {
        entries.removeAll()
    }

    /// Images held and their decoded bytes.
    public var usage: (count: Int, bytes: Int) { entries.usage }

    /// The keys held, newest first (for tests).
    var keysNewestFirst: [CacheKey] { entries.keysNewestFirst }

    private func isLive(_ entry: Entry, at now: Date) -> Bool {
        guard let timeToLive else { return true }
        return now.timeIntervalSince(entry.added) <= timeToLive
    }
}

/// How much memory this process may use: the cgroup's limit (v2 `memory.max`, v1
/// `memory.limit_in_bytes`) when one is set and lower than the machine's memory.
enum MemoryLimit {
    static var available: Int {
        let physical = Int(ProcessInfo.processInfo.physicalMemory)
        let candidates = ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]
        let cgroup = candidates.compactMap { path -> Int? in
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
            return Int(text.trimmingCharacters(in: .whitespacesAndNewlines))
        }.first
        guard let cgroup, cgroup > 0 else { return physical }
        return min(physical, cgroup)
    }
}
