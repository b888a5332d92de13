import Foundation
import ImageLoader
import ImageLoaderSupport
import Logging
import Metrics
import ObjectStorage
import RasterImage

extension ImageService {
    /// The service's settings; the defaults are safe on the open internet.
    public struct Configuration: Sendable {
        /// Key and salt pairs URLs are signed with; `nil` (and no `allowsUnsigned`): every URL is refused.
        public var signature: URLSignature?
        /// Serve `insecure` and `_` in place of a signature.
        public var allowsUnsigned = false
        /// Presets, only-presets mode and whether URLs may set security options.
        public var urlRules = URLRules()
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
        /// Whether each request is traced through swift-distributed-tracing's global tracer
        /// (bootstrap `InstrumentationSystem` first, with swift-otel's or another): a server
        /// span per request, a child of the caller's (W3C `traceparent` and whatever the
        /// tracer's propagators read), with spans for the result bucket, the source's fetch
        /// (its cache outcome), the decode, the processing and the encode. Work shared by
        /// several identical requests is traced under the first. Off by default: the
        /// spans' attributes cost time even with no tracer.
        ///
        /// ```swift
        /// InstrumentationSystem.bootstrap(tracer)
        /// configuration.tracesRequests = true
        /// ```
        public var tracesRequests = false
        /// Seconds a source that states no freshness (a local file, a response without
        /// `max-age` or `Expires`, an object in a bucket) is taken as fresh: how long the
        /// result cache keeps what is made from it, and the disk cache its bytes, without
        /// asking the source again. An hour by default; revalidating then costs a 304.
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
        /// Requests waiting to start before the service answers 429 (with `Retry-After`);
        /// `nil`, the default: no limit, as imgproxy's `IMGPROXY_REQUESTS_QUEUE_SIZE=0`.
        /// Waiting requests are still bounded by the connections the server accepts and
        /// by ``timeout``, after which each is a 503; a waiting request holds its
        /// connection and its head, not its source.
        public var queue: Int?
        /// Bytes of processed images kept in memory; 0 keeps none.
        public var resultCacheBytes = 128 << 20
        /// A bucket (and key prefix) that processed results are kept in and looked up
        /// from, shared by every instance that names it: `s3://thumbnails/v1`,
        /// `gs://...`, `abs://...`. Its store must be configured in
        /// ``objectStorage``. A stored result is used while the result cache would
        /// keep it, with the header fields it was first sent with; it is written after the
        /// answer, without delaying it; a store that fails costs only the processing.
        /// `nil` (the default): results are kept in this process only.
        ///
        /// ```swift
        /// configuration.objectStorage.s3 = S3Configuration(region: "eu-west-1")
        /// configuration.resultStorage = URL(string: "s3://thumbnails/v1")
        /// ```
        public var resultStorage: URL?
        /// The object stores `s3://`, `gs://` and `abs://` sources (and ``resultStorage``)
        /// are read from; none by default. Sources are read through the loader, as
        /// `https://` ones are: its disk cache, revalidation and shared downloads.
        ///
        /// ```swift
        /// configuration.objectStorage.gcs = GCSConfiguration(serviceAccountKey: keyJSON)
        /// ```
        public var objectStorage = ObjectStorageConfiguration()
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
        public var formatQuality: [ResultFormat: Int] = [.webp: 79, .avif: 63, .jxl: 77]
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
        public var preferredFormats: [ResultFormat] = [.jpeg, .png, .gif]
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
        /// Sources whose responses state no freshness (most objects in buckets, many
        /// origins) are taken as fresh for ``sourceTTL`` unless `defaultCacheControlMaxAge`
        /// says otherwise, so a burst of requests for one source reads it once; and a
        /// stored source answers for a day past its freshness while its origin cannot be
        /// reached (`staleWhenUnreachable`), unless its response forbids it.
        public var loader: ImageLoader.Configuration = {
            var loader = ImageLoader.Configuration()
            loader.staleWhenUnreachable = 86_400
            return loader
        }()
        /// Where the metrics go; `nil`: the process's `MetricsSystem`.
        public var metricsFactory: (any MetricsFactory)?
        /// The access log (one line per request) and the service's warnings.
        public var logger = Logger(label: "ImageService")

        /// The defaults: signed URLs only, public sources only, the limits above.
        public init() {}
        /// Requests fetching, holding a source for a worker, or being processed.
        var inFlightLimit: Int { Checked.saturatingAdd(max(1, workers), max(0, fetchesAhead ?? workers)) }
    }
}
