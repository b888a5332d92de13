import Foundation
import ImageLoaderSupport
import RasterImage

/// The first stage: one load per ``ProductKey`` however many callers wait on it. The
/// load runs at the highest priority of its callers. When the last caller leaves, the
/// load is cancelled, unless it must finish (a background revalidation, a prefetch,
/// or a caller that asked for it).
///
/// Every change happens synchronously under one lock, so a caller's arrival and
/// departure are applied in the order they are made.
final class ImagePipeline: Sendable {
    private final class Load {
        let broadcaster = EventBroadcaster()
        let priority: PriorityHandle
        var callers: [UInt64: LoadPriority] = [:]
        var task: Task<Void, Never>?
        /// Set when the work must finish even if every caller leaves.
        var keepsRunning = false
        var isCancelled = false
        /// Whether a prefetch started it: only such a load can be cancelled as a prefetch.
        let isPrefetch: Bool

        init(priority: LoadPriority, isPrefetch: Bool) {
            self.priority = PriorityHandle(priority)
            self.isPrefetch = isPrefetch
        }

        func updatePriority(floor: LoadPriority) {
            priority.ownRank = max(floor, callers.values.max() ?? floor).rawValue
        }
    }

    /// The work that runs for a key, given the load's way to report back.
    typealias Work =
        @Sendable (
            _ emit: @escaping @Sendable (ImageLoadEvent) -> Void, _ priority: PriorityHandle,
            _ keepRunning: @escaping @Sendable () -> Void
        ) async -> Void

    private struct State {
        var loads: [ProductKey: Load] = [:]
        var nextID: UInt64 = 0
        var isShutDown = false
    }

    let metrics: LoaderMetrics
    private let state = Lock(State())

    init(metrics: LoaderMetrics) {
        self.metrics = metrics
    }

    /// An identity for a caller, to attach and detach with.
    func makeCallerID() -> UInt64 {
        state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
    }

    /// Starts (or joins) the work for `key`, delivering its events to `continuation`.
    /// Returns `false` (and has finished the continuation) when the loader is shut down.
    @discardableResult
    func attach(
        _ id: UInt64, key: ProductKey, priority: LoadPriority, finishesWhenCancelled: Bool,
        continuation: EventBroadcaster.Continuation, work: @escaping Work
    ) -> Bool {
        let load = state.withLock { state -> Load? in
            guard !state.isShutDown else { return nil }
            let load: Load
            // A load whose work has ended (its removal is on its way) is not joined:
            // its events are of an earlier load.
            if let existing = state.loads[key], !existing.broadcaster.isFinished, !existing.isCancelled {
                load = existing
                metrics.coalesced()
            } else {
                load = start(key: key, priority: priority, isPrefetch: false, work: work, in: &state)
            }
            load.callers[id] = priority
            load.updatePriority(floor: .veryLow)
            if finishesWhenCancelled { load.keepsRunning = true }
            return load
        }
        guard let load else {
            continuation.yield(.failed(ImageLoadingError(.shutDown, url: key.url.absoluteString)))
            continuation.finish()
            return false
        }
        // Outside the lock: a load that has already ended replays and finishes here.
        load.broadcaster.add(id, continuation)
        return true
    }

    /// Starts the work for `key` with no caller, at low priority, to fill the caches.
    func prefetch(key: ProductKey, work: @escaping Work) {
        state.withLock { state in
            guard !state.isShutDown else { return }
            if let existing = state.loads[key], !existing.broadcaster.isFinished, !existing.isCancelled { return }
            start(key: key, priority: .veryLow, isPrefetch: true, work: work, in: &state).keepsRunning = true
        }
    }

    /// Cancels a prefetch nobody else waits for. A load a caller started (a background
    /// revalidation among them) is never a prefetch's to cancel.
    func cancelPrefetch(key: ProductKey) {
        state.withLock { state in
            guard let load = state.loads[key], load.isPrefetch, load.callers.isEmpty else { return }
            load.isCancelled = true
            load.task?.cancel()
        }
    }

    private func start(
        key: ProductKey, priority: LoadPriority, isPrefetch: Bool, work: @escaping Work, in state: inout State
    ) -> Load {
        let load = Load(priority: priority, isPrefetch: isPrefetch)
        state.loads[key] = load
        let (broadcaster, handle, identity) = (load.broadcaster, load.priority, ObjectIdentifier(load))
        load.task = Task.detached {
            await work({ broadcaster.emit($0) }, handle, { [weak self] in self?.keepRunning(key, identity) })
            broadcaster.finish()
            self.finished(key, identity)
        }
        return load
    }

    /// A caller stopped listening. The last one to leave cancels the work, unless it must finish.
    func detach(_ id: UInt64, key: ProductKey) {
        let load = state.withLock { state -> Load? in
            guard let load = state.loads[key], load.callers.removeValue(forKey: id) != nil else { return nil }
            load.updatePriority(floor: .veryLow)
            if load.callers.isEmpty && !load.keepsRunning {
                load.isCancelled = true
                load.task?.cancel()
            }
            return load
        }
        _ = load?.broadcaster.remove(id)
    }

    /// Raises or lowers the priority of the callers of `key` (a row scrolled into view).
    func setPriority(_ priority: LoadPriority, key: ProductKey) {
        state.withLock { state in
            guard let load = state.loads[key] else { return }
            for id in load.callers.keys { load.callers[id] = priority }
            load.updatePriority(floor: priority)
        }
    }

    private func keepRunning(_ key: ProductKey, _ identity: ObjectIdentifier) {
        state.withLock { state in
            if let load = state.loads[key], ObjectIdentifier(load) == identity { load.keepsRunning = true }
        }
    }

    /// Removes the load for `key`, unless a newer one has taken its place.
    private func finished(_ key: ProductKey, _ identity: ObjectIdentifier) {
        state.withLock { state in
            if let load = state.loads[key], ObjectIdentifier(load) == identity { state.loads.removeValue(forKey: key) }
        }
    }

    /// Tasks still running (background revalidations and prefetches among them).
    var runningTasks: [Task<Void, Never>] { state.withLock { $0.loads.values.compactMap(\.task) } }

    func shutdown() -> [Task<Void, Never>] {
        state.withLock { state in
            state.isShutDown = true
            return state.loads.values.compactMap(\.task)
        }
    }
}
