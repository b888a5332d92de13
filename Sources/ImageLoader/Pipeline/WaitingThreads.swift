import NIOConcurrencyHelpers
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
    private let state = NIOLockedValueBox(State.idle)

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
        let pool = try state.withLockedValue { state throws -> NIOThreadPool in
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
        let waiter = Waiter<T>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                guard waiter.wait(continuation) else { return }
                pool.submit { work in
                    guard case .active = work else {
                        return waiter.finish(.failure(NIOThreadPoolError.ThreadPoolInactive()))
                    }
                    guard !waiter.isFinished else { return }
                    waiter.finish(Result(catching: body))
                }
            }
        } onCancel: {
            waiter.finish(.failure(CancellationError()))
        }
    }

    /// One caller's continuation, resumed once: by the result, or by cancellation,
    /// whichever comes first.
    private final class Waiter<T: Sendable>: Sendable {
        private enum Phase {
            case starting
            case waiting(CheckedContinuation<T, any Error>)
            case cancelledEarly
            case finished
        }

        private let phase = NIOLockedValueBox(Phase.starting)

        /// Keeps `continuation`; false (and resumed with `CancellationError`) when the
        /// task was cancelled before it got here.
        func wait(_ continuation: CheckedContinuation<T, any Error>) -> Bool {
            let cancelled = phase.withLockedValue { phase -> Bool in
                guard case .starting = phase else {
                    phase = .finished
                    return true
                }
                phase = .waiting(continuation)
                return false
            }
            if cancelled { continuation.resume(throwing: CancellationError()) }
            return !cancelled
        }

        var isFinished: Bool {
            phase.withLockedValue { if case .finished = $0 { true } else { false } }
        }

        func finish(_ result: Result<T, any Error>) {
            let continuation = phase.withLockedValue { phase -> CheckedContinuation<T, any Error>? in
                switch phase {
                case .starting:
                    phase = .cancelledEarly
                    return nil
                case .waiting(let continuation):
                    phase = .finished
                    return continuation
                case .cancelledEarly, .finished:
                    return nil
                }
            }
            continuation?.resume(with: result)
        }
    }

    /// Stops the threads once what they run has returned; later calls to ``run(_:)`` throw.
    package func shutdown() async throws {
        let pool = state.withLockedValue { state -> NIOThreadPool? in
            defer { state = .stopped }
            if case .running(let pool) = state { return pool }
            return nil
        }
        try await pool?.shutdownGracefully()
    }
}
