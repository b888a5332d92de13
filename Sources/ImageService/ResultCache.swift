import Foundation
import ImageLoader
import ImageLoaderSupport
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

/// Processed images in memory, bounded by their bytes: a ``BoundedCache`` (SIEVE, so a
/// hit costs a dictionary lookup and a flag under a lock) whose stale entries are
/// dropped when found.
struct ResultCache: Sendable {
    private let results: BoundedCache<RequestKey, ProcessedResult>

    init(maxBytes: Int) {
        results = BoundedCache(limits: .init(maxBytes: maxBytes))
    }

    /// The result for `key` while it is fresh at `now`.
    func fresh(_ key: RequestKey, at now: Date) -> ProcessedResult? {
        results.value(for: key) { $0.meta.freshUntil > now ? .use : .drop }
    }

    /// Keeps `result` unless it alone takes more than a quarter of the cache.
    func insert(_ result: ProcessedResult, for key: RequestKey) {
        results.insert(result, cost: result.body.readableBytes, for: key)
    }
}
