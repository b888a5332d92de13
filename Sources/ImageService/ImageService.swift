import CoreMetrics
import Foundation
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
        /// Seconds of `max-age` when the source states no freshness (local files, or a
        /// response without `max-age` or `Expires`).
        public var ttl = 3600
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
        /// no format (before WebP). Off by default: an AV1 encode costs several times a
        /// WebP one (Benchmarks/README.md has the figures).
        public var autoAVIF = false
        /// Answer WebP to requests whose `Accept` lists `image/webp` and whose URL names no
        /// format. On by default (imgproxy's `IMGPROXY_AUTO_WEBP` is off by default: every
        /// browser of the last years takes WebP, and it is smaller than JPEG at the same quality).
        public var autoWebP = true
        /// Answer JPEG XL to requests whose `Accept` lists `image/jxl` and whose URL names
        /// no format (before AVIF and WebP). Off by default, as few browsers ask for it.
        public var autoJXL = false
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

    /// The settings the service was made with.
    public let configuration: Configuration
    let loader: ImageLoader
    private let results: ResultCache?
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
        loader = try ImageLoader(configuration: loaderConfiguration)
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
    /// conditional header fields.
    /// `departure` is asked for only when the answer is not in the result cache.
    func process(
        path: String, accept: String?, conditions: Conditions,
        departure: @Sendable () async -> ClientDeparture? = { nil }
    ) async -> Reply {
        let requestKey = RequestKey(path: path, accept: accept, configuration: configuration)
        if let hit = cachedReply(requestKey, conditions: conditions) { return hit }
        do {
            guard path.hasPrefix(configuration.pathPrefix) else { throw ServiceError(status: 404, "not found") }
            let url = try ProcessingURL.parse(
                String(path.dropFirst(configuration.pathPrefix.count)), signature: configuration.signature,
                allowsUnsigned: configuration.allowsUnsigned, rules: configuration.urlRules)
            let allowed = try configuration.sources.check(url.source)
            let key = ResultKey(
                source: allowed.text, options: url.options,
                automatic: url.format == nil ? requestKey.automatic : nil)
            let outcome = try await withTimeout(leavingWith: await departure()) {
                try await self.shared.value(
                    for: ProcessingKey(result: key, conditions: conditions), product: nil,
                    priority: PriorityHandle(.normal)
                ) { run in
                    try await self.admitted(run.priority) {
                        try await self.produce(url, allowed, key, requestKey, conditions)
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
    /// threads, then process): waits in the queue, or fails at once with 503 when it is full.
    /// The queue-depth gauge is set when a request arrives, when it leaves the queue and
    /// when it ends (served, refused or cancelled), so it falls back to 0 as the queue drains.
    func admitted<T: Sendable>(_ priority: PriorityHandle, _ body: () async throws -> T) async throws -> T {
        metrics.queue(admission.waiting)
        defer { metrics.queue(admission.waiting) }
        return try await ImageService.run(in: admission, priority) {
            metrics.queue(admission.waiting)
            return try await body()
        }
    }

    /// `body` in one of the places of request bodies; 503 when they and their queue are full.
    func withBodyPlace<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        try await ImageService.run(in: bodies, PriorityHandle(.normal), body)
    }

    /// `body` once `scheduler` has a place for it; 503 when its places and queue are full.
    private static func run<T: Sendable>(
        in scheduler: WorkScheduler, _ priority: PriorityHandle, _ body: () async throws -> T
    ) async throws -> T {
        do {
            return try await scheduler.run(priority: priority, body)
        } catch is WorkScheduler.Full {
            throw ServiceError.overloaded
        }
    }

    /// `body`, or 504 once the request's timeout passes, or 499 once `departure` says the
    /// client has gone (`body` is then cancelled).
    func withTimeout<T: Sendable>(
        leavingWith departure: ClientDeparture? = nil, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await ImageService.withTimeout(configuration.timeout, leavingWith: departure, body)
    }

    /// `body`, or 504 once `timeout` passes, or 499 once `departure` says the client has
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

    /// Fetches the source, answers 304 when the conditions match its entity tag, or
    /// makes the image and keeps it in the result cache. The entity tag is known before
    /// the source's header is read (it names the format the URL or `Accept` asked for,
    /// else "the source's choice"), so a 304 reads nothing, and the header is read once:
    /// by the decode that makes the image, or, for a source passed through, alone.
    private func produce(
        _ url: ProcessingURL, _ allowed: SourcePolicy.Allowed, _ key: ResultKey, _ requestKey: RequestKey,
        _ conditions: Conditions
    ) async throws -> ProcessingOutcome {
        let source = try await metrics.timingFetch { try await fetch(allowed) }
        metrics.sourceFetched(from: source.tier)
        let limits = effectiveLimits(url.options.security)
        guard source.bytes.count <= limits.maxSourceBytes else {
            throw ServiceError.sourceTooLarge(bytes: limits.maxSourceBytes)
        }
        let sourceFormat = ImageFormat.sniff(source.bytes.prefix(ImageFormat.sniffLength))
        let passesThrough =
            url.options.raw
            || (sourceFormat.map(url.options.skipProcessing.contains) ?? false
                && (url.format == nil || url.format?.imageFormat == sourceFormat))
        // The format the URL names, else the one `Accept` chose (then the answer varies by
        // it), else PNG or JPEG by the source's alpha, once the decode has read its header.
        let named = passesThrough ? nil : url.format ?? key.automatic
        let now = Date()
        var freshFor = min(source.freshFor ?? TimeInterval(configuration.ttl), ImageService.maxFreshness)
        // A URL that expires is not kept, or sent as fresh, past its time.
        if let expires = url.options.expires, expires > 0 {
            freshFor = max(0, min(freshFor, TimeInterval(expires) - now.timeIntervalSince1970))
        }
        let entityTag = ResponseRules.entityTag(
            source: key.source, validator: source.validator, options: url.options, format: named)
        func meta(contentType: String, format: ProcessingOptions.Format?) -> ResponseMeta {
            ResponseMeta(
                contentType: contentType, entityTag: entityTag, lastModified: source.lastModified,
                variesByAccept: !passesThrough && url.format == nil, freshUntil: now.addingTimeInterval(freshFor),
                contentDisposition: ResponseRules.contentDisposition(
                    filename: url.options.filename, source: allowed.text, format: format,
                    attachment: url.options.returnAttachment))
        }
        if conditions.matches(entityTag: entityTag, lastModified: source.lastModified) {
            // Nothing is read for a 304: it carries no body, so no Content-Type, and its
            // Content-Disposition is left out where only decoding would tell the format
            // (caches keep the stored one).
            var notModified = meta(contentType: named?.contentType ?? "", format: named)
            if named == nil && !passesThrough { notModified.contentDisposition = nil }
            return .notModified(notModified)
        }
        let result: ProcessedResult
        if passesThrough {
            let info = try header(of: source.bytes, limits: limits)
            result = ProcessedResult(bytes: source.bytes, meta: meta(contentType: info.contentType, format: nil))
        } else {
            let made = try await metrics.timingProcessing {
                try await process(
                    source.bytes, url.options, limits: limits, contentType: source.contentType
                ) { info in
                    // `Accept` was read already (`named`): the rule's fallback by alpha is what is left.
                    ResponseRules.format(requested: named, accept: nil, hasAlpha: info.hasAlpha).format
                }
            }
            result = ProcessedResult(
                bytes: made.bytes, meta: meta(contentType: made.format.contentType, format: made.format))
        }
        if let results, freshFor > 0 { results.insert(result, for: requestKey) }
        return .processed(result)
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
            maxAnimationFramePixels: min(
                configuration.maxAnimationFramePixels ?? configuration.maxSourcePixels,
                security.maxAnimationFramePixels ?? .max))
    }

    /// The encoded result of `bytes` with `options`, in the format `format` picks from the
    /// source's header: in one pass when the options ask for a resize with at most a plain
    /// compass crop, else step by step (``ImageProcessor``). The header is read once, by
    /// the decode: what depends on it (the pixel limit, the format, the box, animation)
    /// is decided there, before any pixel is decoded.
    func process(
        _ bytes: [UInt8], _ options: ProcessingOptions, limits: EffectiveLimits, contentType: String?,
        format: @escaping @Sendable (ImageInfo) -> ProcessingOptions.Format
    ) async throws -> (bytes: [UInt8], format: ProcessingOptions.Format) {
        // EXIF kept as the options say: all of it, or only the copyright (the default, as imgproxy's).
        let kept: PhotoMetadata.Kept? = !options.stripMetadata ? .all : options.keepCopyright ? .copyright : nil
        let exif = kept.flatMap {
            PhotoMetadata.outputBlock(from: bytes, keeping: $0, upright: options.autoRotate ?? true)
        }
        var decodingLimits = loader.configuration.decodingOptions.limits
        decodingLimits.maxPixelsPerFrame = min(decodingLimits.maxPixelsPerFrame, limits.maxSourcePixels)
        let plan = ProcessingChoice.Planner(
            options: options, limits: limits, decodingLimits: decodingLimits, exif: exif, format: format,
            output: { [configuration] format, quality, keepsProfile in
                ImageService.outputFormat(format, quality: quality, keepsProfile: keepsProfile, configuration)
            }, shrinkOnLoad: configuration.shrinkOnLoad, watermark: watermark)
        let outcome: Result<([UInt8], ProcessingOptions.Format), ServiceError>
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
    static func outputFormat(
        _ format: ProcessingOptions.Format, quality: Int?, keepsProfile: Bool, _ configuration: Configuration
    ) -> OutputFormat {
        let quality = quality ?? configuration.formatQuality[format] ?? configuration.quality
        return switch format {
        case .jpeg: .jpeg(JPEGEncoder(quality: quality, includeICCProfile: keepsProfile))
        case .png:
            .png(PNGEncoder(compressionLevel: configuration.pngCompressionLevel, includeICCProfile: keepsProfile))
        case .webp: .webp(WebPEncoder(quality: quality, includeICCProfile: keepsProfile))
        case .avif: .avif(AVIFEncoder(quality: quality, includeICCProfile: keepsProfile))
        case .jxl: .jxl(JXLEncoder(quality: quality, includeICCProfile: keepsProfile))
        case .gif: .gif(GIFEncoder())
        }
    }

    /// A year: the longest `max-age` the service sends.
    static let maxFreshness: TimeInterval = 365 * 86_400

    /// The source's bytes and what identifies their version.
    private func fetch(_ allowed: SourcePolicy.Allowed) async throws -> SourceData {
        switch allowed {
        case .remote(let url):
            let data = try await loader.data(for: url)
            let validator =
                data.value("ETag") ?? data.value("Last-Modified").map { "date:" + $0 }
                ?? "sha256:" + ImageLoader.digest(of: data.bytes)
            let tier =
                switch data.source {
                case .disk: "disk"
                case .memory: "memory"
                case .networkNotModified: "revalidated"
                default: "network"
                }
            return SourceData(
                bytes: data.bytes, contentType: data.value("Content-Type"), validator: validator,
                lastModified: data.value("Last-Modified"), freshFor: data.freshFor, tier: tier)
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
                bytes: bytes, contentType: nil,
                validator: "file:" + status.version,
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
                    let source = try await self.metrics.timingFetch { try await self.fetch(allowed) }
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

    /// `POST /upload/{options}`: the thumbnail of the body, never cached downstream.
    func upload(optionsPath: Substring, body: [UInt8], accept: String?, contentType: String?) async -> Reply {
        do {
            let options = try ProcessingURL.parseOptions(optionsPath, rules: configuration.urlRules)
            let limits = effectiveLimits(options.security)
            let (autoAVIF, autoJXL, autoWebP) = (configuration.autoAVIF, configuration.autoJXL, configuration.autoWebP)
            let (bytes, format) = try await metrics.timingProcessing {
                try await self.process(body, options, limits: limits, contentType: contentType) { info in
                    ResponseRules.format(
                        requested: options.format, accept: accept, hasAlpha: info.hasAlpha, autoAVIF: autoAVIF,
                        autoJXL: autoJXL, autoWebP: autoWebP
                    ).format
                }
            }
            return .upload(bytes, contentType: format.contentType)
        } catch {
            return .failure(ServiceError.from(error))
        }
    }
}

/// The limits one request is held to: the service's, lowered by the URL's security options.
struct EffectiveLimits: Sendable {
    let maxSourceBytes: Int
    let maxSourcePixels: Int
    var maxResultSide: Int
    let maxAnimationFrames: Int
    let maxAnimationFramePixels: Int

    /// Throws 413 when a source's header says more pixels than allowed.
    func checkPixels(of info: ImageInfo) throws {
        guard Checked.multiply(info.width, info.height).map({ $0 <= maxSourcePixels }) ?? false else {
            throw ServiceError.sourceTooLarge(pixels: maxSourcePixels)
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

/// The request's conditional header fields.
struct Conditions: Hashable, Sendable {
    var ifNoneMatch: String?
    var ifModifiedSince: String?

    /// Whether a response with `meta` is "not modified" for these conditions
    /// (RFC 9110 §13.2.2: `If-None-Match` first; `If-Modified-Since` only without it).
    func matches(_ meta: ResponseMeta) -> Bool {
        matches(entityTag: meta.entityTag, lastModified: meta.lastModified)
    }

    /// Whether a response with this entity tag and `Last-Modified` is "not modified".
    func matches(entityTag: String, lastModified: String?) -> Bool {
        if let ifNoneMatch { return ResponseRules.matches(ifNoneMatch: ifNoneMatch, tag: entityTag) }
        guard let ifModifiedSince, let since = HTTPDate.parse(ifModifiedSince),
            let modified = lastModified.flatMap(HTTPDate.parse)
        else { return false }
        return modified <= since
    }
}

/// A source as fetched.
struct SourceData: Sendable {
    let bytes: [UInt8]
    let contentType: String?
    /// What changes when the source changes: its ETag, its Last-Modified, a digest.
    let validator: String
    let lastModified: String?
    let freshFor: TimeInterval?
    /// Where it came from, for the hit metrics.
    let tier: String
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
