import AsyncHTTPClient
import Foundation
import Logging
import RasterImage

extension ImageLoader {
    /// Everything a loader is built from: its caches, its HTTP settings and its rules.
    ///
    /// ```swift
    /// var configuration = ImageLoader.Configuration()
    /// configuration.cacheDirectory = "/var/cache/thumbnails"
    /// configuration.defaultCacheControlMaxAge = 3600        // for responses that state none
    /// configuration.acceptedContentTypes = AcceptedContentTypes(["image/png", "image/jpeg"])
    /// configuration.http.credentials = ("user", "secret")
    /// let loader = try ImageLoader(configuration: configuration)
    /// ```
    public struct Configuration: Sendable {
        // MARK: Caches

        /// The disk cache's folder; `nil` for no disk cache. Default: ``DiskCache/defaultDirectory()``.
        public var cacheDirectory: String? = DiskCache.defaultDirectory()
        /// The disk cache's size limit; least recently used entries go first.
        public var diskCacheMaxBytes = 512 << 20
        /// Keep decoded images in memory.
        public var cacheImagesInMemory = true
        /// The memory cache's limits (bytes, count, time to live, largest entry).
        public var memoryCache = MemoryCache.Configuration()

        // MARK: HTTP caching rules

        /// Follow the servers' caching headers (RFC 9111). When `false`, stored images
        /// never go stale and are kept until cleaned up (no-store is still honoured).
        public var useServerCachePolicy = true
        /// Seconds of freshness for responses that state none (no max-age, no Expires),
        /// instead of the heuristic (10% of the time since Last-Modified).
        public var defaultCacheControlMaxAge: TimeInterval?
        /// Seconds past its freshness a stored response may still be used when its origin
        /// cannot be reached (no connection, a timeout, a broken response, or a gateway's
        /// 502, 503 or 504), as RFC 9111 §4.2.4 allows a disconnected cache, unless the
        /// response forbids it (`must-revalidate`, `no-cache`). `nil` (the default): only
        /// within the response's own `stale-if-error`. A thumbnail service sets it, so
        /// that an image it holds is not an error while its origin is down.
        ///
        /// ```swift
        /// configuration.staleWhenUnreachable = 86_400   // a day past freshness, while the origin is down
        /// ```
        public var staleWhenUnreachable: TimeInterval?
        /// Seconds an error response (4xx, 5xx) is remembered, unless it says otherwise.
        public var defaultCacheControlMaxAgeForErrors: TimeInterval = 60
        /// After this many failures within the window, a load fails without a request.
        public var maxAttemptsForErrors = 3
        /// The types a response's Content-Type and its bytes must both be.
        public var acceptedContentTypes = AcceptedContentTypes.default
        /// Whether a declared type (a response's `Content-Type`, an upload's) must be one
        /// of ``acceptedContentTypes`` and name the format the bytes are. When false, the
        /// bytes alone decide: their format must be accepted, and whatever the origin
        /// declared is ignored, as image proxies do for origins that label images
        /// `application/octet-stream` (object stores' default) or by a wrong extension.
        /// Default: true.
        ///
        /// ```swift
        /// configuration.checksDeclaredContentType = false   // a PNG served as binary/octet-stream loads
        /// ```
        public var checksDeclaredContentType = true

        // MARK: HTTP

        /// Sent with every request; Authorization, Proxy-Authorization and Cookie only to
        /// the origin asked for, never to another origin after a redirect.
        public var requestHeaders: [HeaderField] = []
        /// The HTTP client's settings: timeouts (connect, read, total), size caps,
        /// redirects, credentials, TLS.
        ///
        /// ```swift
        /// configuration.http.timeout = .seconds(10)
        /// configuration.http.credentials = ("user", "secret")
        /// ```
        public var http = HTTPDataLoader.Configuration()
        /// An AsyncHTTPClient `HTTPClient` the application already runs (a server shares
        /// one): the loader sends its requests through it and never shuts it down.
        /// Its connect and read timeouts and TLS settings are its own; ``http``'s
        /// total timeout, caps and redirect rules still apply when the client does not
        /// follow redirects itself (`redirectConfiguration: .disallow`). `nil`: the loader
        /// makes its own from ``http``.
        public var httpClient: HTTPClient?
        /// Another HTTP stack, or a loader of other schemes (the ObjectStorage
        /// library's `ObjectStorageDataLoader`); `nil` for AsyncHTTPClient. The loader
        /// shuts it down with itself.
        ///
        /// ```swift
        /// import ObjectStorage
        /// configuration.dataLoader = try ObjectStorageDataLoader(
        ///     ObjectStorageConfiguration(s3: S3Configuration(region: "eu-west-1")), wrapping: configuration)
        /// ```
        public var dataLoader: (any DataLoading)?

        // MARK: Decoding

        /// Decodes downloaded bytes; any `ImageDecoding` (RasterImage).
        public var decoder: any ImageDecoding = ImageDecoder()
        /// The limits and frame selection every decode uses, thumbnails included.
        public var decodingOptions = DecodingOptions()
        /// Decodes (and resamples) at once, each on a thread of the loader's own pool.
        /// Default: the number of cores.
        public var decodingThreads = ProcessInfo.processInfo.activeProcessorCount
        /// How far below the rest of the process the decoding threads run, as a Unix nice
        /// increment (0 to 19; Linux, where the nice value is per thread). Above 0, when the
        /// cores are busy, the threads that answer requests and move bytes (event loops,
        /// cache hits, downloads) go first and decoding takes the time they leave, so
        /// cheap work is not queued behind thumbnails. Default 0: the process's priority.
        ///
        /// ```swift
        /// var configuration = ImageLoader.Configuration()
        /// configuration.workerNiceness = 10
        /// ```
        public var workerNiceness = 0

        // MARK: Scheduling

        /// Requests in flight at once; more wait, the highest priority first.
        public var concurrentLoads = 8
        /// Which waiting load of equal priority goes first. Default: first come, first served.
        public var queueOrder = QueueOrder.fifo

        // MARK: Observability

        /// Log every cache miss at info level (otherwise at debug).
        public var logCacheMisses = false
        /// Where the loader logs (cache misses, failures at warning).
        /// Default: a logger that discards everything: the library never prints.
        public var logger = Logger(label: "ImageLoader", factory: { _ in SwiftLogNoOpLogHandler() })
        /// The clock for cache ages and error windows (tests substitute their own).
        public var clock: @Sendable () -> Date = { Date() }

        /// ``http`` with the loader's ``clock``: what its own HTTP loader is made with.
        package var httpWithClock: HTTPDataLoader.Configuration {
            var http = self.http
            http.clock = clock
            return http
        }

        /// What the loader fetches through: ``dataLoader``, else an HTTP loader on
        /// ``httpClient`` or on a client of its own.
        package func makeDataLoader() -> any DataLoading {
            if let dataLoader { return dataLoader }
            if let httpClient {
                return HTTPDataLoader(client: httpClient, configuration: httpWithClock, logger: logger)
            }
            return HTTPDataLoader(configuration: httpWithClock, logger: logger)
        }

        /// The defaults: a disk cache in ``DiskCache/defaultDirectory()``, a memory cache, AsyncHTTPClient.
        public init() {}

        var cachePolicy: HTTPCachePolicy {
            HTTPCachePolicy(useServerCachePolicy: useServerCachePolicy, defaultMaxAge: defaultCacheControlMaxAge)
        }
    }
}
