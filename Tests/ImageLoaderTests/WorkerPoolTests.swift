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

    @Test("runOnEveryThread runs its body once on each of the pool's threads")
    func everyThreadOnce() async throws {
        for threads in [1, 3] {
            // Given an idle pool of `threads` threads
            let pool = WorkerPool(threads: threads)
            // When a body that records its thread runs on every thread
            let seen = Lock<[pthread_t]>([])
            await pool.runOnEveryThread(patience: 60) { seen.withLock { $0.append(pthread_self()) } }
            try await pool.shutdown()
            // Then it ran once a thread: as many times as threads, on as many threads
            let ran = seen.withLock { $0 }
            #expect(ran.count == threads)
            #expect(Set(ran).count == threads)
        }
    }
}
