import Foundation
import RasterImage

/// A priority that can change while its work waits: a load's own (the highest of its
/// callers), or a shared stage's, which is the highest of the loads waiting on it.
package final class PriorityHandle: Sendable {
    private struct State {
        var own: LoadPriority
        var members: [UInt64: PriorityHandle] = [:]
    }

    private let state: Lock<State>

    package init(_ priority: LoadPriority) { state = Lock(State(own: priority)) }

    /// The highest of its own priority and its members'. Members are read after the
    /// lock is released: handles form a tree (a stage's members are loads' handles),
    /// so no two locks are ever held at once.
    package var priority: LoadPriority {
        get {
            let (own, members) = state.withLock { ($0.own, Array($0.members.values)) }
            return members.reduce(own) { max($0, $1.priority) }
        }
        set { state.withLock { $0.own = newValue } }
    }

    /// Makes `member`'s priority count until ``remove(_:)``.
    func add(_ id: UInt64, _ member: PriorityHandle) {
        state.withLock { $0.members[id] = member }
    }

    func remove(_ id: UInt64) {
        state.withLock { _ = $0.members.removeValue(forKey: id) }
    }
}

/// Grants a limited number of slots: to the highest priority waiting (read when a slot
/// frees, so a priority raised while queued counts), first or last come within a
/// priority. A waiter whose task is cancelled leaves the queue at once (or, cancelled
/// before it joined, is refused when it gets there). An optional bound on the queue
/// refuses work at once when it is full: a service's load shedding.
package final class WorkScheduler: Sendable {
    /// Every slot is taken and the queue is full: the work was refused at once.
    package struct Full: Error, Sendable, Hashable {}

    private struct Waiter {
        let id: UInt64
        let priority: PriorityHandle
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var running = 0
        var waiters: [Waiter] = []
        var nextID: UInt64 = 0
        /// Waiters whose task was cancelled before they joined the queue.
        var cancelledEarly: Set<UInt64> = []
        /// Waiters still on their way into the queue (their cancellation is not yet seen).
        var arriving: Set<UInt64> = []
    }

    package let limit: Int
    let order: QueueOrder
    /// The most that may wait; past it, ``run(priority:_:)`` throws ``Full`` at once.
    package let maxWaiting: Int?
    private let state = Lock(State())

    package init(limit: Int, order: QueueOrder, maxWaiting: Int? = nil) {
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

    private enum Admission {
        case granted, queued, cancelled, full
    }

    private func acquire(_ priority: PriorityHandle) async throws {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            state.arriving.insert(state.nextID)
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let admission = state.withLock { state -> Admission in
                    state.arriving.remove(id)
                    if state.cancelledEarly.remove(id) != nil { return .cancelled }
                    if state.running < limit && state.waiters.isEmpty {
                        state.running += 1
                        return .granted
                    }
                    if let maxWaiting, state.waiters.count >= maxWaiting { return .full }
                    state.waiters.append(Waiter(id: id, priority: priority, continuation: continuation))
                    return .queued
                }
                switch admission {
                case .granted: continuation.resume()
                case .queued: break
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .full: continuation.resume(throwing: Full())
                }
            }
        } onCancel: {
            let removed = state.withLock { state -> Waiter? in
                // Cancelled before joining the queue: refused when it gets there.
                if state.arriving.contains(id) {
                    state.cancelledEarly.insert(id)
                    return nil
                }
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index)
            }
            removed?.continuation.resume(throwing: CancellationError())
        }
    }

    private func release() {
        let next = state.withLock { state -> Waiter? in
            guard !state.waiters.isEmpty else {
                state.running -= 1
                return nil
            }
            // Waiters are kept in arrival order; pick the best by priority, then by order.
            var best = 0
            for index in state.waiters.indices.dropFirst() {
                let candidate = state.waiters[index].priority.priority
                let current = state.waiters[best].priority.priority
                if candidate > current || (candidate == current && order == .lifo) { best = index }
            }
            return state.waiters.remove(at: best)
        }
        next?.continuation.resume()
    }
}
