import Foundation
import RasterImage

/// Owns the loads in flight: one task per key however many callers wait on it, so the
/// same URL is requested and decoded once. A task with no caller left is cancelled,
/// unless it is revalidating in the background (stale-while-revalidate).
actor ImagePipeline {
    private final class LoadTask {
        let broadcaster = EventBroadcaster()
        var task: Task<Void, Never>?
        /// Set when the work must finish even if every caller leaves.
        var keepsRunning = false
    }

    let context: PipelineContext
    private var inFlight: [String: LoadTask] = [:]
    private var isShutDown = false

    init(context: PipelineContext) {
        self.context = context
    }

    /// Which loads share a task: the same URL with the same cache policy.
    private func taskKey(_ url: URL, _ options: LoadOptions) -> String {
        options.cachePolicy.rawValue + " " + url.absoluteString
    }

    /// Starts (or joins) the load of `url`, delivering its events to `continuation`.
    func attach(_ id: UUID, url: URL, options: LoadOptions, continuation: EventBroadcaster.Continuation) {
        guard !isShutDown else {
            continuation.yield(.failed(ImageLoadingError(.shutDown, url: url.absoluteString)))
            continuation.finish()
            return
        }
        let key = taskKey(url, options)
        if let existing = inFlight[key] {
            existing.broadcaster.add(id, continuation)
            return
        }
        // A fresh image in memory needs no task at all.
        if options.cachePolicy == .useCache, let entry = context.memoryEntry(for: url.absoluteString),
            context.isFresh(entry)
        {
            continuation.yield(.cached(LoadedImage(image: entry.image, source: .memory, url: url)))
            continuation.finish()
            return
        }
        let load = LoadTask()
        load.broadcaster.add(id, continuation)
        inFlight[key] = load
        let broadcaster = load.broadcaster
        let operation = LoadOperation(
            url: url, options: options, context: context, emit: { broadcaster.emit($0) },
            keepRunning: { [weak self] in await self?.keepRunning(key) })
        load.task = Task.detached {
            await operation.run()
            await self.finished(key)
        }
    }

    /// A caller stopped listening. The last one to leave cancels the work.
    func detach(_ id: UUID, url: URL, options: LoadOptions) {
        let key = taskKey(url, options)
        guard let load = inFlight[key] else { return }
        if load.broadcaster.remove(id) == 0 && !load.keepsRunning {
            load.task?.cancel()
        }
    }

    private func keepRunning(_ key: String) {
        inFlight[key]?.keepsRunning = true
    }

    private func finished(_ key: String) {
        inFlight.removeValue(forKey: key)?.broadcaster.finish()
    }

    /// Tasks still running (background revalidations among them).
    var runningTasks: [Task<Void, Never>] { inFlight.values.compactMap(\.task) }

    func shutdown() -> [Task<Void, Never>] {
        isShutDown = true
        return runningTasks
    }
}
