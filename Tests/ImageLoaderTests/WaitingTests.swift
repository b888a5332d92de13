import ImageLoaderSupport
import TestSupport
import Testing

@testable import ImageLoader

@Suite("The one way to wait: Lock.suspend")
struct SuspendTests {
    typealias Waiters = Lock<[UInt64: CheckedContinuation<Int, any Error>]>

    /// Suspends on `waiters` under `id` until resumed or cancelled.
    static func wait(_ waiters: Waiters, _ id: UInt64) async throws -> Int {
        try await waiters.suspend { waiters, continuation in
            waiters[id] = continuation
            return nil
        } onCancel: { waiters in
            waiters.removeValue(forKey: id)
        }
    }

    @Test("a kept continuation is resumed by whoever finds it; an answer at registration returns at once")
    func resumed() async throws {
        let waiters = Waiters([:])
        let task = Task { try await Self.wait(waiters, 1) }
        try await waitUntil("registered") { waiters.withLock { $0[1] != nil } }
        waiters.withLock { $0.removeValue(forKey: 1) }?.resume(returning: 42)
        #expect(try await task.value == 42)
        let now = try await waiters.suspend { _, _ in
            .success(7)
        } onCancel: { _ in
            nil
        }
        #expect(now == 7)
        #expect(waiters.withLock { $0.isEmpty })
    }

    @Test("a task cancelled before it registers is refused and leaves nothing behind", arguments: 0..<20)
    func cancelledBefore(round: Int) async throws {
        let waiters = Waiters([:])
        let registered = Lock(false)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await waiters.suspend { waiters, continuation in
                registered.withLock { $0 = true }
                waiters[1] = continuation
                return nil
            } onCancel: { waiters in
                waiters.removeValue(forKey: 1)
            }
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(!registered.withLock { $0 })
        #expect(waiters.withLock { $0.isEmpty })
    }

    @Test("a waiter cancelled while it waits, or around its registration, throws and is removed", arguments: 0..<50)
    func cancelledAround(round: Int) async throws {
        let waiters = Waiters([:])
        let task = Task { try await Self.wait(waiters, 1) }
        // Half the rounds race the cancellation with the registration, half cancel a registered waiter.
        if round.isMultiple(of: 2) {
            try await waitUntil("registered") { waiters.withLock { $0[1] != nil } }
        }
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(waiters.withLock { $0.isEmpty })
    }
}

@Suite("Priority handles")
struct PriorityHandleTests {
    @Test("a run's rank is the highest of its members', through two levels, as members come, change and go")
    func tree() {
        let run = PriorityHandle(rank: 0)
        let load = PriorityHandle(.low)
        let other = PriorityHandle(.normal)
        let seen = Lock<[Int]>([])
        _ = run.observe(Identity.next()) { _, rank in seen.withLock { $0.append(rank) } }
        run.add(1, load)
        run.add(2, other)
        #expect(run.rank == LoadPriority.normal.rawValue)
        load.ownRank = LoadPriority.veryHigh.rawValue
        #expect(run.rank == LoadPriority.veryHigh.rawValue)
        run.remove(1)
        #expect(run.rank == LoadPriority.normal.rawValue)
        // A member that left no longer counts.
        load.ownRank = LoadPriority.veryHigh.rawValue + 1
        #expect(run.rank == LoadPriority.normal.rawValue)
        #expect(seen.withLock { $0 } == [1, 2, 4, 2])
    }
}

@Suite("The scheduler's order")
struct SchedulerOrderTests {
    /// Queues one waiter per rank in `ranks` behind a held slot, then frees it: the ranks in the order they ran.
    func order(_ ranks: [Int], _ order: WorkScheduler.Order, raising: (index: Int, to: Int)? = nil) async throws
        -> [Int]
    {
        let scheduler = WorkScheduler(limit: 1, order: order)
        let gate = Gate()
        let held = Counter()
        let holder = try await WorkSchedulerTests().holdSlot(scheduler, until: gate, counting: held)
        let ran = Lock<[Int]>([])
        let handles = ranks.map { PriorityHandle(rank: $0) }
        var tasks: [Task<Void, any Error>] = []
        for (index, handle) in handles.enumerated() {
            // Each waiter through a run's handle, as a shared download's would.
            let run = PriorityHandle(rank: 0)
            run.add(UInt64(index), handle)
            tasks.append(Task { try await scheduler.run(priority: run) { ran.withLock { $0.append(index) } } })
            try await waitUntil("queued") { scheduler.waiting == index + 1 }
        }
        if let raising { handles[raising.index].ownRank = raising.to }
        gate.open()
        try await holder.value
        for task in tasks { try await task.value }
        return ran.withLock { $0 }
    }

    @Test("the highest rank first; arrival order within a rank, first or last; a rank raised while queued counts")
    func picks() async throws {
        #expect(try await order([1, 3, 1, 3, 2], .fifo) == [1, 3, 4, 0, 2])
        #expect(try await order([1, 3, 1, 3, 2], .lifo) == [3, 1, 4, 2, 0])
        #expect(try await order([1, 1, 1], .fifo, raising: (2, 5)) == [2, 0, 1])
        #expect(try await order([4, 1, 1], .fifo, raising: (0, 0)) == [1, 2, 0])
    }

    @Test("10,000 waiters behind one slot all run, each once")
    func long() async throws {
        let scheduler = WorkScheduler(limit: 1, order: .fifo)
        let gate = Gate()
        let holder = try await WorkSchedulerTests().holdSlot(scheduler, until: gate, counting: Counter())
        let ran = Lock<[Int]>([])
        var tasks: [Task<Void, any Error>] = []
        for index in 0..<10_000 {
            tasks.append(
                Task {
                    try await scheduler.run(priority: PriorityHandle(.veryLow)) { ran.withLock { $0.append(index) } }
                })
        }
        try await waitUntil("all queued") { scheduler.waiting == 10_000 }
        gate.open()
        try await holder.value
        for task in tasks { try await task.value }
        #expect(ran.withLock { $0.count } == 10_000)
        #expect(Set(ran.withLock { $0 }).count == 10_000)
    }
}
