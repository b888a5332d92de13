import Glibc

/// Threads of their own for blocking calls that wait rather than compute (resolving a
/// host name, reading a file), started as they are needed, up to a limit.
///
/// They are kept apart from NIO's shared blocking pool (`NIOThreadPool.singleton`, one
/// thread per core, which the whole process shares). A lookup stuck on a slow name
/// server holds its thread until `getaddrinfo` gives up, long after the request that
/// asked has timed out: on the shared pool a few such lookups, which anyone who can name
/// a source can cause, would stall every other user of it, and a slow disk would stall
/// name resolution. They are kept apart from the decoding workers too, where a wait
/// would hold a decoding slot.
///
/// A pthread pool of its own (a queue under a mutex, and a condition the idle threads
/// wait on), so that this target needs nothing but the C library.
package final class WaitingThreads: @unchecked Sendable {
    // Safe: `queue`, `isStopped`, `started`, `idle`, `exited` and `stopWaiters` are read
    // and written only while `mutex` is held (the threads' loop, `submit`, `shutdown`);
    // `limit` is constant.

    /// ``WaitingThreads/run(_:)`` after ``WaitingThreads/shutdown()``.
    package struct Stopped: Error, Sendable, Hashable {
        package init() {}
    }

    /// A queued call: told whether it may run (false once the threads have stopped).
    private typealias Item = (Bool) -> Void

    private let limit: Int
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var queue: [Item] = []
    private var head = 0
    private var isStopped = false
    private var started = 0
    private var idle = 0
    private var exited = 0
    private var stopWaiters: [CheckedContinuation<Void, Never>] = []

    /// A pool of up to `threads` threads (at least 1), none started yet.
    package init(threads: Int) {
        limit = max(1, threads)
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        condition.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` on one of the threads. Throws what `body` throws, or ``Stopped``
    /// once ``shutdown()`` has run.
    ///
    /// A task cancelled while it waits (for a thread, or for `body`) stops waiting at
    /// once and throws `CancellationError`: a timeout around this call holds however
    /// long the blocking call takes. `body` is then not started, or, when it already
    /// runs, finishes on its thread and its result is dropped.
    package func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        // The caller's continuation, until the result or the cancellation takes it.
        let slot = Lock<CheckedContinuation<T, any Error>?>(nil)
        return try await slot.suspend { slot, continuation in
            slot = continuation
            return nil
        } started: {
            // Outside the slot's lock: a stopped pool answers the item here and now.
            submit { active in
                // Taken by a cancellation already: `body` is not started.
                guard slot.withLock({ $0 != nil }) else { return }
                let result: Result<T, any Error> = active ? Result(catching: body) : .failure(Stopped())
                slot.withLock { $0.take() }?.resume(with: result)
            }
        } onCancel: { slot in
            slot.take()
        }
    }

    /// Stops the threads once what they run, and what is queued, has returned; later
    /// calls to ``run(_:)`` throw ``Stopped``.
    package func shutdown() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            pthread_mutex_lock(mutex)
            isStopped = true
            let done = exited == started
            if !done { stopWaiters.append(continuation) }
            pthread_cond_broadcast(condition)
            pthread_mutex_unlock(mutex)
            if done { continuation.resume() }
        }
    }

    private func submit(_ item: @escaping Item) {
        pthread_mutex_lock(mutex)
        guard !isStopped else {
            pthread_mutex_unlock(mutex)
            return item(false)
        }
        queue.append(item)
        let starts = idle == 0 && started < limit
        let wakes = !starts && idle > 0
        if starts { started += 1 }
        pthread_mutex_unlock(mutex)
        // After unlocking, so the woken thread does not wake only to wait for the mutex.
        // (An idle thread is inside pthread_cond_wait: the signal cannot be lost. A busy
        // one looks at the queue before it waits again.)
        if wakes { pthread_cond_signal(condition) }
        if starts { startThread() }
    }

    private func startThread() {
        let context = Unmanaged.passRetained(self).toOpaque()
        var thread = pthread_t()
        let status = pthread_create(
            &thread, nil,
            { context in
                guard let context else { return nil }
                Unmanaged<WaitingThreads>.fromOpaque(context).takeRetainedValue().work()
                return nil
            }, context)
        if status == 0 {
            pthread_detach(thread)
        } else {
            // No thread: the queue is served by the threads there are (at least the
            // first must start, or its caller waits until it is cancelled).
            Unmanaged<WaitingThreads>.fromOpaque(context).release()
            pthread_mutex_lock(mutex)
            started -= 1
            let waiters = isStopped && exited == started ? stopWaiters : []
            if !waiters.isEmpty { stopWaiters = [] }
            pthread_mutex_unlock(mutex)
            for waiter in waiters { waiter.resume() }
        }
    }

    /// A thread's life: take the oldest item, run it, until stopped with nothing queued.
    private func work() {
        pthread_mutex_lock(mutex)
        while true {
            while head == queue.count && !isStopped {
                idle += 1
                pthread_cond_wait(condition, mutex)
                idle -= 1
            }
            guard head < queue.count else { break }
            let item = queue[head]
            head += 1
            if head == queue.count {
                queue.removeAll(keepingCapacity: true)
                head = 0
            }
            pthread_mutex_unlock(mutex)
            item(true)
            pthread_mutex_lock(mutex)
        }
        exited += 1
        let waiters = exited == started ? stopWaiters : []
        if exited == started { stopWaiters = [] }
        pthread_mutex_unlock(mutex)
        for waiter in waiters { waiter.resume() }
    }
}
