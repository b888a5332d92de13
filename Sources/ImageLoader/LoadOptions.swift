import Foundation
import RasterImage

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
