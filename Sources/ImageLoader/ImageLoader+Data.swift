import Foundation
import ImageLoaderSupport
import RasterImage

/// An original's bytes as the origin (or the disk cache) gave them, with the HTTP
/// metadata a service or a proxy passes on.
public struct LoadedData: Sendable, CustomStringConvertible {
    /// The original's bytes, as the origin sent them.
    public let bytes: [UInt8]
    /// The format the bytes are, from their signature (checked against the accepted types).
    public let format: ImageFormat
    /// The stored response's header fields (Content-Type, ETag, Last-Modified, Cache-Control...).
    public let headers: [HeaderField]
    /// Where the bytes came from: the disk cache, the network, a revalidation.
    public let source: LoadedImage.Source
    /// The URL asked for, without its fragment.
    public let url: URL
    /// Seconds the origin's response stays fresh from now, when it states a lifetime
    /// (`max-age` or `Expires`; 0 for `no-cache`, `no-store` or an expired one); `nil`
    /// when it states none. What a service passes on in its own `Cache-Control`.
    public let freshFor: TimeInterval?
    /// `.fresh`, or how HTTP's rules let stale bytes be used: while they are revalidated
    /// in the background (stale-while-revalidate), or because the origin failed
    /// (stale-if-error).
    public var freshness: LoadedImage.Freshness = .fresh

    /// The first value of a header field, by name, any case.
    public func value(_ name: String) -> String? { headers.first(named: name) }

    /// One line, without the bytes: `LoadedData(jpeg, 183412 bytes from disk: https://...)`.
    public var description: String {
        let stale = freshness == .fresh ? "" : " (\(freshness.rawValue))"
        return
            "LoadedData(\(format.rawValue), \(bytes.count) bytes from \(source.rawValue)\(stale): \(url.absoluteString))"
    }
}

extension ImageLoader {
    /// The original's bytes at `url` with their HTTP metadata, through the disk cache
    /// and the same HTTP caching rules as ``image(for:options:)`` (the same entry, too):
    /// a fresh entry is served from disk; a stale one is revalidated (and served at once
    /// within stale-while-revalidate, the revalidation going on in the background);
    /// when the origin fails, a stored entry within stale-if-error is served
    /// (``LoadedData/freshness`` says so); failures are remembered; a new response is
    /// stored when it may be, and replaces or removes the old entry. A request in
    /// flight for the same URL is shared with image loads. The bytes must be of an
    /// accepted type; they are not decoded.
    ///
    /// ```swift
    /// let original = try await loader.data(for: url)
    /// response.headers[.contentType] = original.format.contentType
    /// ```
    public func data(for url: URL, options: LoadOptions = LoadOptions()) async throws(ImageLoadingError) -> LoadedData {
        let url = url.droppingFragment
        // A product of the one pipeline: callers asking for the same bytes with the same
        // request share one operation, and a revalidation in the background runs on as
        // an image load's does.
        let key = ProductKey(
            cache: CacheKey(url: url, product: .original), cachePolicy: options.cachePolicy, headers: options.headers,
            delivery: .bytes(clientValidators: options.clientValidators, bypassesCache: options.bypassesCache))
        let context = self.context
        let work: ImagePipeline.Work = { run in
            await DataOperation(url: url, options: options, context: context, priority: run.priority).run(
                deliver: { run.report(.data($0)) }, fail: { run.report(.failed($0)) }, keepRunning: run.keepRunning)
        }
        for await event in attached(key, options, work: work, { $0 }) {
            switch event {
            case .data(let data): return data
            case .failed(let error): throw error
            case .image: continue
            }
        }
        throw ImageLoadingError(.cancelled, url: url.absoluteString)
    }
}
