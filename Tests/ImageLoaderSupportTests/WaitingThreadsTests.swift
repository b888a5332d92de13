import Dispatch
import ImageLoaderSupport
import TestSupport
import Testing

@Suite("Threads for blocking waits")
struct WaitingThreadsTests {
    @Test(
        "a cancelled caller stops waiting at once; what had not started never runs, what runs is dropped",
        // A hang, not a busy machine: with the suite's other tests on both cores, one of
        // its awaits waited over a minute for the cooperative pool (73 s, both cores busy).
        .timeLimit(.minutes(3)))
    func cancellationDoesNotWait() async throws {
        // Given one thread, held by a call that blocks until released
        let threads = WaitingThreads(threads: 1)
        let gate = DispatchSemaphore(value: 0)
        let started = Lock(false)
        let ran = Lock(false)
        let holder = Task {
            try await threads.run {
                started.withLock { $0 = true }
                gate.wait()
                return 1
            }
        }
        // (Waited for without blocking one of the test process's cooperative threads.)
        try await waitUntil("the holder on its thread") { started.withLock { $0 } }
        // When a second call waits for the thread and is cancelled
        // (Cancelled either while it waits for the thread or before it asks: both must hold.)
        let queued = Task { try await threads.run { ran.withLock { $0 = true } } }
        await Task.yield()
        queued.cancel()
        // Then it throws CancellationError while the thread is still held
        await #expect(throws: CancellationError.self) { try await queued.value }
        // And the holder, cancelled too, stops waiting although its call still runs
        holder.cancel()
        await #expect(throws: CancellationError.self) { try await holder.value }
        gate.signal()
        // And the pool goes on: the cancelled call was skipped, a new one runs
        #expect(try await threads.run { 7 } == 7)
        #expect(ran.withLock { $0 } == false)
        // And a task cancelled before it asks never waits
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await threads.run { 8 }
        }
        await #expect(throws: CancellationError.self) { try await early.value }
        await threads.shutdown()
        await #expect(throws: (any Error).self) { try await threads.run { 9 } }
    }
}
