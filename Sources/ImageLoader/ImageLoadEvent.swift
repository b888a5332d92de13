import Foundation
import RasterImage

/// An image the loader obtained, and where it came from.
public struct LoadedImage: Sendable {
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
    }

    public let image: RasterImage
    public let source: Source
    public let url: URL
    /// `true` when a cached image is past its freshness and is served under
    /// stale-while-revalidate or stale-if-error.
    public let isStale: Bool
    /// For a thumbnail, its encoded bytes when the loader has them at hand (just made,
    /// or read from the disk cache): write them out without encoding again.
    public let encoded: EncodedImage?

    public init(image: RasterImage, source: Source, url: URL, isStale: Bool = false, encoded: EncodedImage? = nil) {
        self.image = image
        self.source = source
        self.url = url
        self.isStale = isStale
        self.encoded = encoded
    }
}

/// What happens during a load, in order. Which events arrive depends on the cache:
///
/// | situation | events |
/// |---|---|
/// | fresh in memory or on disk | `cached` (`.memory` or `.disk`) |
/// | stale, within stale-while-revalidate | `cached` (stale), then the background revalidation's `sendingRequest(hadCache: true)` and `completed` or `failed` |
/// | stale, or no-cache, or must-revalidate | `sendingRequest(hadCache: true)`, then `completed` (`.networkNotModified` or `.networkToDisk`) or `failed` |
/// | the origin fails, within stale-if-error | `sendingRequest(hadCache: true)`, `cached` (stale), `failed` |
/// | nothing cached | `sendingRequest(hadCache: false)`, `progress`..., `completed` (`.networkToDisk` or `.network`) or `failed` |
/// | a failure remembered (error caching) | `failed` (`.rememberedFailure`), no request |
/// | a file URL | `completed` (`.localFile`) or `failed` |
///
/// The sequence ends after the last event. An image is obtained when a `cached` or
/// `completed` event arrives.
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
    public enum CachePolicy: String, Sendable, Hashable, Codable {
        /// Follow the stored responses' HTTP caching rules.
        case useCache
        /// Ask the origin even when the cached image is fresh (a user's reload), except
        /// for a fresh `immutable` response, which is used as it is.
        case revalidate
        /// Ignore every cache; download again and replace what is stored.
        case reload
    }

    public var cachePolicy: CachePolicy = .useCache
    /// How urgent the load is; a shared load runs at the highest priority of its callers.
    public var priority: LoadPriority = .normal
    /// Finish the download and fill the caches even if every caller stops waiting
    /// (a list cell reused before its image arrived, when the image will be wanted again).
    public var finishesWhenCancelled = false

    public init(
        cachePolicy: CachePolicy = .useCache, priority: LoadPriority = .normal, finishesWhenCancelled: Bool = false
    ) {
        self.cachePolicy = cachePolicy
        self.priority = priority
        self.finishesWhenCancelled = finishesWhenCancelled
    }
}
