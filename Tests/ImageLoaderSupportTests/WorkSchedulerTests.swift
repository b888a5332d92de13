import ImageLoaderSupport
import TestSupport
import Testing

@Suite("The scheduler's slots and queue")
struct WorkSchedulerTests {
    /// Takes `scheduler`'s only slot until `gate` opens; returns once it holds it.
    func holdSlot(_ scheduler: WorkScheduler, until gate: Gate, counting started: Counter) async throws
        -> Task<Void, any Error>
    {
        let holder = Task {
            try await scheduler.run(priority: PriorityHandle(rank: 2)) {
                started.add()
                await gate.wait()
            }
        }
        try await waitUntil("the slot held") { started.value == 1 }
        return holder
    }

    @Test("with the slots taken and the queue full, work is refused at once; queued work runs when a slot frees")
    func boundedQueue() async throws {
        let scheduler = WorkScheduler(limit: 1, order: .fifo, maxWaiting: 2)
        let gate = Gate()
        let started = Counter()
        let running = try await holdSlot(scheduler, until: gate, counting: started)
        let queued = (0..<2).map { _ in
            Task { try await scheduler.run(priority: PriorityHandle(rank: 2)) { started.add() } }
        }
        try await waitUntil("two queued") { scheduler.waiting == 2 }
        await #expect(throws: WorkScheduler.Full.self) {
            try await scheduler.run(priority: PriorityHandle(rank: 2)) { Issue.record("ran while the slot was held") }
        }
        gate.open()
        try await running.value
        for task in queued { try await task.value }
        #expect(started.value == 3)
    }

    @Test("a task cancelled before it asks never takes a slot", arguments: 0..<20)
    func cancelledEarly(round: Int) async throws {
        let scheduler = WorkScheduler(limit: 1, order: .fifo)
        let gate = Gate()
        let started = Counter()
        let holder = try await holdSlot(scheduler, until: gate, counting: started)
        let late = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await scheduler.run(priority: PriorityHandle(rank: 2)) { started.add() }
        }
        let result = await late.result
        guard case .failure(let error) = result, error is CancellationError else {
            Issue.record("got \(result)")
            return
        }
        gate.open()
        try await holder.value
        #expect(started.value == 1)
    }
}

/// A thread-safe count for tests.
final class Counter: Sendable {
    private let count = Lock(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
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
                    try await scheduler.run(priority: PriorityHandle(rank: 0)) { ran.withLock { $0.append(index) } }
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
