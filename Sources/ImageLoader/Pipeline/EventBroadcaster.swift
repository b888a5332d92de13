import Foundation
import ImageLoaderSupport
import RasterImage

/// Hands one load's events to every caller waiting on it. A caller that joins late
/// first receives the events it missed, so every caller sees the whole sequence.
final class EventBroadcaster: Sendable {
    typealias Continuation = AsyncStream<ImageLoadEvent>.Continuation

    private struct State {
        var history: [ImageLoadEvent] = []
        var subscribers: [UInt64: Continuation] = [:]
        var finished = false
    }

    private let state = Lock(State())

    /// Adds a subscriber, replaying what happened so far. The replay happens under the
    /// lock, so an event emitted meanwhile cannot overtake it.
    func add(_ id: UInt64, _ continuation: Continuation) {
        let finished = state.withLock { state -> Bool in
            for event in state.history { continuation.yield(event) }
            if !state.finished { state.subscribers[id] = continuation }
            return state.finished
        }
        if finished { continuation.finish() }
    }

    /// Removes a subscriber; returns how many remain.
    func remove(_ id: UInt64) -> Int {
        state.withLock { state in
            state.subscribers[id] = nil
            return state.subscribers.count
        }
    }

    /// Whether the work has ended: a caller arriving now must start new work.
    var isFinished: Bool { state.withLock { $0.finished } }

    func emit(_ event: ImageLoadEvent) {
        let subscribers = state.withLock { state -> [Continuation] in
            // Progress is not replayed: only its latest value would matter.
            if case .progress = event {} else { state.history.append(event) }
            return Array(state.subscribers.values)
        }
        for subscriber in subscribers { subscriber.yield(event) }
    }

    func finish() {
        let subscribers = state.withLock { state -> [Continuation] in
            state.finished = true
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        for subscriber in subscribers { subscriber.finish() }
    }
}
