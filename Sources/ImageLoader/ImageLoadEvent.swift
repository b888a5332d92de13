import Foundation
import RasterImage

/// An image the loader obtained, and where it came from.
public struct LoadedImage: Sendable, CustomStringConvertible {
    /// Where the image came from.
    public enum Source: String, Sendable, Hashable, Codable {
        /// The memory cache.
        case memory
        /// The disk cache, without asking the origin.
        case disk
        /// Downloaded and written to the disk cache.
        case networkToDisk
        /// The origin answered 304: the cached image is still valid.
        case networkNotModified
        /// Downloaded, but the response may not be stored (no-store, Vary: *).
        case network
        /// A file URL.
        case localFile
        /// Bytes the caller handed over (``ImageLoader/thumbnail(of:options:declaredContentType:priority:)``).
        case bytes
    }

    /// Whether a cached image may be used as it is, and why.
    public enum Freshness: String, Sendable, Hashable, Codable {
        /// Fresh (or just obtained from the origin).
        case fresh
        /// Stale, and RFC 9111 lets it be used while it is revalidated in the
        /// background (stale-while-revalidate). ``ImageLoader/image(for:options:)`` returns it.
        case staleWhileRevalidate
        /// Stale, and the origin failed: stale-if-error lets it be used.
        /// ``ImageLoader/image(for:options:)`` returns it.
        case staleIfError
        /// Stale (or no-cache, must-revalidate, or a reload asked for), offered to show
        /// while it is revalidated: it may not be used as the answer until the origin
        /// confirms it. ``ImageLoader/image(for:options:)`` waits for the revalidation.
        case needsRevalidation
    }

    /// The decoded image (a thumbnail for thumbnail loads).
    public let image: RasterImage
    /// Where it came from.
    public let source: Source
    /// The URL it was loaded from, without its fragment.
    public let url: URL
    /// Whether the image may be used as it is (see ``Freshness``).
    public let freshness: Freshness
    /// For a thumbnail, its encoded bytes when the loader has them at hand (just made,
    /// read from the disk cache, or kept beside it in the memory cache): send or write
    /// them without encoding again.
    public let encoded: EncodedImage?

    /// `true` when the image is past its freshness (any ``Freshness`` but `.fresh`).
    public var isStale: Bool { freshness != .fresh }

    /// Whether HTTP's rules let this image be used as the answer to a request
    /// (fresh, or stale within stale-while-revalidate or stale-if-error).
    public var isUsable: Bool { freshness != .needsRevalidation }

    /// An image and where it came from (for custom code that makes events of its own).
    public init(
        image: RasterImage, source: Source, url: URL, freshness: Freshness = .fresh, encoded: EncodedImage? = nil
    ) {
        self.image = image
        self.source = source
        self.url = url
        self.freshness = freshness
        self.encoded = encoded
    }

    /// One line: the image, where it came from and how fresh it is, and the URL.
    public var description: String {
        let stale = freshness == .fresh ? "" : " (\(freshness.rawValue))"
        return "LoadedImage(\(image) from \(source.rawValue)\(stale): \(url.absoluteString))"
    }
}

/// What happens during a load, in order. Which events arrive depends on the cache:
///
/// | situation | events |
/// |---|---|
/// | fresh in memory or on disk | `cached` (`.memory` or `.disk`, `.fresh`) |
/// | stale, within stale-while-revalidate | `cached` (`.staleWhileRevalidate`), `sendingRequest(hadCache: true)`, then `completed` (`.networkNotModified` or `.networkToDisk`) or `failed`; the revalidation finishes even if the caller leaves |
/// | stale (no stale-while-revalidate), no-cache, must-revalidate, or `.revalidate` policy | `cached` (`.needsRevalidation`), `sendingRequest(hadCache: true)`, then `completed` (`.networkNotModified` or `.networkToDisk`) or `failed` |
/// | the origin fails, within stale-if-error | `cached` (`.needsRevalidation`), `sendingRequest(hadCache: true)`, `cached` (`.staleIfError`), `failed` |
/// | nothing cached | `sendingRequest(hadCache: false)`, `progress`..., `completed` (`.networkToDisk` or `.network`) or `failed` |
/// | a failure remembered (error caching) | `failed` (`.rememberedFailure`), no request |
/// | a file URL | `cached` (`.memory` or `.disk`) when unchanged, else `completed` (`.localFile`), or `failed` |
///
/// The sequence ends after the last event. A list shows the first image that
/// arrives and replaces it if a later one does. ``ImageLoader/image(for:options:)``
/// returns the first image whose ``LoadedImage/isUsable`` is `true`.
///
/// ```swift
/// for await event in loader.events(for: url) {
///     switch event {
///     case .cached(let cached): cell.show(cached.image)       // stale ones too
///     case .sendingRequest(let hadCache): cell.spinner(!hadCache)
///     case .completed(let done): cell.show(done.image)
///     case .failed(let error): cell.placeholder(error)
///     case .progress: break
///     }
/// }
/// ```
public enum ImageLoadEvent: Sendable {
    /// A cached image is available.
    case cached(LoadedImage)
    /// A request is being sent; `hadCache` says whether a cached response is being revalidated.
    case sendingRequest(hadCache: Bool)
    /// Bytes received so far, and the total when the origin said.
    case progress(received: Int, expected: Int?)
    /// The request completed with an image.
    case completed(LoadedImage)
    /// The load failed (for a stale image served on error, after `cached`).
    case failed(ImageLoadingError)

    /// The image this event carries, if any.
    public var image: LoadedImage? {
        switch self {
        case .cached(let image), .completed(let image): image
        default: nil
        }
    }
}

/// How one load uses the caches.
public struct LoadOptions: Sendable, Hashable {
    /// How the caches answer a load.
    public enum CachePolicy: String, Sendable, Hashable, Codable {
        /// Follow the stored responses' HTTP caching rules.
        case useCache
        /// Ask the origin even when the cached image is fresh (a user's reload), except
        /// for a fresh `immutable` response, which is used as it is.
        case revalidate
        /// Ignore every cache; download again and replace what is stored.
        case reload
    }

    /// How the caches answer. Default: their HTTP rules.
    public var cachePolicy: CachePolicy = .useCache
    /// How urgent the load is; a shared load runs at the highest priority of its callers.
    public var priority: LoadPriority = .normal
    /// Finish the download and fill the caches even if every caller stops waiting
    /// (a list cell reused before its image arrived, when the image will be wanted again).
    public var finishesWhenCancelled = false
    /// Header fields sent with this load's requests, after the loader's own
    /// (``ImageLoader/Configuration/requestHeaders``); they take part in `Vary`
    /// matching, and loads with different fields never share a request.
    public var headers: [HeaderField] = []
    /// The validators of a client the caller answers for (`If-None-Match`,
    /// `If-Modified-Since`, as a proxy passes them on), for ``ImageLoader/data(for:options:)``:
    /// sent to the origin when the cache holds no entry for the URL, so that it can
    /// answer 304 without a body. Such a 304 ends the load with
    /// ``ImageLoadingError/Reason/notModified(headers:)``, and nothing is stored or
    /// remembered. With a stored entry the loader asks with the entry's own validators,
    /// as always, and the caller compares the client's with what it gets.
    ///
    /// ```swift
    /// var options = LoadOptions()
    /// options.clientValidators = [HeaderField("If-None-Match", "\"v7\"")]
    /// ```
    public var clientValidators: [HeaderField] = []
    /// Neither answer from the caches nor store in them, for ``ImageLoader/data(for:options:)``:
    /// for a request that carries one user's credentials (a service passing its
    /// client's cookies on), whose response a shared cache must not give another user.
    /// The download is still shared with loads that send the same header fields.
    public var bypassesCache = false
    /// When this caller stops waiting: the wait ends with ``ImageLoadingError/Reason/timeout``
    /// (the work goes on only if another caller waits for it). `nil`: no deadline
    /// beyond the loader's own timeouts.
    public var deadline: ContinuousClock.Instant?

    /// Options for one load; every argument has its default.
    public init(
        cachePolicy: CachePolicy = .useCache, priority: LoadPriority = .normal, finishesWhenCancelled: Bool = false,
        headers: [HeaderField] = [], deadline: ContinuousClock.Instant? = nil
    ) {
        self.cachePolicy = cachePolicy
        self.priority = priority
        self.finishesWhenCancelled = finishesWhenCancelled
        self.headers = headers
        self.deadline = deadline
    }
}
