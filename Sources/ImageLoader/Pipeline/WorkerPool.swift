import ImageLoaderSupport
import NIOPosix

/// Threads for blocking work (decoding, resampling, disk I/O), so it never holds a
/// thread of Swift's cooperative pool. A thin wrapper over NIOThreadPool, whose threads
/// may run at a lower priority than the rest of the process.
final class WorkerPool: Sendable {
    private let pool: NIOThreadPool
    /// The nice value the threads run at; nil: the process's own.
    private let niceness: Int?

    /// `threads` threads, each `niceness` (0 to 19) below the priority of the thread
    /// that makes the pool.
    init(threads: Int, niceness: Int = 0) {
        pool = NIOThreadPool(numberOfThreads: max(1, threads))
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

    func shutdown() async throws {
        try await pool.shutdownGracefully()
    }
}
