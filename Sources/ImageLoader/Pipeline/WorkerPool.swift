import ImageLoaderSupport
import NIOConcurrencyHelpers
import NIOPosix

/// Threads for blocking work (decoding, resampling, disk I/O), so it never holds a
/// thread of Swift's cooperative pool. A thin wrapper over NIOThreadPool, whose threads
/// may run at a lower priority than the rest of the process.
final class WorkerPool: Sendable {
    private let pool: NIOThreadPool
    /// How many threads the pool has.
    let threads: Int
    /// The nice value the threads run at; nil: the process's own.
    private let niceness: Int?

    /// `threads` threads, each `niceness` (0 to 19) below the priority of the thread
    /// that makes the pool.
    init(threads: Int, niceness: Int = 0) {
        self.threads = max(1, threads)
        pool = NIOThreadPool(numberOfThreads: self.threads)
        self.niceness = niceness > 0 ? ThreadNiceness.current + min(niceness, 19) : nil
        pool.start()
    }

    /// Runs `body` on a worker thread. Throws what `body` throws, or NIO's
    /// `NIOThreadPoolError.ThreadPoolInactive` once the pool is stopped.
    func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        guard let niceness else { return try await pool.runIfActive(body) }
        return try await pool.runIfActive {
            // NIOThreadPool has no hook for its threads' start: each job sees to it (a
            // system call; the priority is set on the thread's first job).
            ThreadNiceness.lowerCurrentThread(to: niceness)
            return try body()
        }
    }

    /// Runs `body` once on each thread, when the pool is idle: one job a thread, each
    /// held until all have started (at most `patience`), so that no thread takes two.
    /// A thread still busy after `patience` is left out. For per-thread state such as
    /// the C library's malloc arenas (``MemoryAllocator/returnFreeMemory(onEveryThread:)``).
    func runOnEveryThread(patience: Double = 0.1, _ body: @escaping @Sendable () -> Void) async {
        let arrived = NIOLockedValueBox(0)
        let allArrived = ConditionLock(value: false)
        let count = threads
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<count {
                group.addTask { [pool] in
                    _ = try? await pool.runIfActive {
                        body()
                        let order = arrived.withLockedValue { arrivals in
                            arrivals += 1
                            return arrivals
                        }
                        if order == count {
                            allArrived.lock()
                            allArrived.unlock(withValue: true)
                        } else if allArrived.lock(whenValue: true, timeoutSeconds: patience) {
                            allArrived.unlock()
                        }
                    }
                }
            }
        }
    }

    func shutdown() async throws {
        try await pool.shutdownGracefully()
    }
}
