import CoreMetrics
import Crypto
import Foundation
import HTTPTypes
import ImageLoader
import ImageLoaderSupport
import Logging
import RasterImage
import ServiceLifecycle

/// A thumbnail service that speaks imgproxy's URLs: parse and check the URL, fetch the
/// source through an `ImageLoader` (its RFC 9111 disk cache, one download per URL),
/// make the thumbnail on a bounded number of workers, and answer with the caching
/// headers a CDN needs. ``application(host:port:maxConnections:idleTimeout:metricsText:onServerRunning:logger:)``
/// makes the hardened HTTP application in one call (what `imageloader serve` runs);
/// ``addRoutes(to:metricsText:)`` mounts the routes in a router of your own.
///
/// ```swift
/// var configuration = ImageService.Configuration()
/// configuration.signature = try URLSignature(hexPairs: [(key: key, salt: salt)])
/// let service = try ImageService(configuration: configuration)
/// let app = service.application(host: "0.0.0.0", port: 8080)
/// try await ServiceGroup(services: [service, app], gracefulShutdownSignals: [.sigterm], logger: logger).run()
/// ```
///
/// Every request is bounded: at most ``Configuration/workers`` images are processed at
/// once, ``Configuration/fetchesAhead`` more requests fetch their sources meanwhile, and
/// ``Configuration/queue`` wait; beyond that the answer is an immediate 503 with
/// `Retry-After`, so memory and latency stay bounded under any load. Request bodies
/// (`POST /info`, `/upload`) are read in places of their own, as many as workers, with a
/// queue as long: a slow sender holds no place of image requests. Identical
/// requests in flight share one result; results are kept in memory while their source
/// is fresh. With ``ImageServiceRequestContext`` (or any ``ChannelRequestContext``) and
/// the handlers of ``connectionHandlers(maxConnections:)`` on each connection (as
/// ``application(host:port:maxConnections:idleTimeout:metricsText:onServerRunning:logger:)``
/// puts them), a request whose client has gone stops.
public final class ImageService: Service, Sendable {
    /// The service's settings; the defaults are safe on the open internet.
    public struct Configuration: Sendable {
        /// Key and salt pairs URLs are signed with; `nil` (and no `allowsUnsigned`): every URL is refused.
        public var signature: URLSignature?
        /// Serve `insecure` and `_` in place of a signature.
        public var allowsUnsigned = false
        /// Presets, only-presets mode and whether URLs may set security options.
        public var urlRules = ProcessingURL.Rules()
        /// The watermark `wm` draws (imgproxy's `IMGPROXY_WATERMARK_PATH`), decoded; `nil`: `wm` draws nothing.
        public var watermark: RasterImage?
        /// The opacity every watermark is multiplied by, 0 to 1 (`IMGPROXY_WATERMARK_OPACITY`).
        public var watermarkOpacity = 1.0
        /// Frames of an animated GIF or WebP source kept in the result (when it is GIF or
        /// WebP); 1 (the default, as imgproxy's) makes every result a still image. A
        /// source with more frames gives its first frame only.
        public var maxAnimationFrames = 1
        /// The largest frame of an animation kept animated, in pixels; `nil`: ``maxSourcePixels``.
        public var maxAnimationFramePixels: Int?
        /// A path every route is under (`/images`: `/images/{signature}/...`, `/images/health`),
        /// imgproxy's `IMGPROXY_PATH_PREFIX`; empty: none.
        public var pathPrefix = ""
        /// Which sources may be fetched (prefixes, the local root).
        public var sources = SourcePolicy()
        /// Which addresses sources may be fetched from: public ones only by default.
        public var network = NetworkPolicy.publicOnly
        /// The largest source, in bytes.
        public var maxSourceBytes = 64 << 20
        /// The largest source, in pixels (width x height of a frame).
        public var maxSourcePixels = 50_000_000
        /// The longest side a result may have.
        public var maxResultSide = 8192
        /// The longest a request may take, queueing, fetching and processing included
        /// (past it: 503, as imgproxy's `IMGPROXY_TIMEOUT`).
        public var timeout: Duration = .seconds(10)
        /// The longest a source's download may take (past it: 504, as imgproxy's
        /// `IMGPROXY_DOWNLOAD_TIMEOUT`).
        public var downloadTimeout: Duration = .seconds(5)
        /// Seconds of `max-age` results are sent with (`Cache-Control: max-age=N, public`),
        /// imgproxy's `IMGPROXY_TTL`: a year by default; 0 sends `no-cache`. A URL's
        /// `exp` shortens it; ``cacheControlPassthrough`` replaces it with the source's.
        public var ttl = 31_536_000
        /// Send the source's own `Cache-Control` (or its `Expires` as a `max-age`)
        /// instead of ``ttl`` when it has one (imgproxy's `IMGPROXY_CACHE_CONTROL_PASSTHROUGH`).
        public var cacheControlPassthrough = false
        /// Seconds a source that states no freshness (a local file, a response without
        /// `max-age` or `Expires`) is taken as fresh: how long the result cache keeps
        /// what is made from it without looking at the source again.
        public var sourceTTL = 3600
        /// The validators results are sent with and that conditional requests are
        /// answered by (imgproxy's `IMGPROXY_USE_ETAG`, `IMGPROXY_ETAG_BUSTER`,
        /// `IMGPROXY_USE_LAST_MODIFIED`, `IMGPROXY_LAST_MODIFIED_BUSTER`).
        public var validators = Validators()
        /// Send `Link: <source>; rel="canonical"` with results of http(s) sources
        /// (imgproxy's `IMGPROXY_SET_CANONICAL_HEADER`).
        public var canonicalHeader = false
        /// Send `X-Origin-Width`, `X-Origin-Height`, `X-Result-Width`, `X-Result-Height`
        /// and `X-Origin-Content-Length` with results (imgproxy's `IMGPROXY_ENABLE_DEBUG_HEADERS`).
        public var debugHeaders = false
        /// What is processed in place of a source that cannot be fetched (imgproxy's
        /// `IMGPROXY_FALLBACK_IMAGE_DATA` and `_PATH`), with the status it is sent with
        /// and its `max-age`.
        public var fallbackImage: FallbackImage?
        /// A secret every processing request must carry as `Authorization: Bearer
        /// {secret}`, else 403 (imgproxy's `IMGPROXY_SECRET`): for a service behind a
        /// CDN that adds it. `/health` does not ask for it.
        public var secret: String?
        /// The `Access-Control-Allow-Origin` sent with every answer, with
        /// `Access-Control-Allow-Methods: GET, OPTIONS` (imgproxy's `IMGPROXY_ALLOW_ORIGIN`);
        /// `nil`: no CORS header fields.
        public var allowOrigin: String?
        /// Pass the client's cookies on to sources (imgproxy's `IMGPROXY_COOKIE_PASSTHROUGH`).
        /// Requests with cookies are neither answered from the caches nor stored in them.
        public var cookies = CookiePassthrough.none
        /// Another path `/health` is answered on (imgproxy's `IMGPROXY_HEALTH_CHECK_PATH`),
        /// under ``pathPrefix``.
        public var healthCheckPath: String?
        /// Errors as an HTML page with the cause (imgproxy's `IMGPROXY_DEVELOPMENT_ERRORS_MODE`).
        /// For development only: the cause names sources and addresses.
        public var developmentErrors = false
        /// Seconds a 404 of the source may be cached downstream.
        public var notFoundTTL = 60
        /// Images decoded, resized and encoded at once (the loader's decoding threads).
        public var workers = ProcessInfo.processInfo.activeProcessorCount
        /// How far below the event loops the workers run, as a nice increment (0 to 19;
        /// the loader's `ImageLoader.Configuration.workerNiceness`). When the cores are
        /// busy, cache hits, 304s, health checks and source downloads go first, and
        /// thumbnails take the time left. Default 10.
        public var workerNiceness = 10
        /// Requests that fetch their source while the workers are busy, each holding it
        /// until a worker is free; `nil`: as many as ``workers``. A fetch waits on the
        /// network, not the CPU: without these, a worker would idle through every
        /// download, and a slow origin would leave the cores unused. Sources in memory
        /// are at most `workers + fetchesAhead`.
        public var fetchesAhead: Int?
        /// Requests waiting to start before the service answers 503; `nil`: 4 per worker.
        public var queue: Int?
        /// Bytes of processed images kept in memory; 0 keeps none.
        public var resultCacheBytes = 128 << 20
        /// A bucket (and key prefix) that processed results are kept in and looked up
        /// from, shared by every instance that names it: `s3://thumbnails/v1`,
        /// `gs://...`, `abs://...`. Its store must be configured in
        /// `loader.objectStorage`. A stored result is used while the result cache would
        /// keep it, with the header fields it was first sent with; it is written after the
        /// answer, without delaying it; a store that fails costs only the processing.
        /// `nil` (the default): results are kept in this process only.
        ///
        /// ```swift
        /// configuration.loader.objectStorage.s3 = S3Configuration(region: "eu-west-1")
        /// configuration.resultStorage = URL(string: "s3://thumbnails/v1")
        /// ```
        public var resultStorage: URL?
        /// Serve `POST /upload/{options}`.
        public var allowsUploads = false
        /// Include the GPS position in `/info` answers (`--info-exif-gps`). Off by default:
        /// a photo's location is personal data its uploader may not mean to publish.
        public var infoIncludesLocation = false
        /// How far decoders shrink while loading: `.fastest` (the default) as far as
        /// the result's size allows, as libvips' thumbnail and imgproxy do; the Lanczos-3
        /// step then does the rest. `.quality` keeps twice the result's size for it,
        /// which costs a full-size JPEG decode when a source is under twice the size.
        public var shrinkOnLoad = ThumbnailOptions.ShrinkOnLoad.fastest
        /// The quality of lossy results when neither the URL nor ``formatQuality`` names
        /// one (imgproxy's `IMGPROXY_QUALITY`, 80).
        public var quality = 80
        /// The quality of each format's results when the URL names none, before
        /// ``quality`` (imgproxy's `IMGPROXY_FORMAT_QUALITY`; its defaults: WebP 79,
        /// AVIF 63, JPEG XL 77). A URL's `q` wins over its `fq`, which wins over these.
        public var formatQuality: [ProcessingOptions.Format: Int] = [.webp: 79, .avif: 63, .jxl: 77]
        /// Answer AVIF to requests whose `Accept` lists `image/avif` and whose URL names
        /// no format (before WebP; an animated result stays WebP or GIF), imgproxy's
        /// `IMGPROXY_AUTO_AVIF`. Off by default: an AV1 encode costs several times a WebP
        /// one (Benchmarks/README.md has the figures).
        public var autoAVIF = false
        /// Answer WebP to requests whose `Accept` lists `image/webp` and whose URL names no
        /// format (imgproxy's `IMGPROXY_AUTO_WEBP`). Off by default, as imgproxy's, so a
        /// deployment that moves from imgproxy answers what it answered.
        public var autoWebP = false
        /// Answer JPEG XL to requests whose `Accept` lists `image/jxl` and whose URL names
        /// no format (before AVIF and WebP; not for animations), imgproxy's `IMGPROXY_AUTO_JXL`.
        public var autoJXL = false
        /// Answer WebP to requests whose `Accept` lists it even when the URL names another
        /// format (imgproxy's `IMGPROXY_ENFORCE_WEBP`).
        public var enforceWebP = false
        /// Answer AVIF to requests whose `Accept` lists it even when the URL names another
        /// format, animations excepted (imgproxy's `IMGPROXY_ENFORCE_AVIF`).
        public var enforceAVIF = false
        /// Answer JPEG XL to requests whose `Accept` lists it even when the URL names
        /// another format, animations excepted (imgproxy's `IMGPROXY_ENFORCE_JXL`).
        public var enforceJXL = false
        /// Answer HEIC to requests whose `Accept` lists `image/heic` (Safari's) or
        /// `image/heif` and whose URL names no format (after JPEG XL and AVIF, before WebP;
        /// not for animations). imgproxy has no such setting; off by default: an x265
        /// encode costs several times a WebP one (Benchmarks/README.md has the figures).
        public var autoHEIC = false
        /// Answer HEIC to requests whose `Accept` lists it even when the URL names another
        /// format, animations excepted.
        public var enforceHEIC = false
        /// Rasterise SVG sources when the URL names no format (imgproxy's
        /// `IMGPROXY_ALWAYS_RASTERIZE_SVG`); by default an SVG source is answered as SVG,
        /// sanitised, unless the URL asks for another format.
        public var alwaysRasterizeSVG = false
        /// The formats a result takes when neither the URL nor `Accept` decides: the
        /// source's own when it is listed, else the first listed that can hold the
        /// result's animation and transparency, else the first (imgproxy's
        /// `IMGPROXY_PREFERRED_FORMATS`; JPEG, PNG, GIF by default, so an animated GIF
        /// stays an animated GIF and a WebP with alpha becomes a PNG).
        public var preferredFormats: [ProcessingOptions.Format] = [.jpeg, .png, .gif]
        /// Source formats sent as they are, without processing, when the URL names no
        /// other format (imgproxy's `IMGPROXY_SKIP_PROCESSING_FORMATS`; a URL's `skp`
        /// adds to these).
        public var skipProcessingFormats: Set<ImageFormat> = []
        /// Read the client hints `Sec-CH-DPR`/`DPR` and `Sec-CH-Width`/`Width` as the
        /// URL's default `dpr` and width, and name them in `Vary` (imgproxy's
        /// `IMGPROXY_ENABLE_CLIENT_HINTS`).
        public var clientHints = false
        /// The compression level of PNG results, 0 (stored) to 9, as `PNGEncoder`'s.
        /// Photographs are written as literals under a Huffman code whatever the level;
        /// the level is libdeflate's for drawings, text and flat colour.
        public var pngCompressionLevel = 6
        /// The loader's settings (disk cache folder and size, HTTP). The service sets
        /// the source limits, the timeout, the address filter and the decoding threads
        /// (``workers``) on it, lets it download as many sources at once as may be in
        /// flight, and keeps no decoded images in its memory cache (the result cache
        /// holds what is sent).
        /// A custom `dataLoader` replaces the HTTP client and with it the address checks.
        public var loader = ImageLoader.Configuration()
        /// Where the metrics go; `nil`: the process's `MetricsSystem`.
        public var metricsFactory: (any MetricsFactory)?
        /// The access log (one line per request) and the service's warnings.
        public var logger = Logger(label: "ImageService")

        /// The defaults: signed URLs only, public sources only, the limits above.
        public init() {}

        /// Requests that may wait to start.
        var queueLimit: Int { queue ?? Checked.saturatingMultiply(4, max(1, workers)) }
        /// Requests fetching, holding a source for a worker, or being processed.
        var inFlightLimit: Int { Checked.saturatingAdd(max(1, workers), max(0, fetchesAhead ?? workers)) }
    }

    /// ``Configuration/resultStorage`` names a bucket of a store the loader does not have.
    public struct ResultStorageUnavailable: Error, CustomStringConvertible {
        /// The location asked for.
        public let location: URL
        public var description: String {
            "result storage \(location.absoluteString): its store is not configured (loader.objectStorage)"
        }
    }

    /// The settings the service was made with.
    public let configuration: Configuration
    let loader: ImageLoader
    private let results: ResultCache?
    /// The bucket results are shared through, when configured.
    private let storage: ResultStorage?
    private let admission: WorkScheduler
    /// Request bodies (`POST /info`, `/upload`) being read, and held until answered: apart
    /// from `admission`, so clients that send a body slowly hold no place of image
    /// requests; as many as workers, each at most `maxSourceBytes`.
    private let bodies: WorkScheduler
    private let shared = SharedWork<ProcessingKey, ProcessingOutcome, Never, Never>()
    let metrics: ServiceMetrics
    /// Where `local:///` sources are read: one thread per request that may be fetching,
    /// apart from NIO's shared pool (where name lookups wait) and from the workers.
    private let fileReads: WaitingThreads
    /// The watermark, with its resized copies.
    private let watermark: WatermarkImage?

    /// A service with its own loader, made from `configuration.loader` and the limits.
    public init(configuration: Configuration) throws {
        self.configuration = configuration
        var loaderConfiguration = configuration.loader
        loaderConfiguration.cacheImagesInMemory = false
        // What a source is, is judged from its bytes, as other image services do: origins
        // often label images application/octet-stream or by the wrong extension.
        loaderConfiguration.checksDeclaredContentType = false
        loaderConfiguration.decodingThreads = max(1, configuration.workers)
        loaderConfiguration.workerNiceness = configuration.workerNiceness
        loaderConfiguration.concurrentLoads = max(loaderConfiguration.concurrentLoads, configuration.inFlightLimit)
        loaderConfiguration.http.maxResponseBytes = configuration.maxSourceBytes
        loaderConfiguration.http.timeout = configuration.downloadTimeout
        if !configuration.network.allowsPrivateNetworks {
            let policy = configuration.network
            loaderConfiguration.http.addressFilter = { text in IPAddress(text).map(policy.allows) ?? false }
        }
        var limits = loaderConfiguration.decodingOptions.limits
        limits.maxInputBytes = configuration.maxSourceBytes
        limits.maxPixelsPerFrame = configuration.maxSourcePixels
        loaderConfiguration.decodingOptions.limits = limits
        if let location = configuration.resultStorage {
            guard let scheme = location.scheme?.lowercased(),
                configuration.loader.objectStorage.schemes.contains(scheme),
                location.host?.isEmpty == false
            else {
                throw ResultStorageUnavailable(location: location)
            }
        }
        let loader = try ImageLoader(configuration: loaderConfiguration)
        self.loader = loader
        storage = configuration.resultStorage.map {
            ResultStorage(location: $0, loader: loader, logger: configuration.logger)
        }
        results = configuration.resultCacheBytes > 0 ? ResultCache(maxBytes: configuration.resultCacheBytes) : nil
        admission = WorkScheduler(
            limit: configuration.inFlightLimit, order: .fifo, maxWaiting: configuration.queueLimit)
        // As many bodies as workers: more would only wait for a worker, holding memory.
        bodies = WorkScheduler(limit: max(1, configuration.workers), order: .fifo, maxWaiting: configuration.queueLimit)
        metrics = ServiceMetrics(factory: configuration.metricsFactory ?? MetricsSystem.factory)
        fileReads = WaitingThreads(threads: min(configuration.inFlightLimit, 64))
        watermark = configuration.watermark.map { WatermarkImage(image: $0, opacity: configuration.watermarkOpacity) }
    }

    /// Waits for graceful shutdown (the HTTP server, started after this service in a
    /// `ServiceGroup`, stops first and finishes what is in flight), then shuts the
    /// loader down.
    public func run() async throws {
        try await runEvery([{ try await self.loader.run() }, { await self.fileReads.shutdown() }])
    }

    /// Shuts the loader down (for use without a `ServiceGroup`).
    public func shutdown() async throws {
        try await runEvery([{ await self.fileReads.shutdown() }, { try await self.loader.shutdown() }])
    }

    // MARK: Processing

    /// The answer to `GET {path}`, a processing URL, with the request's `Accept` and
    /// conditional header fields (for tests and callers without a whole request).
    func process(
        path: String, accept: String?, conditions: Conditions,
        departure: @Sendable () async -> ClientDeparture? = { nil }
    ) async -> Reply {
        var headers = HTTPFields()
        if let accept { headers[.accept] = accept }
        if let tag = conditions.ifNoneMatch { headers[.ifNoneMatch] = tag }
        if let since = conditions.ifModifiedSince { headers[.ifModifiedSince] = since }
        return await process(path: path, headers: headers, departure: departure)
    }

    /// The answer to `GET {path}`, a processing URL, with the request's header fields:
    /// `Accept` and the client hints (``ClientFeatures``), the conditional fields
    /// (``Validators``), `Cookie` (``Configuration/cookies``).
    /// `departure` is asked for only when the answer is not in the result cache.
    func process(
        path: String, headers: HTTPFields, authority: String? = nil,
        departure: @Sendable () async -> ClientDeparture? = { nil }
    ) async -> Reply {
        let features = ClientFeatures(headers, configuration: configuration)
        let conditions = configuration.validators.conditions(
            ifNoneMatch: headers[.ifNoneMatch], ifModifiedSince: headers[.ifModifiedSince])
        let requestKey = RequestKey(path: path, features: features)
        // A request whose cookies may go to its source is its user's own: no cache answers it.
        let mayPassCookies = configuration.cookies != .none && headers[.cookie] != nil
        if !mayPassCookies, let hit = cachedReply(requestKey, conditions: conditions) { return hit }
        do {
            guard path.hasPrefix(configuration.pathPrefix) else { throw ServiceError(status: 404, "not found") }
            let url = try ProcessingURL.parse(
                String(path.dropFirst(configuration.pathPrefix.count)), signature: configuration.signature,
                allowsUnsigned: configuration.allowsUnsigned, rules: configuration.urlRules,
                starting: features.startingOptions)
            let allowed = try configuration.sources.check(url.source)
            let cookie: String? =
                if case .remote(let source) = allowed {
                    configuration.cookies.cookie(for: source, request: headers, authority: authority)
                } else { nil }
            let key = ResultKey(source: allowed.text, options: url.options, formats: features.formats, cookie: cookie)
            let outcome = try await withTimeout(leavingWith: await departure()) {
                try await self.shared.value(
                    for: ProcessingKey(result: key, conditions: conditions), product: nil,
                    priority: PriorityHandle(.normal)
                ) { run in
                    try await self.admitted(run.priority) {
                        try await self.produce(
                            url, allowed, key, cookie == nil ? requestKey : nil, conditions, features: features)
                    }
                }.value
            }
            switch outcome {
            case .notModified(let meta): return .notModified(meta)
            case .processed(let result): return .image(result)
            }
        } catch {
            var failure = ServiceError.from(error)
            if failure.isMissingSource { failure.maxAge = configuration.notFoundTTL }
            return .failure(failure)
        }
    }

    /// The answer from the result cache (the image, or 304 for `conditions`), without
    /// waiting: nil when the cache holds no fresh result for the path and Accept.
    func cachedReply(_ key: RequestKey, conditions: Conditions) -> Reply? {
        guard let results, let hit = results.fresh(key, at: Date()) else { return nil }
        metrics.resultHit()
        return conditions.matches(hit.meta) ? .notModified(hit.meta) : .image(hit)
    }

    /// Runs `body` once it may start (fetch, then wait for one of the loader's decoding
    /// threads, then process): waits in the queue, or fails at once with 429 when it is full.
    /// The queue-depth gauge is set when a request arrives, when it leaves the queue and
    /// when it ends (served, refused or cancelled), so it falls back to 0 as the queue
    /// drains; the active gauge when it takes its place and when it has given it back.
    func admitted<T: Sendable>(_ priority: PriorityHandle, _ body: () async throws -> T) async throws -> T {
        metrics.queue(admission.waiting)
        defer {
            metrics.queue(admission.waiting)
            metrics.active(admission.running)
        }
        return try await ImageService.run(in: admission, priority) {
            metrics.queue(admission.waiting)
            metrics.active(admission.running)
            return try await body()
        }
    }

    /// `body` in one of the places of request bodies; 429 when they and their queue are full.
    func withBodyPlace<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        try await ImageService.run(in: bodies, PriorityHandle(.normal), body)
    }

    /// `body` once `scheduler` has a place for it; 429 when its places and queue are full.
    private static func run<T: Sendable>(
        in scheduler: WorkScheduler, _ priority: PriorityHandle, _ body: () async throws -> T
    ) async throws -> T {
        do {
            return try await scheduler.run(priority: priority, body)
        } catch is WorkScheduler.Full {
            throw ServiceError.overloaded
        }
    }

    /// `body`, or 503 once the request's timeout passes, or 499 once `departure` says the
    /// client has gone (`body` is then cancelled).
    func withTimeout<T: Sendable>(
        leavingWith departure: ClientDeparture? = nil, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await ImageService.withTimeout(configuration.timeout, leavingWith: departure, body)
    }

    /// `body`, or 503 once `timeout` passes, or 499 once `departure` says the client has
    /// gone (`body` is then cancelled).
    static func withTimeout<T: Sendable>(
        _ timeout: Duration, leavingWith departure: ClientDeparture?,
        _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let stop = departure.map { departure in { @Sendable () async throws -> Never in try await departure.left() } }
        guard let value = try await untilDeadline(.now + timeout, orUntil: stop, body) else {
            throw ServiceError.timedOut
        }
        return value
    }

    /// Fetches the source, answers 304 when the conditions match its validators (or
    /// its origin, asked with them, answers 304), or makes the image and keeps it in
    /// the result cache. The header is read once: by the decode that makes the image,
    /// or, for a source passed through, alone. A source that cannot be fetched is
    /// replaced by the fallback image, when there is one.
    private func produce(
        _ url: ProcessingURL, _ allowed: SourcePolicy.Allowed, _ key: ResultKey, _ requestKey: RequestKey?,
        _ conditions: Conditions, features: ClientFeatures
    ) async throws -> ProcessingOutcome {
        let now = Date()
        // A result another instance (or this one, before a restart) made and put in the bucket.
        if let storage, let requestKey {
            if let stored = await storage.read(requestKey, now: now) {
                metrics.resultStorage("hit")
                results?.insert(stored, for: requestKey)
                return conditions.matches(stored.meta) ? .notModified(stored.meta) : .processed(stored)
            }
            metrics.resultStorage("miss")
        }
        let expires = url.options.expires.flatMap { $0 > 0 ? Date(timeIntervalSince1970: TimeInterval($0)) : nil }
        var source: SourceData
        // The fallback image's status, when it stands in for the source.
        var fallbackStatus: Int?
        do {
            source = try await metrics.timingFetch {
                try await fetch(allowed, conditions: conditions, cookie: key.cookie)
            }
        } catch let error as ImageLoadingError {
            if case .notModified(let headers) = error.reason {
                // The origin, asked with the client's validators, says its copy is current.
                func value(_ name: String) -> String? { headers.first { $0.hasName(name) }?.value }
                let answered = SourceData(
                    bytes: [], contentType: nil, entityTag: value("ETag"), lastModified: value("Last-Modified"),
                    freshFor: nil, tier: "revalidated", cacheControl: value("Cache-Control"), expires: value("Expires"))
                return .notModified(meta(answered, url, allowed, format: url.format, now: now, expires: expires))
            }
            (source, fallbackStatus) = try fallback(for: ServiceError.from(error))
        } catch let error as ServiceError {
            (source, fallbackStatus) = try fallback(for: error)
        }
        metrics.sourceFetched(from: source.tier)
        let limits = effectiveLimits(url.options.security)
        guard source.bytes.count <= limits.maxSourceBytes else {
            throw ServiceError.sourceTooLarge(bytes: limits.maxSourceBytes)
        }
        if fallbackStatus == nil, conditions.matches(entityTag: source.entityTag, lastModified: source.lastModified) {
            // Nothing is decoded for a 304: it carries no body, so no Content-Type.
            return .notModified(meta(source, url, allowed, format: url.format, now: now, expires: expires))
        }
        // The whole body: SVG's root element may lie past a long prolog (sniff reads what it needs).
        let sourceFormat = ImageFormat.sniff(source.bytes)
        if url.format == .svg && sourceFormat != .svg {
            throw ServiceError(status: 422, "SVG results are made only from SVG sources")
        }
        let skipped = url.options.skipProcessing.union(configuration.skipProcessingFormats)
        let passesThrough =
            url.options.raw
            || (sourceFormat.map(skipped.contains) ?? false
                && (url.format == nil || url.format?.imageFormat == sourceFormat))
        // An SVG source is answered as SVG, sanitised, when SVG is asked for or no format
        // is (unless the service always rasterises), as imgproxy does; every SVG that
        // leaves the service unrendered is sanitised first, whatever the path.
        let svgPassesThrough =
            sourceFormat == .svg
            && (passesThrough || url.format == .svg || (url.format == nil && !configuration.alwaysRasterizeSVG))
        var result: ProcessedResult
        if passesThrough || svgPassesThrough {
            let info: ImageInfo
            var bytes = source.bytes
            if sourceFormat == .svg {
                // Sanitised once: the document sent and its size come from the same read.
                do {
                    (bytes, info) = try ImageDecoder(options: loader.configuration.decodingOptions)
                        .sanitizedSVGAndInfo(.bytes(source.bytes))
                } catch {
                    throw ServiceError.from(error)
                }
                try limits.checkPixels(of: info)
            } else {
                info = try header(of: source.bytes, limits: limits)
            }
            var made = meta(
                source, url, allowed, format: nil, now: now, expires: expires, contentType: info.contentType)
            // The source's own extension (imgproxy's, from its type): `fn:name` gives `name.tiff`.
            made.contentDisposition = ResponseRules.contentDisposition(
                filename: url.options.filename, source: allowed.text, fileExtension: info.format.fileExtension,
                attachment: url.options.returnAttachment)
            made.extra[.acceptRanges] = "bytes"
            if configuration.debugHeaders {
                made.extra.addDebugFields(origin: info.uprightSize, result: info.uprightSize)
            }
            made.vary = nil
            result = ProcessedResult(bytes: bytes, meta: made)
        } else {
            let requested = url.format
            let options = url.options
            let preferred = configuration.preferredFormats
            let made = try await metrics.timingProcessing {
                try await process(source.bytes, url.options, limits: limits, contentType: source.contentType) {
                    info, animated in
                    ResponseRules.outputFormat(
                        requested: requested, features: features, source: info.format, animated: animated,
                        expectsTransparency: options.expectsTransparency(sourceHasAlpha: info.hasAlpha),
                        preferred: preferred)
                }
            }
            var produced = meta(
                source, url, allowed, format: made.format, now: now, expires: expires,
                contentType: made.format.contentType)
            if configuration.debugHeaders { produced.extra.addDebugFields(origin: made.origin, result: made.result) }
            result = ProcessedResult(bytes: made.bytes, meta: produced)
        }
        if let fallbackStatus {
            result.meta.status = fallbackStatus
            if let ttl = configuration.fallbackImage?.ttl, ttl > 0 {
                result.meta.caching = .maxAge(ttl)
            } else if fallbackStatus >= 400 {
                // Sent for a failure: kept no more than the failure would be (imgproxy sends none).
                result.meta.caching = .verbatim("no-store")
            }
        }
        if configuration.debugHeaders { result.meta.extra[.originContentLength] = String(source.bytes.count) }
        if let results, let requestKey, fallbackStatus == nil, result.meta.keepUntil > now {
            results.insert(result, for: requestKey)
        }
        if let storage, let requestKey, fallbackStatus == nil, result.meta.keepUntil > now {
            let metrics = self.metrics
            storage.write(result, for: requestKey) { stored in
                metrics.resultStorage(stored ? "write" : "write_failure")
            }
        }
        return .processed(result)
    }

    /// The fallback image as the source, with the status it is sent with; `failure`
    /// itself when there is none.
    private func fallback(for failure: ServiceError) throws -> (SourceData, Int?) {
        guard let image = configuration.fallbackImage, failure.status != 499 else { throw failure }
        if let cause = failure.cause { configuration.logger.warning("source failed, fallback image sent: \(cause)") }
        let source = SourceData(
            bytes: image.bytes, contentType: nil, entityTag: nil, lastModified: nil, freshFor: 0, tier: "fallback")
        return (source, image.status ?? failure.status)
    }

    /// The header fields of a result of `source` in `format` (`nil` for a 304 that
    /// knows none): the source's validators as ``Configuration/validators`` passes them
    /// on, `Cache-Control` by imgproxy's rules, `Vary`, `Content-Disposition` and `Link`.
    private func meta(
        _ source: SourceData, _ url: ProcessingURL, _ allowed: SourcePolicy.Allowed, format: ProcessingOptions.Format?,
        now: Date, expires: Date?, contentType: String = ""
    ) -> ResponseMeta {
        // The result cache keeps a result while its source is fresh (and the URL valid).
        var keepFor = min(source.freshFor ?? TimeInterval(configuration.sourceTTL), ImageService.maxFreshness)
        if let expires { keepFor = max(0, min(keepFor, expires.timeIntervalSince(now))) }
        var meta = ResponseMeta(
            contentType: contentType, sourceTag: source.entityTag, sourceLastModified: source.lastModified,
            entityTag: configuration.validators.entityTag(source: source.entityTag),
            lastModified: configuration.validators.lastModified(source: source.lastModified),
            vary: ClientFeatures.vary(configuration), keepUntil: now.addingTimeInterval(keepFor),
            caching: clientCaching(source, expires: expires),
            contentDisposition: ResponseRules.contentDisposition(
                filename: url.options.filename, source: allowed.text, format: format,
                attachment: url.options.returnAttachment))
        if configuration.canonicalHeader, case .remote(let link) = allowed {
            meta.extra[HTTPField.Name("Link")!] = "<\(link.absoluteString)>; rel=\"canonical\""
        }
        return meta
    }

    /// `Cache-Control` by imgproxy's rules: a URL's `exp` caps the TTL; else the
    /// source's own (passed through when asked); else the TTL.
    private func clientCaching(_ source: SourceData, expires: Date?) -> ClientCaching {
        let ttl = configuration.ttl
        var rule = ClientCaching.maxAge(ttl)
        if configuration.cacheControlPassthrough {
            if let control = source.cacheControl, !control.isEmpty {
                rule = .verbatim(control)
            } else if let date = source.expires.flatMap(HTTPDate.parse) {
                rule = .until(date, cap: .max, otherwise: rule)
            }
        }
        if let expires { rule = .until(expires, cap: ttl, otherwise: rule) }
        return rule
    }

    /// The header of a source sent as it is: read, and its size held to the limits, as
    /// a processed source's is.
    private func header(of bytes: [UInt8], limits: EffectiveLimits) throws -> ImageInfo {
        let info: ImageInfo
        do {
            info = try loader.configuration.decoder.info(.bytes(bytes), options: loader.configuration.decodingOptions)
        } catch {
            throw ServiceError.from(error)
        }
        try limits.checkPixels(of: info)
        return info
    }

    /// The service's limits, lowered where the URL's security options ask
    /// (``ProcessingURL/Rules/allowsSecurityOptions``); never raised.
    func effectiveLimits(_ security: ProcessingOptions.SecurityLimits) -> EffectiveLimits {
        EffectiveLimits(
            maxSourceBytes: min(configuration.maxSourceBytes, security.maxSourceBytes ?? .max),
            maxSourcePixels: min(configuration.maxSourcePixels, security.maxSourcePixels ?? .max),
            maxResultSide: min(configuration.maxResultSide, security.maxResultSide ?? .max),
            maxAnimationFrames: min(max(1, configuration.maxAnimationFrames), security.maxAnimationFrames ?? .max),
            maxAnimationFramePixels: [configuration.maxAnimationFramePixels, security.maxAnimationFramePixels]
                .compactMap { $0 }.min())
    }

    /// The encoded result of `bytes` with `options`, in the format `format` picks from the
    /// source's header: in one pass when the options ask for a resize with at most a plain
    /// compass crop, else step by step (``ImageProcessor``). The header is read once, by
    /// the decode: what depends on it (the pixel limit, the format, the box, animation)
    /// is decided there, before any pixel is decoded.
    func process(
        _ bytes: [UInt8], _ options: ProcessingOptions, limits: EffectiveLimits, contentType: String?,
        format: @escaping @Sendable (ImageInfo, _ animated: Bool) -> ProcessingOptions.Format
    ) async throws -> ProcessingChoice.Made {
        // EXIF kept as the options say: all of it, or only the copyright (the default, as imgproxy's).
        let kept: PhotoMetadata.Kept? = !options.stripMetadata ? .all : options.keepCopyright ? .copyright : nil
        let exif = kept.flatMap {
            PhotoMetadata.outputBlock(from: bytes, keeping: $0, upright: options.autoRotate ?? true)
        }
        var decodingLimits = loader.configuration.decodingOptions.limits
        decodingLimits.maxPixelsPerFrame = min(decodingLimits.maxPixelsPerFrame, limits.maxSourcePixels)
        let plan = ProcessingChoice.Planner(
            options: options, limits: limits, decodingLimits: decodingLimits, exif: exif, format: format,
            output: { [configuration] format, quality, keepsProfile, grey in
                ImageService.outputFormat(
                    format, quality: quality, keepsProfile: keepsProfile, grey: grey, configuration)
            }, shrinkOnLoad: configuration.shrinkOnLoad, watermark: watermark)
        let outcome: Result<ProcessingChoice.Made, ServiceError>
        do {
            outcome = try await loader.processing(bytes, declaredContentType: contentType) { decoder in
                // The request's own failures keep their status; decoders' errors go on to
                // the loader, which maps them as its own.
                do {
                    return .success(try plan.encoded(bytes, decoder: decoder))
                } catch let error as ServiceError {
                    return .failure(error)
                } catch let error as ImageEncodingError {
                    return .failure(ServiceError(status: 500, error.description))
                }
            }
        } catch {
            throw ServiceError.from(error)
        }
        return try outcome.get()
    }

    /// `image` encoded; with `maxBytes` above 0 and a lossy format, encoded again at lower
    /// qualities until it fits, as imgproxy's `max_bytes` does: each try's quality is the
    /// last one times 0.25, 0.5 or 0.75 by how far over the size it was, down to 10 at
    /// the least (about eight tries from 100); the last try is sent when none fits.
    static func encode(_ image: RasterImage, as output: OutputFormat, maxBytes: Int) throws -> [UInt8] {
        var output = output
        while true {
            let bytes = try image.encodedKeepingAnimation(as: output).bytes
            guard maxBytes > 0, bytes.count > maxBytes, let quality = output.quality, quality > 10 else {
                return bytes
            }
            let over = Double(bytes.count) / Double(maxBytes)
            let factor = over > 3 ? 0.25 : over > 1.5 ? 0.5 : 0.75
            output = output.with(quality: max(1, min(quality - 1, ProcessingPlan.scale(quality, factor))))
        }
    }

    /// The encoder for `format`, with the URL's quality, else the service's for the
    /// format, else its common one.
    ///
    /// A grey source (`grey`) gives grey JPEG and PNG results when they are still grey
    /// after processing (no coloured background, padding or watermark), as imgproxy
    /// keeps the source's colourspace.
    static func outputFormat(
        _ format: ProcessingOptions.Format, quality: Int?, keepsProfile: Bool, grey: Bool = false,
        _ configuration: Configuration
    ) -> OutputFormat {
        let quality = quality ?? configuration.formatQuality[format] ?? configuration.quality
        switch format {
        case .jpeg:
            var encoder = JPEGEncoder(quality: quality, includeICCProfile: keepsProfile)
            encoder.grayscale = grey
            return .jpeg(encoder)
        case .png:
            var encoder = PNGEncoder(
                compressionLevel: configuration.pngCompressionLevel, includeICCProfile: keepsProfile)
            encoder.grayscale = grey
            return .png(encoder)
        case .ico:
            return .ico(ICOEncoder(png: PNGEncoder(compressionLevel: configuration.pngCompressionLevel)))
        default:
            return outputFormat(format, quality: quality, keepsProfile: keepsProfile)
        }
    }

    private static func outputFormat(_ format: ProcessingOptions.Format, quality: Int, keepsProfile: Bool)
        -> OutputFormat
    {
        switch format {
        case .jpeg: .jpeg(JPEGEncoder(quality: quality, includeICCProfile: keepsProfile))
        case .png: .png(PNGEncoder(includeICCProfile: keepsProfile))
        case .ico: .ico(ICOEncoder())
        case .webp: .webp(WebPEncoder(quality: quality, includeICCProfile: keepsProfile))
        case .avif: .avif(AVIFEncoder(quality: quality, includeICCProfile: keepsProfile))
        case .jxl: .jxl(JXLEncoder(quality: quality, includeICCProfile: keepsProfile))
        case .gif: .gif(GIFEncoder())
        case .heic: .heic(HEIFEncoder(quality: quality, includeICCProfile: keepsProfile))
        case .bmp: .bmp(BMPEncoder())
        case .tiff: .tiff(TIFFEncoder(includeICCProfile: keepsProfile))
        // SVG results are passed through before any encoder is chosen; a raster source
        // asking for one is refused then (422).
        case .svg: .png(PNGEncoder(includeICCProfile: keepsProfile))
        }
    }

    /// A year: the longest `max-age` the service sends.
    static let maxFreshness: TimeInterval = 365 * 86_400

    /// The source's bytes and their validators. A remote source goes through the
    /// loader, with the client's conditions (for an origin the loader has nothing
    /// stored from: ``ImageLoadingError/Reason/notModified(headers:)`` when it answers
    /// 304) and, when passed on, its cookies (neither from nor into the caches).
    private func fetch(_ allowed: SourcePolicy.Allowed, conditions: Conditions, cookie: String?) async throws
        -> SourceData
    {
        switch allowed {
        case .remote(let url):
            if let scheme = url.scheme?.lowercased(), let flag = ProcessingURL.objectStorageSchemes[scheme],
                !configuration.loader.objectStorage.schemes.contains(scheme)
            {
                throw ServiceError(status: 404, "\(scheme):// sources are not enabled (imageloader serve \(flag))")
            }
            var options = LoadOptions()
            options.clientValidators = conditions.fields
            if let cookie {
                options.headers = [HeaderField("Cookie", cookie)]
                options.bypassesCache = true
            }
            let data = try await loader.data(for: url, options: options)
            let tier =
                switch data.source {
                case .disk: "disk"
                case .memory: "memory"
                case .networkNotModified: "revalidated"
                default: "network"
                }
            return SourceData(
                bytes: data.bytes, contentType: data.value("Content-Type"), entityTag: data.value("ETag"),
                lastModified: data.value("Last-Modified"), freshFor: data.freshFor, tier: tier,
                cacheControl: data.value("Cache-Control"), expires: data.value("Expires"))
        case .file(let path):
            let maxBytes = configuration.maxSourceBytes
            let read = try await fileReads.run {
                () -> Result<(FileStatus, [UInt8]), ServiceError> in
                guard let status = FileSystem.status(path) else {
                    return .failure(ServiceError.missingSource())
                }
                guard status.size <= maxBytes else {
                    return .failure(ServiceError.sourceTooLarge(bytes: maxBytes))
                }
                guard let bytes = FileSystem.readRegularFile(path, maxBytes: maxBytes) else {
                    return .failure(ServiceError.missingSource())
                }
                return .success((status, bytes))
            }
            let (status, bytes) = try read.get()
            return SourceData(
                bytes: bytes, contentType: nil, entityTag: SourceData.fileTag(path: path, status),
                lastModified: HTTPDate.format(Date(timeIntervalSince1970: TimeInterval(status.modifiedSeconds))),
                freshFor: nil, tier: "local")
        }
    }

    // MARK: Info and uploads

    /// `POST /info`: the body's `ImageDescription`, as JSON, never cached downstream.
    func info(of body: [UInt8], contentType: String?) async -> Reply {
        do {
            let json = try await describe(
                body, ProcessingOptions(), limits: effectiveLimits(ProcessingOptions.SecurityLimits()),
                contentType: contentType)
            return .json(json)
        } catch {
            return .failure(ServiceError.from(error))
        }
    }

    /// `GET /info/{signature}/{options}/{source}`: the source's `ImageDescription` as
    /// JSON, signed as image URLs are, cacheable downstream as long as the source is fresh.
    func info(path: String, departure: @Sendable () async -> ClientDeparture? = { nil }) async -> Reply {
        do {
            let prefix = configuration.pathPrefix + "/info"
            guard path.hasPrefix(prefix) else { throw ServiceError(status: 404, "not found") }
            var rules = configuration.urlRules
            rules.forInfo = true
            let url = try ProcessingURL.parse(
                String(path.dropFirst(prefix.count)), signature: configuration.signature,
                allowsUnsigned: configuration.allowsUnsigned, rules: rules)
            let allowed = try configuration.sources.check(url.source)
            let limits = effectiveLimits(url.options.security)
            let (json, freshFor) = try await withTimeout(leavingWith: await departure()) {
                try await self.admitted(PriorityHandle(.normal)) {
                    let source = try await self.metrics.timingFetch {
                        try await self.fetch(allowed, conditions: Conditions(), cookie: nil)
                    }
                    guard source.bytes.count <= limits.maxSourceBytes else {
                        throw ServiceError.sourceTooLarge(bytes: limits.maxSourceBytes)
                    }
                    let json = try await self.describe(
                        source.bytes, url.options, limits: limits, contentType: source.contentType)
                    return (json, source.freshFor ?? TimeInterval(self.configuration.ttl))
                }
            }
            return .json(json, maxAge: Int(min(freshFor, ImageService.maxFreshness)))
        } catch {
            var failure = ServiceError.from(error)
            if failure.isMissingSource { failure.maxAge = configuration.notFoundTTL }
            return .failure(failure)
        }
    }

    /// The `ImageDescription` of `bytes` as JSON (keys sorted), made on the loader's workers.
    private func describe(
        _ bytes: [UInt8], _ options: ProcessingOptions, limits: EffectiveLimits, contentType: String?
    ) async throws -> [UInt8] {
        var description = DescriptionOptions()
        description.limits = loader.configuration.decodingOptions.limits
        description.limits.maxPixelsPerFrame = min(description.limits.maxPixelsPerFrame, limits.maxSourcePixels)
        description.includesLocation = configuration.infoIncludesLocation
        if let size = options.blurHash { description.blurHashComponents = (size.x, size.y) }
        let settings = description
        let described = try await loader.processing(bytes, declaredContentType: contentType) { decoder in
            try decoder.describe(bytes, options: settings)
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(described)) + [10]
    }

    /// `POST /upload/{options}`: the thumbnail of the body, never cached downstream; its
    /// format chosen as a URL's (``ResponseRules/outputFormat(requested:features:source:animated:expectsTransparency:preferred:)``).
    func upload(optionsPath: Substring, body: [UInt8], headers: HTTPFields, contentType: String?) async -> Reply {
        do {
            let features = ClientFeatures(headers, configuration: configuration)
            let options = try ProcessingURL.parseOptions(
                optionsPath, rules: configuration.urlRules, starting: features.startingOptions)
            let limits = effectiveLimits(options.security)
            let preferred = configuration.preferredFormats
            let made = try await metrics.timingProcessing {
                try await self.process(body, options, limits: limits, contentType: contentType) { info, animated in
                    ResponseRules.outputFormat(
                        requested: options.format, features: features, source: info.format, animated: animated,
                        expectsTransparency: options.expectsTransparency(sourceHasAlpha: info.hasAlpha),
                        preferred: preferred)
                }
            }
            return .upload(made.bytes, contentType: made.format.contentType)
        } catch {
            return .failure(ServiceError.from(error))
        }
    }
}

extension ImageInfo {
    /// The width and height as shown, after the orientation.
    var uprightSize: (width: Int, height: Int) {
        orientation.swapsDimensions ? (height, width) : (width, height)
    }
}

/// The limits one request is held to: the service's, lowered by the URL's security options.
struct EffectiveLimits: Sendable {
    let maxSourceBytes: Int
    let maxSourcePixels: Int
    var maxResultSide: Int
    let maxAnimationFrames: Int
    /// The largest frame of an animation; `nil`: the frames kept together are held to
    /// ``maxSourcePixels``, as imgproxy's.
    let maxAnimationFramePixels: Int?

    /// Throws 422 when a source's header says more pixels than allowed.
    func checkPixels(of info: ImageInfo) throws {
        guard Checked.multiply(info.width, info.height).map({ $0 <= maxSourcePixels }) ?? false else {
            throw ServiceError.sourceTooLarge(pixels: maxSourcePixels)
        }
    }

    /// Throws 422 when an animation kept with `frames` frames has more pixels than
    /// allowed, as imgproxy's `CheckDimensions`: each frame against
    /// ``maxAnimationFramePixels`` when it is set, else all of them together against
    /// ``maxSourcePixels``.
    func checkAnimation(of info: ImageInfo, frames: Int) throws {
        let framePixels = Checked.multiply(info.width, info.height)
        if let limit = maxAnimationFramePixels {
            guard framePixels.map({ $0 <= limit }) ?? false else {
                throw ServiceError(status: 422, "animation frames larger than \(limit) pixels")
            }
        } else {
            guard framePixels.flatMap({ Checked.multiply($0, frames) }).map({ $0 <= maxSourcePixels }) ?? false else {
                throw ServiceError.sourceTooLarge(pixels: maxSourcePixels)
            }
        }
    }
}

/// What identifies a shared run: the result, and the request's conditions (a 304 is
/// decided inside the run, before any processing).
struct ProcessingKey: Hashable, Sendable {
    let result: ResultKey
    let conditions: Conditions
}

enum ProcessingOutcome: Sendable {
    case notModified(ResponseMeta)
    case processed(ProcessedResult)
}

/// A source as fetched.
struct SourceData: Sendable {
    let bytes: [UInt8]
    let contentType: String?
    /// The source's `ETag` (for a local file: a digest of its path, size and time, as imgproxy makes it).
    let entityTag: String?
    let lastModified: String?
    let freshFor: TimeInterval?
    /// Where it came from, for the hit metrics.
    let tier: String
    /// The origin's `Cache-Control` and `Expires`, for ``ImageService/Configuration/cacheControlPassthrough``.
    var cacheControl: String? = nil
    var expires: String? = nil

    /// A local file's entity tag: the SHA-256 of its path, size and modification time
    /// in nanoseconds, in quoted base64url.
    static func fileTag(path: String, _ status: FileStatus) -> String {
        let nanoseconds = Checked.saturatingAdd(
            Checked.saturatingMultiply(status.modifiedSeconds, 1_000_000_000), status.modifiedNanoseconds)
        let digest = SHA256.hash(data: Array("\(path)__\(status.size)__\(nanoseconds)".utf8))
        return "\"" + Base64URL.encode(Array(digest)) + "\""
    }
}

extension SourcePolicy.Allowed {
    /// The source as text, for keys and tags.
    var text: String {
        switch self {
        case .remote(let url): url.absoluteString
        case .file(let path): "local://" + path
        }
    }
}
