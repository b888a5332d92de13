/// Work shared by key: at most one run per key at a time, whatever number of callers
/// wait for it (the loader's downloads and decodes, the service's thumbnails). The
/// run's priority is the highest of its waiters'; when the last waiter leaves, the run
/// is cancelled. A waiter that leaves gets `CancellationError` at once.
///
/// Each waiter may bring a `Tag`, what it will make of the value (the loader's image
/// products): every waiter learns the tags of all the run's waiters, to make each of
/// them once.
///
/// Waiters wait through ``Lock/suspend(register:started:onCancel:)``: registration and
/// removal happen under one lock, and a waiter cancelled before it registered is
/// refused there, never left behind.
package final class SharedWork<Key: Hashable & Sendable, Value: Sendable, Tag: Equatable & Sendable>: Sendable {
    /// What a waiter receives: the value, the run's identity (for the keys of later
    /// stages) and the tags of the waiters there were when it ended, earliest first.
    package struct Outcome: Sendable {
        package let value: Value
        package let run: UInt64
        /// The waiters' tags when the run ended, earliest first, without repeats.
        package let products: [Tag]
        /// Whether this waiter was the first to ask: it does what must happen once per
        /// run (remembering a failed request).
        package let isFirst: Bool
        /// Work that must happen once per run, whichever waiter asks first (one disk
        /// write per download, however many loads of the URL share it).
        package let once: RunOnce
    }

    package typealias Work =
        @Sendable (_ priority: PriorityHandle, _ progress: @escaping @Sendable (Int, Int?) -> Void)
        async throws -> Value

    private struct Waiter {
        let continuation: CheckedContinuation<Outcome, any Error>
        let product: Tag?
        let progress: (@Sendable (Int, Int?) -> Void)?
    }

    private final class Run {
        let id: UInt64
        let priority = PriorityHandle(rank: Int.min)
        let once = RunOnce()
        var waiters: [UInt64: Waiter] = [:]
        var task: Task<Void, Never>?
        var isCancelled = false

        init(id: UInt64) { self.id = id }
    }

    private struct State {
        var runs: [Key: Run] = [:]
        var started = 0
        var joined = 0
    }

    private let state = Lock(State())

    package init() {}

    /// How many runs were started, and how many waiters joined one already under way.
    package var counts: (started: Int, joined: Int) { state.withLock { ($0.started, $0.joined) } }

    /// The value for `key`: joins the run under way, or starts `work`. `product` is
    /// what the waiter makes of it (`nil`: nothing, the value is wanted as it is).
    package func value(
        for key: Key, product: Tag?, priority: PriorityHandle,
        progress: (@Sendable (Int, Int?) -> Void)? = nil, work: @escaping Work
    ) async throws -> Outcome {
        let id = Identity.next()
        return try await state.suspend { state, continuation in
            let run: Run
            if let existing = state.runs[key], !existing.isCancelled {
                run = existing
                state.joined += 1
            } else {
                run = Run(id: Identity.next())
                state.runs[key] = run
                state.started += 1
                run.task = start(run, key: key, work: work)
            }
            run.waiters[id] = Waiter(continuation: continuation, product: product, progress: progress)
            run.priority.add(id, priority)
            return nil
        } onCancel: { state in
            // The waiter leaves now; the last to leave cancels the run. (A waiter whose
            // run has ended was resumed by it, and is in no run: ids are never reused.)
            guard let run = state.runs[key], let waiter = run.waiters.removeValue(forKey: id) else { return nil }
            run.priority.remove(id)
            if run.waiters.isEmpty {
                run.isCancelled = true
                run.task?.cancel()
                state.runs[key] = nil
            }
            return waiter.continuation
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
            // The waiters' handles stop reporting to this run's, which nothing reads any more.
            for id in run.waiters.keys { run.priority.remove(id) }
            return (run.waiters.sorted { $0.key < $1.key }, run.once)
        }
        guard let once else { return }
        var products: [Tag] = []
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
}

/// What the waiters of one stage run do once between them, by name: the first to ask
/// runs it, the others wait for its answer. (A run's waiters all receive its outcome
/// at once, and each writes the entries it is responsible for: an image load and
/// `data(for:)` of one URL would otherwise both write the original's entry.)
package final class RunOnce: Sendable {
    private let tasks = Lock<[String: Task<Bool, Never>]>([:])

    /// `body`'s answer for `name`, run by the first caller only.
    package func value(_ name: String, _ body: @escaping @Sendable () async -> Bool) async -> Bool {
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
