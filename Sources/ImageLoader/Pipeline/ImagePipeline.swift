import Foundation
import RasterImage

/// Owns the work in flight: one task per key however many callers wait on it, so the
/// same URL is requested and decoded once. The task runs at the highest priority of
/// its callers. When the last caller leaves, the task is cancelled, unless it must
/// finish (a background revalidation, a prefetch, or a caller that asked for it).
actor ImagePipeline {
    private final class SharedTask {
        let broadcaster = EventBroadcaster()
        let priority: PriorityHandle
        var callers: [UUID: LoadPriority] = [:]
        var task: Task<Void, Never>?
        /// Set when the work must finish even if every caller leaves.
        var keepsRunning = false

        init(priority: LoadPriority) { self.priority = PriorityHandle(priority) }

        func updatePriority(floor: LoadPriority) {
            priority.priority = max(floor, callers.values.max() ?? floor)
        }
    }

    /// The work that runs for a key, given the shared task's way to report back.
    typealias Work =
        @Sendable (
            _ emit: @escaping @Sendable (ImageLoadEvent) -> Void, _ priority: PriorityHandle,
            _ keepRunning: @escaping @Sendable () async -> Void
        ) async -> Void

    let context: PipelineContext
    private var inFlight: [String: SharedTask] = [:]
    private var isShutDown = false

    init(context: PipelineContext) {
        self.context = context
    }

    /// Starts (or joins) the work for `key`, delivering its events to `continuation`.
    func attach(
        _ id: UUID, key: String, priority: LoadPriority, finishesWhenCancelled: Bool,
        continuation: EventBroadcaster.Continuation, work: @escaping Work
    ) {
        guard !isShutDown else {
            continuation.yield(.failed(ImageLoadingError(.shutDown, url: key)))
            continuation.finish()
            return
        }
        let shared: SharedTask
        // A task whose work has just ended (its removal is on its way) is not joined:
        // its events are of an earlier load.
        if let existing = inFlight[key], !existing.broadcaster.isFinished {
            shared = existing
            context.metrics.coalesced()
        } else {
            shared = start(key: key, priority: priority, work: work)
        }
        shared.callers[id] = priority
        shared.updatePriority(floor: .veryLow)
        if finishesWhenCancelled { shared.keepsRunning = true }
        shared.broadcaster.add(id, continuation)
    }

    /// Starts the work for `key` with no caller, at low priority, to fill the caches.
    func prefetch(key: String, work: @escaping Work) {
        guard !isShutDown, inFlight[key].map({ $0.broadcaster.isFinished }) ?? true else { return }
        let shared = start(key: key, priority: .veryLow, work: work)
        shared.keepsRunning = true
    }

    /// Cancels a prefetch nobody else waits for.
    func cancelPrefetch(key: String) {
        guard let shared = inFlight[key], shared.callers.isEmpty else { return }
        shared.task?.cancel()
    }

    private func start(key: String, priority: LoadPriority, work: @escaping Work) -> SharedTask {
        let shared = SharedTask(priority: priority)
        inFlight[key] = shared
        let (broadcaster, handle) = (shared.broadcaster, shared.priority)
        let id = ObjectIdentifier(shared)
        shared.task = Task.detached(priority: nil) {
            await work({ broadcaster.emit($0) }, handle, { [weak self] in await self?.keepRunning(key) })
            broadcaster.finish()
            await self.finished(key, id)
        }
        return shared
    }

    /// A caller stopped listening. The last one to leave cancels the work, unless it must finish.
    func detach(_ id: UUID, key: String) {
        guard let shared = inFlight[key], shared.callers.removeValue(forKey: id) != nil else { return }
        _ = shared.broadcaster.remove(id)
        shared.updatePriority(floor: .veryLow)
        if shared.callers.isEmpty && !shared.keepsRunning {
            shared.task?.cancel()
        }
    }

    /// Raises or lowers the priority of the callers of `key` (a row scrolled into view).
    func setPriority(_ priority: LoadPriority, key: String) {
        guard let shared = inFlight[key] else { return }
        for id in shared.callers.keys { shared.callers[id] = priority }
        shared.updatePriority(floor: priority)
    }

    private func keepRunning(_ key: String) {
        inFlight[key]?.keepsRunning = true
    }

    /// Removes the task for `key`, unless a newer one has taken its place.
    private func finished(_ key: String, _ id: ObjectIdentifier) {
        if let shared = inFlight[key], ObjectIdentifier(shared) == id { inFlight.removeValue(forKey: key) }
    }

    /// Tasks still running (background revalidations and prefetches among them).
    var runningTasks: [Task<Void, Never>] { inFlight.values.compactMap(\.task) }

    func shutdown() -> [Task<Void, Never>] {
        isShutDown = true
        return runningTasks
    }
}
