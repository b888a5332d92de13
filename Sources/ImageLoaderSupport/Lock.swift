import Glibc
// The package's lock, and the one way its types wait for one another: a task suspends
// on a continuation kept under a lock, registered only if the task is not already
// cancelled (see `Lock.suspend(register:onCancel:)`).
import Synchronization

/// A value behind a pthread mutex: the package's one lock. Used instead of the standard
/// library's `Synchronization.Mutex` because on Linux that one takes its lock in
/// uninstrumented library code, so ThreadSanitizer sees no ordering between critical
/// sections and reports every contended one as a race (a ten-line program of four
/// threads and one `Mutex` shows it). Through `pthread_mutex_lock`, which the sanitizer
/// intercepts, `scripts/sanitize.sh thread` checks every lock of the package.
///
/// ```swift
/// let counter = Lock(0)
/// counter.withLock { $0 += 1 }
/// ```
package final class Lock<Value>: @unchecked Sendable {
    // Safe: `value` is read and written only inside `withLock`, while `mutex` is held,
    // so no two threads ever reach it at once; the mutex orders every access.
    private var value: Value
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    package init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        // Adaptive: a contended lock spins briefly before sleeping, as the standard
        // library's Mutex does; critical sections here are a few instructions long.
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value, the lock held.
    @inlinable
    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure)
        -> Result
    {
        lock()
        defer { unlock() }
        return try body(&storage)
    }

    @usableFromInline
    var storage: Value {
        _read { yield value }
        _modify { yield &value }
    }

    @usableFromInline
    func lock() { pthread_mutex_lock(mutex) }

    @usableFromInline
    func unlock() { pthread_mutex_unlock(mutex) }
}

extension Lock {
    /// Suspends the calling task on a continuation that `register` keeps in the locked
    /// value, until whoever finds it there resumes it, or until the task is cancelled:
    /// the package's one way to wait.
    ///
    /// `register` runs under the lock, and only when the task is not already cancelled;
    /// it keeps the continuation (and returns `nil`) or answers at once; `started` then
    /// runs, after the lock is released, when the continuation was kept (to start what
    /// will resume it, where that may answer on the spot). `remove` runs
    /// under the lock when the task is cancelled: it takes the continuation out if it is
    /// still there, and the waiter then throws `CancellationError`. Give each waiter an
    /// identity before the call, for `remove` to find it by.
    ///
    /// No waiter is ever left behind: a task is marked cancelled before its cancellation
    /// handler runs, and both that handler and the check before `register` take the
    /// lock, so either `register` sees the mark (and refuses), or `remove` finds the
    /// continuation. Nothing is resumed under the lock.
    ///
    /// ```swift
    /// let id = UUID()
    /// try await waiters.suspend { waiters, continuation in
    ///     waiters[id] = continuation
    ///     return nil
    /// } onCancel: { waiters in
    ///     waiters.removeValue(forKey: id)
    /// }
    /// ```
    package func suspend<T: Sendable>(
        register: (inout Value, CheckedContinuation<T, any Error>) -> Result<T, any Error>?,
        started: () -> Void = {},
        onCancel remove: @Sendable (inout Value) -> CheckedContinuation<T, any Error>?
    ) async throws -> T {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                let now = withLock { value -> Result<T, any Error>? in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    return register(&value, continuation)
                }
                if let now { continuation.resume(with: now) } else { started() }
            }
        } onCancel: {
            withLock { remove(&$0) }?.resume(throwing: CancellationError())
        }
    }
}

/// Identities for waiters and observers, unique in the process.
package enum Identity {
    private static let counter = Atomic<UInt64>(0)

    /// A number no other caller has had.
    package static func next() -> UInt64 {
        counter.add(1, ordering: .relaxed).newValue
    }
}
