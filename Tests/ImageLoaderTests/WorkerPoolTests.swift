import Foundation
import ImageLoaderSupport
import RasterImage
import TestSupport
import Testing

@testable import ImageLoader

@Suite("The worker pool's priority")
struct WorkerPoolTests {
    #if os(Linux)
    @Test("workers run the given niceness below the thread that made the pool; 0 leaves them as it")
    func niceness() async throws {
        let base = ThreadNiceness.current
        for (asked, expected) in [(0, base), (5, min(19, base + 5)), (40, 19)] {
            // Given a pool asked to run `asked` below this thread
            let pool = WorkerPool(threads: 2, niceness: asked)
            // When its threads report their nice value, on several jobs
            var seen = Set<Int>()
            for _ in 0..<6 { seen.insert(try await pool.run { ThreadNiceness.current }) }
            try await pool.shutdown()
            // Then every job ran at the expected value, and this thread kept its own
            #expect(seen == [expected], "asked \(asked)")
            #expect(ThreadNiceness.current == base)
        }
    }
    #endif
}

@Suite("Threads for blocking waits")
struct WaitingThreadsTests {
    @Test(
        "a cancelled caller stops waiting at once; what had not started never runs, what runs is dropped",
        .timeLimit(.minutes(1)))
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
