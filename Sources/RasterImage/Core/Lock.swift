#if canImport(Glibc)
import Glibc
#endif

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
