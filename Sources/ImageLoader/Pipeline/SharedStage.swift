import Foundation
import RasterImage

/// One stage of the pipeline (a download, a decode): at most one run per key at a
/// time, whatever number of loads wait for it. The run's priority is the highest of
/// its waiters'; when the last waiter leaves, the run is cancelled. A waiter that
/// leaves gets `CancellationError` at once.
///
/// Registration and removal happen under one lock, in the order they are made: a
/// waiter cancelled before it registered is refused at registration, never left behind.
package final class SharedStage<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    /// What a waiter receives: the value, the run's identity (for the keys of later
    /// stages) and the products that were waiting when it ended, earliest first.
    package struct Outcome: Sendable {
        package let value: Value
        let run: UInt64
        /// The products waiting when the run ended, earliest first, without repeats.
        let products: [ImageProduct]
        /// Whether this waiter was the first to ask: it does what must happen once per
        /// run (remembering a failed request).
        let isFirst: Bool
        /// Work that must happen once per run, whichever waiter asks first (one disk
        /// write per download, however many loads of the URL share it).
        let once: RunOnce
    }

    package typealias Work =
        @Sendable (_ priority: PriorityHandle, _ progress: @escaping @Sendable (Int, Int?) -> Void)
        async throws -> Value

    private struct Waiter {
        let continuation: CheckedContinuation<Outcome, any Error>
        let product: ImageProduct?
        let progress: (@Sendable (Int, Int?) -> Void)?
    }

    private final class Run {
        let id: UInt64
        let priority = PriorityHandle(.veryLow)
        let once = RunOnce()
        var waiters: [UInt64: Waiter] = [:]
        var task: Task<Void, Never>?
        var isCancelled = false

        init(id: UInt64) { self.id = id }
    }

    private enum Registration {
        case pending
        case cancelledBeforeRegistering
        case waiting(Key)
    }

    private struct State {
        var runs: [Key: Run] = [:]
        var registrations: [UInt64: Registration] = [:]
        var nextID: UInt64 = 0
        var started = 0
        var joined = 0
    }

    private let state = Lock(State())

    package init() {}

    /// How many runs were started, and how many waiters joined one already under way.
    package var counts: (started: Int, joined: Int) { state.withLock { ($0.started, $0.joined) } }

    /// The value for `key`: joins the run under way, or starts `work`. `product` is
    /// what the waiter makes of it (`nil`: nothing, the bytes are wanted as they are).
    package func value(
        for key: Key, product: ImageProduct?, priority: PriorityHandle,
        progress: (@Sendable (Int, Int?) -> Void)? = nil, work: @escaping Work
    ) async throws -> Outcome {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            state.registrations[state.nextID] = .pending
            return state.nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Outcome, any Error>) in
                let refused = state.withLock { state -> Bool in
                    guard case .pending = state.registrations[id] else {
                        state.registrations[id] = nil
                        return true
                    }
                    state.registrations[id] = .waiting(key)
                    let run: Run
                    if let existing = state.runs[key], !existing.isCancelled {
                        run = existing
                        state.joined += 1
                    } else {
                        state.nextID += 1
                        run = Run(id: state.nextID)
                        state.runs[key] = run
                        state.started += 1
                        run.task = start(run, key: key, work: work)
                    }
                    run.waiters[id] = Waiter(continuation: continuation, product: product, progress: progress)
                    run.priority.add(id, priority)
                    return false
                }
                if refused { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            leave(id)
        }
    }

    private func start(_ run: Run, key: Key, work: @escaping Work) -> Task<Void, Never> {
        let (handle, runID) = (run.priority, run.id)
        return Task.detached {
            let result: Result<Value, any Error>
            do {
                result = .success(try await work(handle, { self.progress(key, runID, $0, $1) }))
            } catch {
                result = .failure(error)
            }
            self.finish(key, runID, result)
        }
    }

    private func progress(_ key: Key, _ run: UInt64, _ received: Int, _ expected: Int?) {
        let listeners = state.withLock { state in
            state.runs[key].flatMap { $0.id == run ? $0.waiters.values.compactMap(\.progress) : nil } ?? []
        }
        for listener in listeners { listener(received, expected) }
    }

    private func finish(_ key: Key, _ runID: UInt64, _ result: Result<Value, any Error>) {
        let (waiters, once) = state.withLock { state -> ([(UInt64, Waiter)], RunOnce?) in
            guard let run = state.runs[key], run.id == runID else { return ([], nil) }
            state.runs[key] = nil
            for id in run.waiters.keys { state.registrations[id] = nil }
            return (run.waiters.sorted { $0.key < $1.key }, run.once)
        }
        guard let once else { return }
        var products: [ImageProduct] = []
        for case let product? in waiters.map(\.1.product) where !products.contains(product) {
            products.append(product)
        }
        for (index, (_, waiter)) in waiters.enumerated() {
            waiter.continuation.resume(
                with: result.map {
                    Outcome(value: $0, run: runID, products: products, isFirst: index == 0, once: once)
                })
        }
    }

    /// A waiter's task was cancelled: it leaves now; the last to leave cancels the run.
    private func leave(_ id: UInt64) {
        let waiter = state.withLock { state -> Waiter? in
            switch state.registrations[id] {
            case .pending:
                state.registrations[id] = .cancelledBeforeRegistering
                return nil
            case .waiting(let key):
                state.registrations[id] = nil
                guard let run = state.runs[key], let waiter = run.waiters.removeValue(forKey: id) else { return nil }
                run.priority.remove(id)
                if run.waiters.isEmpty {
                    run.isCancelled = true
                    run.task?.cancel()
                    state.runs[key] = nil
                }
                return waiter
            case .cancelledBeforeRegistering, nil:
                return nil
            }
        }
        waiter?.continuation.resume(throwing: CancellationError())
    }
}

/// What the waiters of one stage run do once between them, by name: the first to ask
/// runs it, the others wait for its answer. (A run's waiters all receive its outcome
/// at once, and each writes the entries it is responsible for: an image load and
/// `data(for:)` of one URL would otherwise both write the original's entry.)
package final class RunOnce: Sendable {
    private let tasks = Lock<[String: Task<Bool, Never>]>([:])

    /// `body`'s answer for `name`, run by the first caller only.
    func value(_ name: String, _ body: @escaping @Sendable () async -> Bool) async -> Bool {
        let task = tasks.withLock { tasks in
            if let running = tasks[name] { return running }
            // Not cancelled with the caller that started it: a write under way finishes,
            // and the other waiters need its answer.
            let task = Task { await body() }
            tasks[name] = task
            return task
        }
        return await task.value
    }
}
