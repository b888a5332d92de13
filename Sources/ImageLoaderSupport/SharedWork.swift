/// Work shared by key: at most one run per key at a time, whatever number of members
/// wait for it (the loader's loads, downloads and decodes, the service's thumbnails).
/// A run's priority is the highest of its members'; when the last member leaves, the
/// run is cancelled, unless it was asked to keep running. A member that leaves hears
/// nothing more of the run.
///
/// Members come two ways, with the same bookkeeping:
/// - a task that awaits ``value(for:product:priority:onEvent:work:)``: it waits through
///   ``Lock/suspend(register:started:onCancel:)``, so registration and removal happen
///   under one lock, and a task cancelled before it registered is refused there, never
///   left behind; it gets `CancellationError` at once when cancelled;
/// - code that cannot suspend (an `AsyncStream`'s builder) calls
///   ``join(_:key:_:keepsRunning:work:)`` and ``leave(_:key:)`` synchronously, and
///   hears the end through its ``Member``'s `onEnd`.
///
/// While it runs, the work can report `Event`s (download progress, a load's events)
/// to every member; those the `replaying` rule keeps are replayed to members who join
/// later, so every member sees the whole sequence. Each member may bring a `Tag`, what
/// it will make of the value (the loader's image products): every member learns the
/// tags of all the run's members, to make each of them once.
package final class SharedWork<
    Key: Hashable & Sendable, Value: Sendable, Tag: Equatable & Sendable, Event: Sendable
>: Sendable {
    /// What a member receives: the value, the run's identity (for the keys of later
    /// stages) and the tags of the members there were when it ended, earliest first.
    package struct Outcome: Sendable {
        package let value: Value
        package let run: UInt64
        /// The members' tags when the run ended, earliest first, without repeats.
        package let products: [Tag]
        /// Whether this member was the first to join: it does what must happen once per
        /// run (remembering a failed request).
        package let isFirst: Bool
        /// Work that must happen once per run, whichever member asks first (one disk
        /// write per download, however many loads of the URL share it).
        package let once: RunOnce
    }

    /// What a run's work is handed.
    package struct RunContext: Sendable {
        /// The run's priority: the highest of its members' (and of its floor).
        package let priority: PriorityHandle
        /// Tells every member of the run now, and the members who join later when the
        /// `replaying` rule keeps the event.
        package let report: @Sendable (Event) -> Void
        /// Lets the run finish even when every member has left (a revalidation that
        /// must not be cut short by the caller who got the stale image).
        package let keepRunning: @Sendable () -> Void
    }

    package typealias Work = @Sendable (RunContext) async throws -> Value

    /// One member of a run: its priority, what it will make of the value, and how it
    /// hears the run's events and its end.
    package struct Member: Sendable {
        fileprivate enum End {
            case resume(CheckedContinuation<Outcome, any Error>)
            case call(@Sendable (Result<Outcome, any Error>) -> Void)
        }

        let priority: PriorityHandle
        let product: Tag?
        let onEvent: (@Sendable (Event) -> Void)?
        fileprivate let end: End

        package init(
            priority: PriorityHandle, product: Tag? = nil, onEvent: (@Sendable (Event) -> Void)? = nil,
            onEnd: @escaping @Sendable (Result<Outcome, any Error>) -> Void
        ) {
            self.init(priority: priority, product: product, onEvent: onEvent, end: .call(onEnd))
        }

        fileprivate init(priority: PriorityHandle, product: Tag?, onEvent: (@Sendable (Event) -> Void)?, end: End) {
            (self.priority, self.product, self.onEvent, self.end) = (priority, product, onEvent, end)
        }

        fileprivate func ended(_ result: Result<Outcome, any Error>) {
            switch end {
            case .resume(let continuation): continuation.resume(with: result)
            case .call(let onEnd): onEnd(result)
            }
        }
    }

    /// What ``join(_:key:_:keepsRunning:work:)`` did.
    package enum Joining: Sendable, Equatable {
        /// Started a new run.
        case started
        /// Joined the run under way.
        case joined
        /// Nothing: the work was shut down.
        case refused
    }

    /// Thrown to a waiter that arrives after ``shutdown()``.
    package struct ShutDown: Error {}

    private final class Run: @unchecked Sendable {
        // Safe: the variables are read and written only with the work's `state` lock
        // held (the work's reports and its end reach the run itself, under that lock);
        // the constants are Sendable.
        let id = Identity.next()
        let priority: PriorityHandle
        /// Started with no member (a prefetch): only such a run can be cancelled unattended.
        let isUnattended: Bool
        var members: [UInt64: Member] = [:]
        var history: [Event] = []
        var keepsRunning: Bool
        var task: Task<Void, Never>?
        /// Whether new members join this run: false once it is cancelled or has ended.
        var isCurrent = true

        init(floor: Int, unattended: Bool) {
            priority = PriorityHandle(rank: floor)
            isUnattended = unattended
            keepsRunning = unattended
        }
    }

    private struct State {
        /// The run each key's new members join.
        var runs: [Key: Run] = [:]
        /// Every run whose work has not returned, cancelled ones too, by run.
        var tasks: [UInt64: Task<Void, Never>] = [:]
        var started = 0
        var joined = 0
        var isShutDown = false
    }

    private let state = Lock(State())
    private let floor: Int
    private let replays: @Sendable (Event) -> Bool

    /// - Parameters:
    ///   - floor: the lowest rank a run has, whatever its members' (a run whose members
    ///     have all left but which keeps running still has this one).
    ///   - replaying: which events are kept for members who join later.
    package init(floor: Int = .min, replaying: @escaping @Sendable (Event) -> Bool = { _ in false }) {
        self.floor = floor
        replays = replaying
    }

    /// How many runs were started, and how many members joined one already under way.
    package var counts: (started: Int, joined: Int) { state.withLock { ($0.started, $0.joined) } }

    /// The value for `key`: joins the run under way, or starts `work`. `product` is
    /// what the waiter makes of it (`nil`: nothing, the value is wanted as it is).
    /// `onJoin` is called (under the lock: keep it short) when the caller joins a run
    /// under way rather than starting one.
    package func value(
        for key: Key, product: Tag?, priority: PriorityHandle, onEvent: (@Sendable (Event) -> Void)? = nil,
        onJoin: (@Sendable () -> Void)? = nil, work: @escaping Work
    ) async throws -> Outcome {
        let id = Identity.next()
        return try await state.suspend { state, continuation in
            let member = Member(priority: priority, product: product, onEvent: onEvent, end: .resume(continuation))
            let joining = join(id, key: key, member, keepsRunning: false, work: work, in: &state)
            if joining == .joined { onJoin?() }
            return joining == .refused ? .failure(ShutDown()) : nil
        } onCancel: { state in
            guard case .resume(let continuation) = self.remove(id, key: key, in: &state)?.end else { return nil }
            return continuation
        }
    }

    /// Joins the run for `key`, or starts `work`, synchronously. The member hears the
    /// replayed events before this returns, the later ones as they come, and the end
    /// through its `onEnd` (unless it leaves first). `keepsRunning`: the run finishes
    /// even when every member has left.
    @discardableResult
    package func join(_ id: UInt64, key: Key, _ member: Member, keepsRunning: Bool = false, work: @escaping Work)
        -> Joining
    {
        state.withLock { join(id, key: key, member, keepsRunning: keepsRunning, work: work, in: &$0) }
    }

    /// The member `id` leaves `key`'s run and hears nothing more of it. The last to
    /// leave cancels the run, unless it keeps running.
    package func leave(_ id: UInt64, key: Key) {
        state.withLock { _ = remove(id, key: key, in: &$0) }
    }

    /// Starts `work` for `key` with no member, to keep running (a prefetch), unless a
    /// run is under way or the work was shut down.
    package func startUnattended(key: Key, work: @escaping Work) {
        state.withLock { state in
            guard !state.isShutDown, state.runs[key] == nil else { return }
            _ = start(key: key, unattended: true, work: work, in: &state)
        }
    }

    /// Cancels `key`'s run if it was started unattended and no member waits on it now.
    /// (A run a member started is never an unattended one's to cancel.)
    package func cancelUnattended(key: Key) {
        state.withLock { state in
            guard let run = state.runs[key], run.isUnattended, run.members.isEmpty else { return }
            cancel(run, key: key, in: &state)
        }
    }

    /// Sets the rank of `key`'s run and of its members' handles.
    package func setRank(_ rank: Int, key: Key) {
        let handles = state.withLock { state -> [PriorityHandle] in
            guard let run = state.runs[key] else { return [] }
            return [run.priority] + run.members.values.map { $0.priority }
        }
        for handle in handles { handle.ownRank = rank }
    }

    /// The tasks of the runs still going, those cancelled and winding down among them.
    package var runningTasks: [Task<Void, Never>] { state.withLock { Array($0.tasks.values) } }

    /// Refuses new members and runs from now on; returns the tasks still going.
    package func shutdown() -> [Task<Void, Never>] {
        state.withLock { state in
            state.isShutDown = true
            return Array(state.tasks.values)
        }
    }

    private func join(
        _ id: UInt64, key: Key, _ member: Member, keepsRunning: Bool, work: @escaping Work, in state: inout State
    ) -> Joining {
        guard !state.isShutDown else { return .refused }
        let run: Run
        let joining: Joining
        if let existing = state.runs[key] {
            run = existing
            state.joined += 1
            joining = .joined
        } else {
            run = start(key: key, unattended: false, work: work, in: &state)
            joining = .started
        }
        run.members[id] = member
        run.priority.add(id, member.priority)
        if keepsRunning { run.keepsRunning = true }
        // Under the lock: an event reported meanwhile cannot overtake the replay.
        if let onEvent = member.onEvent { for event in run.history { onEvent(event) } }
        return joining
    }

    private func remove(_ id: UInt64, key: Key, in state: inout State) -> Member? {
        // A member whose run has ended heard its end, and is in no run: ids are never reused.
        guard let run = state.runs[key], let member = run.members.removeValue(forKey: id) else { return nil }
        run.priority.remove(id)
        if run.members.isEmpty && !run.keepsRunning { cancel(run, key: key, in: &state) }
        return member
    }

    private func cancel(_ run: Run, key: Key, in state: inout State) {
        run.isCurrent = false
        run.task?.cancel()
        // New members start a new run; this one's task is still waited for until it returns.
        state.runs[key] = nil
    }

    private func start(key: Key, unattended: Bool, work: @escaping Work, in state: inout State) -> Run {
        let run = Run(floor: floor, unattended: unattended)
        state.runs[key] = run
        state.started += 1
        // The run itself, not its key, reaches the work's reports: no hashing per event.
        // (The task holds the run until it ends, and the run its task until then.)
        let context = RunContext(
            priority: run.priority, report: { self.report($0, of: run) },
            keepRunning: { self.state.withLock { _ in if run.isCurrent { run.keepsRunning = true } } })
        // Under the lock, so the task is filed before its end can remove it.
        let task = Task.detached {
            let result: Result<Value, any Error>
            do {
                result = .success(try await work(context))
            } catch {
                result = .failure(error)
            }
            self.finish(run, key: key, result)
        }
        run.task = task
        state.tasks[run.id] = task
        return run
    }

    private func report(_ event: Event, of run: Run) {
        // A copy of the members (a reference count), called outside the lock.
        let members = state.withLock { _ -> [UInt64: Member] in
            guard run.isCurrent else { return [:] }
            if replays(event) { run.history.append(event) }
            return run.members
        }
        for member in members.values { member.onEvent?(event) }
    }

    private func finish(_ run: Run, key: Key, _ result: Result<Value, any Error>) {
        let members = state.withLock { state -> [UInt64: Member]? in
            state.tasks[run.id] = nil
            run.task = nil
            guard run.isCurrent else { return nil }
            run.isCurrent = false
            state.runs[key] = nil
            return run.members
        }
        guard let members else { return }
        // The members' handles stop reporting to this run's, which nothing reads any more.
        run.priority.removeAllMembers()
        // Made as the run ends, for the members there are then (none for a prefetch no one joined).
        let once = RunOnce()
        let order = members.keys.sorted()
        var products: [Tag] = []
        for id in order {
            if let product = members[id]?.product, !products.contains(product) { products.append(product) }
        }
        for (index, id) in order.enumerated() {
            members[id]?.ended(
                result.map { Outcome(value: $0, run: run.id, products: products, isFirst: index == 0, once: once) })
        }
    }
}

/// What the members of one stage run do once between them, by name: the first to ask
/// runs it, the others wait for its answer. (A run's members all receive its outcome
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
