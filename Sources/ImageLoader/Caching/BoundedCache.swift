import ImageLoaderSupport

/// Values in memory under a byte budget (and optionally a count), evicted by SIEVE: the
/// package's one in-memory cache (the loader's decoded images, the service's results).
///
/// It lives in ImageLoader, beside its hot user: there the memory cache's lookups are
/// specialized for their types. Called from another module, generic code is not (a
/// memory hit took 730 ns instead of 446 when this type was in ImageLoaderSupport);
/// the service's result cache pays that, a few hundred nanoseconds of a request.
///
/// Entries sit in insertion order; a hit only marks its entry. To make room, a hand
/// walks from the oldest entry towards the newest, unmarking the marked ones, and
/// evicts the first unmarked one; it stays where it stopped for the next eviction, and
/// the entries it passed keep their places. (Zhang et al., "SIEVE is Simpler than LRU",
/// NSDI 2024.) Chosen by measurement, `Benchmarks/cache_policy.py`: on Zipf workloads
/// with costs like thumbnails' and originals', it hits more often than LRU and CLOCK at
/// every size tried (at 5% of all bytes, Zipf 0.8: 44.7% of requests against 35.8% and
/// 37.0%; with half the requests one-hit wonders: 20.5% against 13.3% and 13.9%), and a
/// hit costs what CLOCK's does: a flag set under the lock, no list to relink.
///
/// One entry may take at most a share of the budget (a quarter by default), so one
/// huge value cannot push out everything else. The caller says what an entry costs,
/// and, at each lookup, whether an entry is still of use (see ``Verdict``).
///
/// ```swift
/// let cache = BoundedCache<String, [UInt8]>(limits: .init(maxBytes: 64 << 20))
/// cache.insert(bytes, cost: bytes.count, for: "a")
/// let hit = cache.value(for: "a")
/// ```
package final class BoundedCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    /// How much the cache may hold.
    package struct Limits: Sendable, Hashable {
        /// The most bytes held, as the entries' costs add up.
        package var maxBytes: Int
        /// The most entries held, or no limit.
        package var maxCount: Int?
        /// The largest share of `maxBytes` one entry may take.
        package var maxEntryFraction: Double

        package init(maxBytes: Int, maxCount: Int? = nil, maxEntryFraction: Double = 0.25) {
            self.maxBytes = max(0, maxBytes)
            self.maxCount = maxCount
            self.maxEntryFraction = maxEntryFraction
        }

        /// The largest cost one entry may have.
        var maxEntryCost: Int {
            let cost = Double(maxBytes) * maxEntryFraction
            return cost >= Double(Int.max) ? .max : Int(max(0, cost))
        }
    }

    /// What a lookup makes of an entry it found.
    package enum Verdict: Sendable {
        /// A hit: the value is returned and the entry marked as used.
        case use
        /// Not usable now, but kept (a stale image waits for its revalidation).
        case keep
        /// Of no more use (past its time to live): removed.
        case drop
    }

    private struct Slot {
        let key: Key
        let value: Value
        let cost: Int
        var visited = false
        /// Neighbours in insertion order (slot numbers; -1: none).
        var newer = -1
        var older = -1

        init(key: Key, value: Value, cost: Int) {
            self.key = key
            self.value = value
            self.cost = cost
        }
    }

    private struct State {
        var limits: Limits
        var index: [Key: Int] = [:]
        var slots: [Slot?] = []
        var free: [Int] = []
        var newest = -1
        var oldest = -1
        /// Where the next eviction looks first (-1: the oldest entry).
        var hand = -1
        var bytes = 0

        init(limits: Limits) { self.limits = limits }

        mutating func add(_ slot: Slot) {
            var slot = slot
            slot.older = newest
            let position: Int
            if let reused = free.popLast() {
                position = reused
                slots[reused] = slot
            } else {
                position = slots.count
                slots.append(slot)
            }
            if newest >= 0 { slots[newest]?.newer = position }
            newest = position
            if oldest < 0 { oldest = position }
            index[slot.key] = position
            bytes += slot.cost
        }

        mutating func remove(at position: Int) {
            guard let slot = slots[position] else { return }
            if slot.older >= 0 { slots[slot.older]?.newer = slot.newer } else { oldest = slot.newer }
            if slot.newer >= 0 { slots[slot.newer]?.older = slot.older } else { newest = slot.older }
            if hand == position { hand = slot.newer }
            index[slot.key] = nil
            bytes -= slot.cost
            slots[position] = nil
            free.append(position)
        }

        /// Evicts one entry, SIEVE's way.
        mutating func evictOne() {
            var position = hand >= 0 ? hand : oldest
            // Each step unmarks one entry, so within two passes one is unmarked.
            while position >= 0, let slot = slots[position], slot.visited {
                slots[position]?.visited = false
                position = slot.newer >= 0 ? slot.newer : oldest
            }
            guard position >= 0 else { return }
            hand = slots[position]?.newer ?? -1
            remove(at: position)
        }

        /// Evicts until `cost` more bytes and `entries` more entries fit the limits.
        mutating func makeRoom(for cost: Int, entries: Int) {
            while !index.isEmpty
                && (bytes > limits.maxBytes - cost || limits.maxCount.map { index.count + entries > $0 } ?? false)
            {
                evictOne()
            }
        }

        mutating func removeAll() {
            self = State(limits: limits)
        }
    }

    private let state: Lock<State>

    /// An empty cache.
    package init(limits: Limits) {
        state = Lock(State(limits: limits))
    }

    /// The limits in force.
    package var limits: Limits { state.withLock { $0.limits } }

    /// Changes the byte budget, evicting at once if the cache is over it.
    package func setMaxBytes(_ maxBytes: Int) {
        state.withLock { state in
            state.limits.maxBytes = max(0, maxBytes)
            state.makeRoom(for: 0, entries: 0)
        }
    }

    /// The value for `key` when it is held and `verdict` (run under the lock: keep it
    /// to a comparison) says to use it.
    package func value(for key: Key, _ verdict: (Value) -> Verdict = { _ in .use }) -> Value? {
        state.withLock { state -> Value? in
            guard let position = state.index[key], let value = state.slots[position]?.value else { return nil }
            switch verdict(value) {
            case .use:
                state.slots[position]?.visited = true
                return value
            case .keep:
                return nil
            case .drop:
                state.remove(at: position)
                return nil
            }
        }
    }

    /// Adds (or replaces) the value for `key`, evicting others to make room. Returns
    /// `false`, and holds nothing for `key`, when `cost` is more than one entry may take.
    @discardableResult
    package func insert(_ value: Value, cost: Int, for key: Key) -> Bool {
        state.withLock { state in
            if let old = state.index[key] { state.remove(at: old) }
            guard cost >= 0, cost <= state.limits.maxEntryCost, state.limits.maxCount != 0 else { return false }
            // Room first, so the new entry is not the first candidate for eviction.
            state.makeRoom(for: cost, entries: 1)
            state.add(Slot(key: key, value: value, cost: cost))
            return true
        }
    }

    /// Removes the value for `key`.
    package func remove(_ key: Key) {
        state.withLock { state in
            if let position = state.index[key] { state.remove(at: position) }
        }
    }

    /// Removes every value.
    package func removeAll() {
        state.withLock { $0.removeAll() }
    }

    /// Entries held and the sum of their costs.
    package var usage: (count: Int, bytes: Int) { state.withLock { ($0.index.count, $0.bytes) } }

    /// The keys held, newest first (for tests).
    package var keysNewestFirst: [Key] {
        state.withLock { state in
            var keys: [Key] = []
            var position = state.newest
            while position >= 0, let slot = state.slots[position] {
                keys.append(slot.key)
                position = slot.older
            }
            return keys
        }
    }
}
