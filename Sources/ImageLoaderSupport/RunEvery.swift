/// Runs `steps` in order, each of them even when one before it throws, and rethrows the
/// first error: how a shutdown releases every part it holds.
///
/// ```swift
/// try await runEvery([{ try await clients.shutdown() }, { try await threads.shutdown() }])
/// ```
package func runEvery(_ steps: [() async throws -> Void]) async throws {
    var failure: (any Error)?
    for step in steps {
        do { try await step() } catch { failure = failure ?? error }
    }
    if let failure { throw failure }
}
