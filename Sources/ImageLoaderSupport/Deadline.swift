/// `body`'s value, or `nil` once `deadline` passes, or what `stop` throws once it does;
/// `body` is then cancelled. A cancelled caller gets `CancellationError`.
package func untilDeadline<T: Sendable>(
    _ deadline: ContinuousClock.Instant, orUntil stop: (@Sendable () async throws -> Never)? = nil,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T? {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(until: deadline, clock: .continuous)
            return nil
        }
        if let stop { group.addTask { try await stop() } }
        // The first to end decides; the others are cancelled, and what they throw then is dropped.
        defer { group.cancelAll() }
        return try await group.next() ?? nil
    }
}
