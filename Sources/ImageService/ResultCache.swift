import ImageLoaderSupport
import Foundation
import ImageLoader
import NIOCore
import RasterImage

/// What the headers of a processed image say, known before it is made.
struct ResponseMeta: Sendable {
    let contentType: String
    /// The strong entity tag (``ResponseRules/entityTag(source:validator:options:format:)``).
    let entityTag: String
    /// The source's `Last-Modified`, passed on.
    let lastModified: String?
    /// Whether `Accept` chose the format (the response then says `Vary: Accept`).
    let variesByAccept: Bool
    /// Until when it may be sent without asking the source again.
    let freshUntil: Date
    /// `Content-Disposition`, when the URL asks for a file name or an attachment.
    var contentDisposition: String? = nil
}

/// A processed image ready to send: its bytes (a buffer every response shares, never
/// copied) and the headers that go with them.
struct ProcessedResult: Sendable {
    let body: ByteBuffer
    let meta: ResponseMeta

    init(bytes: [UInt8], meta: ResponseMeta) {
        body = ByteBuffer(bytes: bytes)
        self.meta = meta
    }
}

/// What a processing URL asks for, as shared runs key it: the source, the options and,
/// when the URL names no format, the best automatic format the client takes (the only
/// part of `Accept` that changes the answer).
struct ResultKey: Hashable, Sendable {
    let source: String
    let options: ProcessingOptions
    let automatic: ProcessingOptions.Format?
}

/// How the result cache keys an answer: the request's path exactly as received (its
/// signature checked when the entry was made, so a hit needs no parsing and no HMAC)
/// and the best automatic format `Accept` lists (WebP, or AVIF and JPEG XL where the
/// service turns them on).
struct RequestKey: Hashable, Sendable {
    let path: String
    let automatic: ProcessingOptions.Format?

    /// The key of a request for `path` with the `Accept` field `accept`.
    init(path: String, accept: String?, autoAVIF: Bool, autoJXL: Bool, autoWebP: Bool = true) {
        self.path = path
        automatic = accept.flatMap {
            ResponseRules.automaticFormat(accept: $0, autoAVIF: autoAVIF, autoJXL: autoJXL, autoWebP: autoWebP)
        }
    }

    /// The key of a request for `path` with `accept`, under the service's format choices.
    init(path: String, accept: String?, configuration: ImageService.Configuration) {
        self.init(
            path: path, accept: accept, autoAVIF: configuration.autoAVIF, autoJXL: configuration.autoJXL,
            autoWebP: configuration.autoWebP)
    }
}

/// Processed images in memory, bounded by their bytes, evicted by the CLOCK algorithm
/// (a hit only sets a flag; the hand skips recently used entries once), so a hit costs
/// a dictionary lookup under a lock and nothing more.
final class ResultCache: Sendable {
    private struct Slot {
        var key: RequestKey
        var result: ProcessedResult
        var referenced: Bool
    }

    private struct State {
        var index: [RequestKey: Int] = [:]
        var slots: [Slot?] = []
        var free: [Int] = []
        var hand = 0
        var bytes = 0
    }

    private let state = Lock(State())
    let maxBytes: Int

    init(maxBytes: Int) {
        self.maxBytes = maxBytes
    }

    /// The result for `key` while it is fresh at `now`.
    func fresh(_ key: RequestKey, at now: Date) -> ProcessedResult? {
        state.withLock { state -> ProcessedResult? in
            guard let position = state.index[key], let slot = state.slots[position] else { return nil }
            guard slot.result.meta.freshUntil > now else {
                ResultCache.remove(at: position, &state)
                return nil
            }
            state.slots[position]?.referenced = true
            return slot.result
        }
    }

    /// Keeps `result` unless it alone takes more than a quarter of the cache.
    func insert(_ result: ProcessedResult, for key: RequestKey) {
        let cost = result.body.readableBytes
        guard cost <= maxBytes / 4 else { return }
        state.withLock { state in
            if let position = state.index[key] { ResultCache.remove(at: position, &state) }
            while state.bytes + cost > maxBytes, !state.index.isEmpty { ResultCache.evictOne(&state) }
            let slot = Slot(key: key, result: result, referenced: false)
            let position: Int
            if let reused = state.free.popLast() {
                position = reused
                state.slots[reused] = slot
            } else {
                position = state.slots.count
                state.slots.append(slot)
            }
            state.index[key] = position
            state.bytes += cost
        }
    }

    /// Entries held and their bytes.
    var usage: (count: Int, bytes: Int) { state.withLock { ($0.index.count, $0.bytes) } }

    private static func evictOne(_ state: inout State) {
        // Two turns at most: the first clears the flags it passes.
        for _ in 0..<(2 * state.slots.count) {
            let position = state.hand
            state.hand = (state.hand + 1) % state.slots.count
            guard let slot = state.slots[position] else { continue }
            if slot.referenced {
                state.slots[position]?.referenced = false
            } else {
                remove(at: position, &state)
                return
            }
        }
    }

    private static func remove(at position: Int, _ state: inout State) {
        guard let slot = state.slots[position] else { return }
        state.index[slot.key] = nil
        state.bytes -= slot.result.body.readableBytes
        state.slots[position] = nil
        state.free.append(position)
    }
}
