import ImageLoaderSupport
import RasterImage
import TestSupport
import Testing

@testable import ImageLoader

@Suite("The scheduler's slots and queue")
struct WorkSchedulerTests {
    /// Takes `scheduler`'s only slot until `gate` opens; returns once it holds it.
    func holdSlot(_ scheduler: WorkScheduler, until gate: Gate, counting started: Counter) async throws
        -> Task<Void, any Error>
    {
        let holder = Task {
            try await scheduler.run(priority: PriorityHandle(.normal)) {
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
            Task { try await scheduler.run(priority: PriorityHandle(.normal)) { started.add() } }
        }
        try await waitUntil("two queued") { scheduler.waiting == 2 }
        await #expect(throws: WorkScheduler.Full.self) {
            try await scheduler.run(priority: PriorityHandle(.normal)) { Issue.record("ran while the slot was held") }
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
            return try await scheduler.run(priority: PriorityHandle(.normal)) { started.add() }
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
