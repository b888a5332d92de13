import Foundation
import ImageLoaderSupport
import RasterImage

/// What a load tells its callers: an image load's events, an original's bytes
/// (``ImageLoader/data(for:options:)``), or a failure of either.
enum PipelineEvent: Sendable {
    case image(ImageLoadEvent)
    case data(LoadedData)
    case failed(ImageLoadingError)
}

/// The first stage: one load per ``ProductKey`` however many callers wait on it (image
/// loads and requests of an original's bytes alike), a small user of ``SharedWork``.
/// A caller is an `AsyncStream` of the load's events;
/// one that joins late first receives the events it missed (all but progress). The
/// load runs at the highest priority of its callers; when the last caller leaves, it is
/// cancelled, unless it must finish (a background revalidation, a prefetch, or a caller
/// that asked for it).
///
/// Callers join and leave synchronously, under the shared work's lock, so a caller's
/// arrival and departure are applied in the order they are made.
final class ImagePipeline: Sendable {
    typealias Loads = SharedWork<ProductKey, Void, Never, PipelineEvent>
    typealias Work = Loads.Work

    let metrics: LoaderMetrics
    private let loads = Loads(floor: LoadPriority.veryLow.rawValue) { event in
        // Progress is not replayed: only its latest value would matter.
        if case .image(.progress) = event { false } else { true }
    }

    init(metrics: LoaderMetrics) {
        self.metrics = metrics
    }

    /// Starts (or joins) the work for `key`, delivering its events to `onEvent` and its
    /// end to `onEnd`. Returns the caller's identity to ``detach(_:key:)`` with, or `nil`
    /// (having delivered `.shutDown` and the end) when the loader is shut down.
    func attach(
        key: ProductKey, priority: LoadPriority, finishesWhenCancelled: Bool,
        onEvent: @escaping @Sendable (PipelineEvent) -> Void, onEnd: @escaping @Sendable () -> Void,
        work: @escaping Work
    ) -> UInt64? {
        let id = Identity.next()
        let caller = Loads.Member(priority: PriorityHandle(priority), onEvent: onEvent, onEnd: { _ in onEnd() })
        switch loads.join(id, key: key, caller, keepsRunning: finishesWhenCancelled, work: work) {
        case .started:
            return id
        case .joined:
            metrics.coalesced()
            return id
        case .refused:
            onEvent(.failed(ImageLoadingError(.shutDown, url: key.url.absoluteString)))
            onEnd()
            return nil
        }
    }

    /// A caller stopped listening. The last one to leave cancels the work, unless it must finish.
    func detach(_ id: UInt64, key: ProductKey) {
        loads.leave(id, key: key)
    }

    /// Starts the work for `key` with no caller, at the lowest priority, to fill the caches.
    func prefetch(key: ProductKey, work: @escaping Work) {
        loads.startUnattended(key: key, work: work)
    }

    /// Cancels a prefetch nobody else waits for. A load a caller started (a background
    /// revalidation among them) is never a prefetch's to cancel.
    func cancelPrefetch(key: ProductKey) {
        loads.cancelUnattended(key: key)
    }

    /// Raises or lowers the priority of the load of `key` and of its callers (a row scrolled into view).
    func setPriority(_ priority: LoadPriority, key: ProductKey) {
        loads.setRank(priority.rawValue, key: key)
    }

    /// Tasks still running (background revalidations and prefetches among them).
    var runningTasks: [Task<Void, Never>] { loads.runningTasks }

    func shutdown() -> [Task<Void, Never>] { loads.shutdown() }
}
