import ImageLoaderSupport
import TestSupport
import Testing

@Suite("The one way to wait: Lock.suspend")
struct LockTests {
    typealias Waiters = Lock<[UInt64: CheckedContinuation<Int, any Error>]>

    /// Suspends on `waiters` under `id` until resumed or cancelled.
    static func wait(_ waiters: Waiters, _ id: UInt64) async throws -> Int {
        try await waiters.suspend { waiters, continuation in
            waiters[id] = continuation
            return nil
        } onCancel: { waiters in
            waiters.removeValue(forKey: id)
        }
    }

    @Test("a kept continuation is resumed by whoever finds it; an answer at registration returns at once")
    func resumed() async throws {
        let waiters = Waiters([:])
        let task = Task { try await Self.wait(waiters, 1) }
        try await waitUntil("registered") { waiters.withLock { $0[1] != nil } }
        waiters.withLock { $0.removeValue(forKey: 1) }?.resume(returning: 42)
        #expect(try await task.value == 42)
        let now = try await waiters.suspend { _, _ in
            .success(7)
        } onCancel: { _ in
            nil
        }
        #expect(now == 7)
        #expect(waiters.withLock { $0.isEmpty })
    }

    @Test("a task cancelled before it registers is refused and leaves nothing behind", arguments: 0..<20)
    func cancelledBefore(round: Int) async throws {
        let waiters = Waiters([:])
        let registered = Lock(false)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await waiters.suspend { waiters, continuation in
                registered.withLock { $0 = true }
                waiters[1] = continuation
                return nil
            } onCancel: { waiters in
                waiters.removeValue(forKey: 1)
            }
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(!registered.withLock { $0 })
        #expect(waiters.withLock { $0.isEmpty })
    }

    @Test("a waiter cancelled while it waits, or around its registration, throws and is removed", arguments: 0..<50)
    func cancelledAround(round: Int) async throws {
        let waiters = Waiters([:])
        let task = Task { try await Self.wait(waiters, 1) }
        // Half the rounds race the cancellation with the registration, half cancel a registered waiter.
        if round.isMultiple(of: 2) {
            try await waitUntil("registered") { waiters.withLock { $0[1] != nil } }
        }
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(waiters.withLock { $0.isEmpty })
    }
}
