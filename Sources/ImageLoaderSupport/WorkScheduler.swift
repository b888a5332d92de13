import HeapModule

/// Grants a limited number of slots: to the highest rank waiting (a rank raised while
/// queued counts), first or last come within a rank. A waiter whose task is cancelled
/// leaves the queue at once (or, cancelled before it joined, is refused when it gets
/// there). An optional bound on the queue refuses work at once when it is full: a
/// service's load shedding.
///
/// Picking the next waiter costs O(log n) whatever the queue's length: each waiter is
/// filed under its rank, in arrival order, and moved when its handle reports a change
/// (see ``PriorityHandle``), so a release never reads the waiters' handles.
package final class WorkScheduler: Sendable {
    /// Every slot is taken and the queue is full: the work was refused at once.
    package struct Full: Error, Sendable, Hashable {}

    /// The order of waiting work of the same rank.
    package enum Order: Sendable {
        /// First come, first served.
        case fifo
        /// Newest first.
        case lifo
    }

    private struct Waiter {
        let continuation: CheckedContinuation<Void, any Error>
        let handle: PriorityHandle
        var version: UInt64
        var rank: Int
    }

    private struct State {
        var running = 0
        /// The waiters by arrival number.
        var waiters: [UInt64: Waiter] = [:]
        /// Arrival numbers by rank (swift-collections' min-max heap: the earliest or the
        /// latest comes out first). An entry whose waiter has left or moved to another
        /// rank is dropped when it comes up.
        var queues: [Int: Heap<UInt64>] = [:]

        /// The waiter to run next, taken out of the queue: the highest rank's earliest
        /// arrival (FIFO) or latest (LIFO).
        mutating func next(newestFirst: Bool) -> (UInt64, Waiter)? {
            while let (rank, first) = queues.max(by: { $0.key < $1.key }) {
                var queue = first
                queues[rank] = nil
                while let arrival = newestFirst ? queue.popMax() : queue.popMin() {
                    guard let waiter = waiters[arrival], waiter.rank == rank else { continue }
                    waiters[arrival] = nil
                    if !queue.isEmpty { queues[rank] = queue }
                    return (arrival, waiter)
                }
            }
            return nil
        }
    }

    package let limit: Int
    let order: Order
    /// The most that may wait; past it, ``run(priority:_:)`` throws ``Full`` at once.
    package let maxWaiting: Int?
    private let state = Lock(State())

    package init(limit: Int, order: Order, maxWaiting: Int? = nil) {
        self.limit = max(1, limit)
        self.order = order
        self.maxWaiting = maxWaiting.map { max(0, $0) }
    }

    /// Runs `body` once a slot is free. Throws `CancellationError` if the task is
    /// cancelled while it waits, and ``Full`` when the queue is at ``maxWaiting``.
    package func run<T: Sendable>(priority: PriorityHandle, _ body: () async throws -> T) async throws -> T {
        try await acquire(priority)
        defer { release() }
        return try await body()
    }

    /// How many wait for a slot now (a service's queue depth).
    package var waiting: Int { state.withLock { $0.waiters.count } }

    /// How many hold a slot now.
    package var running: Int { state.withLock { $0.running } }

    private func acquire(_ handle: PriorityHandle) async throws {
        // The arrival number orders the queue, names the waiter for its cancellation,
        // and is its token with the handle.
        let arrival = Identity.next()
        try await state.suspend { state, continuation in
            if state.running < limit && state.waiters.isEmpty {
                state.running += 1
                return .success(())
            }
            if let maxWaiting, state.waiters.count >= maxWaiting { return .failure(Full()) }
            let (version, rank) = handle.observe(arrival) { [weak self] version, rank in
                self?.move(arrival, version: version, rank: rank)
            }
            state.waiters[arrival] = Waiter(continuation: continuation, handle: handle, version: version, rank: rank)
            state.queues[rank, default: []].insert(arrival)
            return nil
        } onCancel: { state in
            guard let waiter = state.waiters.removeValue(forKey: arrival) else { return nil }
            waiter.handle.stopObserving(arrival)
            return waiter.continuation
        }
    }

    /// A waiter's rank changed: it is filed under the new one.
    private func move(_ arrival: UInt64, version: UInt64, rank: Int) {
        state.withLock { state in
            guard var waiter = state.waiters[arrival], version > waiter.version else { return }
            waiter.version = version
            if waiter.rank != rank {
                waiter.rank = rank
                state.queues[rank, default: []].insert(arrival)
            }
            state.waiters[arrival] = waiter
        }
    }

    private func release() {
        let next = state.withLock { state -> Waiter? in
            guard let (arrival, next) = state.next(newestFirst: order == .lifo) else {
                state.running -= 1
                return nil
            }
            next.handle.stopObserving(arrival)
            return next
        }
        next?.continuation.resume()
    }
}
