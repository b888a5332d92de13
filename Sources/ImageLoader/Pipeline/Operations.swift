import ImageLoaderSupport
import RasterImage

/// The loader's work outside the pipeline's loads: `decode(_:)`, `thumbnail(of:)`,
/// `processing(_:)`, and (in the ObjectStorage library) the stores' background writes. Each is
/// counted while it runs, so that ``ImageLoader/shutdown()`` can wait for all of them
/// before it saves the disk cache's index and stops the threads they use; once the
/// loader is shut down, new ones are refused with `.shutDown`.
package final class Operations: Sendable {
    private struct State {
        var running = 0
        var closed = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Lock(State())

    /// Runs `body` as a counted operation.
    func run<T>(_ url: String, _ body: () async throws(ImageLoadingError) -> T) async throws(ImageLoadingError) -> T {
        guard enter() else { throw ImageLoadingError(.shutDown, url: url) }
        defer { leave() }
        return try await body()
    }

    package init() {}

    /// Starts `body` in a task of its own, counted until it ends; nothing once closed
    /// (then `false`).
    @discardableResult
    package func startInBackground(_ body: @escaping @Sendable () async -> Void) -> Bool {
        guard enter() else { return false }
        Task.detached {
            await body()
            self.leave()
        }
        return true
    }

    /// Refuses new operations, then waits until those running have ended.
    package func closeAndWait() async {
        state.withLock { $0.closed = true }
        await waitUntilIdle()
    }

    /// Waits until no operation is running (new ones may start afterwards).
    func waitUntilIdle() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                guard state.running > 0 else { return true }
                state.waiting.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    /// How many are running, and whether new ones are refused (for tests).
    var running: Int { state.withLock { $0.running } }
    var isClosed: Bool { state.withLock { $0.closed } }

    private func enter() -> Bool {
        state.withLock { state in
            guard !state.closed else { return false }
            state.running += 1
            return true
        }
    }

    private func leave() {
        let waiting = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.running -= 1
            guard state.running == 0 else { return [] }
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }
}
