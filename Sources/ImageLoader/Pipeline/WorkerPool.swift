import NIOPosix

/// Threads for blocking work (decoding, resampling, disk I/O), so it never holds a
/// thread of Swift's cooperative pool. A thin wrapper over NIOThreadPool.
final class WorkerPool: Sendable {
    private let pool: NIOThreadPool

    init(threads: Int) {
        pool = NIOThreadPool(numberOfThreads: max(1, threads))
        pool.start()
    }

    /// Runs `body` on a worker thread. Throws what `body` throws, or
    /// `ImageLoadingError(.shutDown)` once the pool is stopped.
    func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await pool.runIfActive(body)
    }

    func shutdown() async throws {
        try await pool.shutdownGracefully()
    }
}
