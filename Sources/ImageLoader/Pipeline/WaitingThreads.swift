import ImageLoaderSupport
import NIOPosix

/// Threads of their own for blocking calls that wait rather than compute (resolving a
/// host name, reading a file), started on first use.
///
/// They are kept apart from NIO's shared blocking pool (`NIOThreadPool.singleton`, one
/// thread per core, which the whole process shares). A lookup stuck on a slow name
/// server holds its thread until `getaddrinfo` gives up, long after the request that
/// asked has timed out: on the shared pool a few such lookups, which anyone who can name
/// a source can cause, would stall every other user of it, and a slow disk would stall
/// name resolution. They are kept apart from the decoding workers too, where a wait
/// would hold a decoding slot.
package final class WaitingThreads: Sendable {
    private enum State {
        case idle
        case running(NIOThreadPool)
        case stopped
    }

    private let threads: Int
    private let state = Lock(State.idle)

    /// A pool of `threads` threads (at least 1), none started yet.
    package init(threads: Int) {
        self.threads = max(1, threads)
    }

    /// Runs `body` on one of the threads, starting them on first use. Throws what
    /// `body` throws, or NIO's `ThreadPoolInactive` once ``shutdown()`` has run.
    ///
    /// A task cancelled while it waits (for a thread, or for `body`) stops waiting at
    /// once and throws `CancellationError`: a timeout around this call holds however
    /// long the blocking call takes. `body` is then not started, or, when it already
    /// runs, finishes on its thread and its result is dropped.
    package func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        let pool = try state.withLock { state throws(NIOThreadPoolError.ThreadPoolInactive) -> NIOThreadPool in
            switch state {
            case .running(let pool):
                return pool
            case .idle:
                let pool = NIOThreadPool(numberOfThreads: threads)
                pool.start()
                state = .running(pool)
                return pool
            case .stopped:
                throw NIOThreadPoolError.ThreadPoolInactive()
            }
        }
        // The caller's continuation, until the result or the cancellation takes it.
        let slot = Lock<CheckedContinuation<T, any Error>?>(nil)
        return try await slot.suspend { slot, continuation in
            slot = continuation
            return nil
        } started: {
            // Outside the lock: a pool that has stopped runs the item here and now.
            pool.submit { work in
                // Taken by a cancellation already: `body` is not started.
                guard slot.withLock({ $0 != nil }) else { return }
                let result: Result<T, any Error> =
                    if case .active = work { Result(catching: body) } else {
                        .failure(NIOThreadPoolError.ThreadPoolInactive())
                    }
                slot.withLock { $0.take() }?.resume(with: result)
            }
        } onCancel: { slot in
            slot.take()
        }
    }

    /// Stops the threads once what they run has returned; later calls to ``run(_:)`` throw.
    package func shutdown() async throws {
        let pool = state.withLock { state -> NIOThreadPool? in
            defer { state = .stopped }
            if case .running(let pool) = state { return pool }
            return nil
        }
        try await pool?.shutdownGracefully()
    }
}
