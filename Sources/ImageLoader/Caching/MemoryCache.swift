import ImageLoaderSupport
import Foundation
import RasterImage

/// Decoded images in memory, least recently used first out, sized by their decoded
/// bytes (`RasterImage.cost`) plus, for thumbnails, their encoded bytes. Safe from any thread; ``peek(_:)`` answers
/// synchronously, for code that cannot await.
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

    struct Entry: Sendable {
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
    }

    private struct State {
        var entries: [String: Node] = [:]
        var head: Node?  // most recently used
        var tail: Node?  // least recently used
        var bytes = 0
        var configuration: Configuration
    }

    /// A node of the recency list. Each node holds the next older one strongly, so the
    /// list from `head` keeps its nodes alive; the link back to the newer one is
    /// `unowned(unsafe)` (no reference counting on the hit path): every node in the list
    /// is also in `entries`, and a node's links are cleared when it leaves the list, so
    /// the link never outlives its target. Only touched under the cache's lock.
    private final class Node {
        let key: String
        let entry: Entry
        unowned(unsafe) var newer: Node?
        var older: Node?

        init(key: String, entry: Entry) {
            self.key = key
            self.entry = entry
        }
    }

    private let state: Lock<State>
    private let clock: @Sendable () -> Date

    /// An empty cache with `configuration`'s limits; `clock` reads the time to live's time.
    public init(configuration: Configuration = Configuration(), clock: @escaping @Sendable () -> Date = { Date() }) {
        state = Lock(State(configuration: configuration))
        self.clock = clock
    }

    /// The limits in force.
    public var configuration: Configuration {
        state.withLock { $0.configuration }
    }

    /// Changes the byte limit, evicting at once if the cache is over it.
    public func setMaxBytes(_ maxBytes: Int) {
        state.withLock { state in
            state.configuration.maxBytes = max(0, maxBytes)
            MemoryCache.trim(&state)
        }
    }

    /// The image for `key` if it is held and not past its time to live.
    public func peek(_ key: String) -> RasterImage? {
        entry(for: key)?.image
    }

    /// The entry for `key`, made the most recently used, unless it is past its time to live.
    func entry(for key: String) -> Entry? {
        let now = clock()
        return state.withLock { state -> Entry? in
            guard let node = MemoryCache.live(key, at: now, &state) else { return nil }
            MemoryCache.moveToFront(node, &state)
            return node.entry
        }
    }

    /// The image (and encoded bytes) for `key` when it is held, within its time to
    /// live and fresh at `now`: the hit path, which copies out only what it returns.
    func freshHit(for key: String, at now: Date) -> (image: RasterImage, encoded: EncodedImage?)? {
        state.withLock { state -> (RasterImage, EncodedImage?)? in
            guard let node = MemoryCache.live(key, at: now, &state), node.entry.freshUntil > now else { return nil }
            MemoryCache.moveToFront(node, &state)
            return (node.entry.image, node.entry.encoded)
        }
    }

    /// Adds (or replaces) an image. Returns `false` when it is larger than one entry may be.
    @discardableResult
    func insert(
        _ image: RasterImage, encoded: EncodedImage? = nil, response: StoredResponse?, freshUntil: Date,
        for key: String
    ) -> Bool {
        let entry = Entry(image: image, encoded: encoded, response: response, added: clock(), freshUntil: freshUntil)
        return state.withLock { state in
            let limit = Int(Double(state.configuration.maxBytes) * state.configuration.maxEntryFraction)
            if let old = state.entries[key] { MemoryCache.unlink(old, &state) }
            guard entry.cost <= limit else { return false }
            MemoryCache.pushFront(Node(key: key, entry: entry), &state)
            MemoryCache.trim(&state)
            return true
        }
    }

    /// Removes one image.
    public func remove(_ key: String) {
        state.withLock { state in
            if let node = state.entries[key] { MemoryCache.unlink(node, &state) }
        }
    }

    /// Removes every image.
    public func removeAll() {
        state.withLock { MemoryCache.clear(&$0) }
    }

    /// Images held and their decoded bytes.
    public var usage: (count: Int, bytes: Int) {
        state.withLock { ($0.entries.count, $0.bytes) }
    }

    /// The keys from most to least recently used.
    var keysByRecency: [String] {
        state.withLock { state in
            var keys: [String] = []
            var node = state.head
            while let current = node {
                keys.append(current.key)
                node = current.older
            }
            return keys
        }
    }

    /// The node for `key`, unless it is past its time to live at `now` (then it is removed).
    private static func live(_ key: String, at now: Date, _ state: inout State) -> Node? {
        guard let node = state.entries[key] else { return nil }
        if let ttl = state.configuration.timeToLive, now.timeIntervalSince(node.entry.added) > ttl {
            unlink(node, &state)
            return nil
        }
        return node
    }

    private static func pushFront(_ node: Node, _ state: inout State) {
        linkAtFront(node, &state)
        state.entries[node.key] = node
        state.bytes += node.entry.cost
    }

    private static func linkAtFront(_ node: Node, _ state: inout State) {
        node.older = state.head
        node.newer = nil
        state.head?.newer = node
        state.head = node
        if state.tail == nil { state.tail = node }
    }

    private static func unlink(_ node: Node, _ state: inout State) {
        detach(node, &state)
        state.entries[node.key] = nil
        state.bytes -= node.entry.cost
    }

    /// Takes `node` out of the recency list only.
    private static func detach(_ node: Node, _ state: inout State) {
        if let older = node.older { older.newer = node.newer } else { state.tail = node.newer }
        if let newer = node.newer { newer.older = node.older } else { state.head = node.older }
        node.newer = nil
        node.older = nil
    }

    /// Makes `node`, already held, the most recently used, without touching `entries`.
    private static func moveToFront(_ node: Node, _ state: inout State) {
        guard state.head !== node else { return }
        detach(node, &state)
        linkAtFront(node, &state)
    }

    /// Empties the cache, unlinking every node.
    private static func clear(_ state: inout State) {
        var node = state.head
        state.head = nil
        state.tail = nil
        while let current = node {
            node = current.older
            current.older = nil
            current.newer = nil
        }
        state.entries = [:]
        state.bytes = 0
    }

    private static func trim(_ state: inout State) {
        while let tail = state.tail,
            state.bytes > state.configuration.maxBytes
                || state.configuration.maxCount.map({ state.entries.count > $0 }) ?? false
        {
            unlink(tail, &state)
        }
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
