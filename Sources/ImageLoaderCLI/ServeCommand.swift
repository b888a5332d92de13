import ArgumentParser
import CoreMetrics
import Foundation
import Hummingbird
import ImageLoader
import ImageLoaderSupport
import ImageService
import Logging
import Prometheus
import RasterImage
import ServiceLifecycle
import UnixSignals

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve thumbnails at imgproxy-format URLs (signed unless --allow-unsigned).",
        usage: """
            imageloader serve [--host <host>] [--port <port>] [--key <key> --salt <salt>]... [--allow-unsigned] \
            [<options>]
            """,
        discussion: """
            Every option is also a variable: --allow-unsigned is IMAGELOADER_ALLOW_UNSIGNED=true, --cache-dir \
            IMAGELOADER_CACHE_DIR, a repeatable option a comma-separated list; where imgproxy has a setting, its \
            IMGPROXY_* variable is read too (the option, then IMAGELOADER_*, then IMGPROXY_*). Keys and salts are \
            hexadecimal: --key K --salt S (repeat both for rotation), or IMGPROXY_KEY and IMGPROXY_SALT \
            (IMGPROXY_KEYS and IMGPROXY_SALTS: comma-separated lists). The address is IMGPROXY_BIND (host:port, \
            :port), else PORT, else :8080 on every interface, as imgproxy's. SIGTERM or SIGINT: /health answers \
            503 for --drain-delay while requests are still served, then the listener closes, and the requests in \
            flight have --graceful-stop-timeout to finish; exit 0.
            """,
        version: ImageLoaderCommand.version)

    @OptionGroup(title: "Address and signed URLs (what every deployment sets)")
    var essentials: ServeEssentialOptions
    var host: String? { essentials.host }
    var port: Int? { essentials.port }
    var key: [String] { essentials.key }
    var salt: [String] { essentials.salt }
    var signatureSize: Int? { essentials.signatureSize }
    var allowUnsigned: Bool { essentials.allowUnsigned }

    @Option(help: "A path all routes are under, such as /images (IMGPROXY_PATH_PREFIX).")
    var pathPrefix: String?

    @Option(help: "Serve local:///path sources from under this folder (IMGPROXY_LOCAL_FILESYSTEM_ROOT).")
    var localRoot: String?

    @Option(
        help: """
            Only sources starting with this text, * matching any run without a slash \
            (repeatable; IMGPROXY_ALLOWED_SOURCES, comma-separated).
            """)
    var allowSource: [String] = []

    @Flag(help: "Allow sources on loopback, private and link-local networks (off: refused, against SSRF).")
    var allowPrivateNetworks = false

    @Option(help: "An address allowed although it is private or loopback: one internal origin (repeatable).")
    var allowAddress: [String] = []

    @Option(help: "The largest source, in bytes (IMGPROXY_MAX_SRC_FILE_SIZE) [default: 67108864].")
    var maxSrcBytes: Int?

    @Option(help: "The largest source, in pixels (IMGPROXY_MAX_SRC_RESOLUTION, in megapixels) [default: 50000000].")
    var maxSrcPixels: Int?

    @Option(
        help:
            "The longest side of a result; larger results are scaled down (IMGPROXY_MAX_RESULT_DIMENSION) [default: 8192]."
    )
    var maxResultSize: Int?

    @Option(
        help: """
            Frames of an animated GIF or WebP kept in GIF and WebP results; 1 makes stills \
            (IMGPROXY_MAX_ANIMATION_FRAMES) [default: 1].
            """)
    var maxAnimationFrames: Int?

    @Option(
        help: """
            The largest animation frame kept animated, in pixels \
            (IMGPROXY_MAX_ANIMATION_FRAME_RESOLUTION, in megapixels) [default: --max-src-pixels].
            """)
    var maxAnimationFramePixels: Int?

    @Option(
        help: "Seconds a request may take, queueing, fetching and processing included (IMGPROXY_TIMEOUT) [default: 10]."
    )
    var timeout: Double?

    @Option(help: "Seconds of max-age results are sent with; 0: no-cache (IMGPROXY_TTL) [default: 31536000].")
    var ttl: Int?

    @Option(
        help: """
            Seconds a client may take to send a request's head, or the next request after an answer \
            (IMGPROXY_KEEP_ALIVE_TIMEOUT) [default: 60].
            """)
    var idleTimeout: Double?

    @Option(
        help: """
            Client connections open at once; more are closed when accepted (IMGPROXY_MAX_CLIENTS; default: the \
            file-descriptor limit, raised to its hard limit at start, less \(ServeCommand.reservedDescriptors), up to \
            \(ServeCommand.defaultMaxConnections)).
            """)
    var maxConnections: Int?

    @Option(
        help: """
            Images decoded, resized and encoded at once (IMGPROXY_WORKERS) [default: the cores, fewer when the \
            control group's memory limit cannot hold that many of the largest sources].
            """)
    var workers: Int?

    @Option(help: "Requests that fetch their source while the workers are busy (default: as many as workers).")
    var fetchesAhead: Int?

    @Option(help: "How far below the event loops the workers run, as a nice increment (0 to 19).")
    var workerNiceness = 10

    @Option(
        help: """
            Requests waiting to start, past which 429 with Retry-After; 0: none wait \
            (IMGPROXY_REQUESTS_QUEUE_SIZE, where 0 is no limit) [default: no limit but --max-connections and \
            --timeout, as imgproxy's].
            """)
    var queue: Int?

    @Option(
        name: .customLong("result-cache-mb"),
        help: """
            MiB of processed images kept in memory; 0 keeps none [default: 128, or an eighth of the control \
            group's memory limit when that is less].
            """)
    var resultCacheMB: Int?

    @Option(
        help:
            "The quality of lossy results when neither the URL nor --format-quality names one (IMGPROXY_QUALITY) [default: 80]."
    )
    var quality: Int?

    @Option(
        help: """
            The quality of one format's results, FORMAT=QUALITY, such as webp=70 (repeatable; \
            IMGPROXY_FORMAT_QUALITY, comma-separated) [default: webp=79, avif=63, jxl=77].
            """)
    var formatQuality: [String] = []

    @Flag(
        inversion: .prefixedNo,
        help:
            "Answer WebP when the URL names no format and Accept lists image/webp (IMGPROXY_AUTO_WEBP) [default: off]."
    )
    var autoWebp: Bool?

    @Flag(
        inversion: .prefixedNo,
        help: "Answer AVIF when the URL names no format and Accept lists image/avif, before WebP (IMGPROXY_AUTO_AVIF).")
    var autoAvif: Bool?

    @Flag(
        inversion: .prefixedNo,
        help: """
            Answer JPEG XL when the URL names no format and Accept lists image/jxl, before AVIF and WebP \
            (IMGPROXY_AUTO_JXL).
            """)
    var autoJxl: Bool?

    @Option(help: "The compression level of PNG results, 0 (stored) to 9.")
    var pngCompression = 6

    @Option(
        help: """
            A preset, NAME=OPTIONS with options as in a URL (rs:fill:300:300/q:80); the preset named default \
            applies to every URL (repeatable; IMGPROXY_PRESETS, comma-separated).
            """)
    var preset: [String] = []

    @Flag(help: "URLs name presets only: their option segments are preset names (IMGPROXY_ONLY_PRESETS).")
    var onlyPresets = false

    @Flag(
        help: """
            Serve the security options msr, msfs, maf, mafr and mrd in URLs; each only lowers the service's \
            limit (IMGPROXY_ALLOW_SECURITY_OPTIONS).
            """)
    var allowSecurityOptions = false

    @Option(help: "The image the watermark option draws (IMGPROXY_WATERMARK_PATH).")
    var watermarkPath: String?

    @Option(help: "The opacity every watermark is multiplied by, 0 to 1 (IMGPROXY_WATERMARK_OPACITY) [default: 1].")
    var watermarkOpacity: Double?

    @Flag(help: "Serve POST /upload/{options}.")
    var allowUploads = false

    @Flag(help: "Include the GPS position EXIF states in /info answers (off: left out, as personal data).")
    var infoExifGps = false

    @Option(
        help: """
            Serve GET /metrics on this address (host:port) instead of the main one (IMGPROXY_PROMETHEUS_BIND).
            """)
    var metricsBind: String?

    @Option(help: "The disk cache's folder for sources (default: $XDG_CACHE_HOME/imageloader).")
    var cacheDir: String?

    @Option(name: .customLong("disk-cache-mb"), help: "MiB of sources kept on disk; 0 keeps none.")
    var diskCacheMB = 1024

    @Option(
        help: """
            Seconds a source whose response states no freshness (no max-age, no Expires: most objects in \
            buckets) is used without asking its origin again [default: 3600].
            """)
    var sourceTtl: Int?

    @Option(
        help: """
            Seconds past its freshness a stored source still answers while its origin cannot be reached (no \
            connection, a timeout, a 502-504), unless its response says must-revalidate or no-cache; 0: only \
            within its stale-if-error [default: 86400].
            """)
    var staleWhenUnreachable: Int?

    @Option(
        help: "The log level: trace, debug, info (one line per request), notice, warning, error (IMGPROXY_LOG_LEVEL).")
    var logLevel: String?

    @Option(
        help: """
            The log's lines: pretty (text), structured (logfmt), json (an object a line), gcp (JSON with \
            severity and message) (IMGPROXY_LOG_FORMAT) [default: pretty].
            """)
    var logFormat: String?

    @Flag(
        help: """
            Send each request's trace over OTLP: a server span (a child of the caller's traceparent) with the \
            source's fetch, the decode, the processing and the encode; OTEL_EXPORTER_OTLP_ENDPOINT, \
            OTEL_EXPORTER_OTLP_PROTOCOL (grpc or http/protobuf), OTEL_SERVICE_NAME configure it \
            (IMGPROXY_OPEN_TELEMETRY_ENABLE).
            """)
    var openTelemetry = false

    @Flag(
        help: "Send the metrics over OTLP too, beside /metrics (IMGPROXY_OPEN_TELEMETRY_ENABLE_METRICS).")
    var openTelemetryMetrics = false

    @Option(help: "A prefix of every metric's name in /metrics, NAMESPACE_name (IMGPROXY_PROMETHEUS_NAMESPACE).")
    var prometheusNamespace: String?

    @Option(
        help: """
            Seconds /health answers 503 after SIGTERM while requests are still served, before the listener \
            closes, so that load balancers stop sending requests first [default: 0].
            """)
    var drainDelay: Double?

    @Option(
        help: """
            Seconds the requests in flight have to finish once the listener has closed; past it they are \
            cancelled (IMGPROXY_GRACEFUL_STOP_TIMEOUT) [default: twice --timeout].
            """)
    var gracefulStopTimeout: Double?

    @Option(
        help: """
            Seconds between returns of freed memory to the system, done when no image is being processed; 0: \
            never (IMGPROXY_FREE_MEMORY_INTERVAL) [default: 10].
            """)
    var freeMemoryInterval: Double?

    /// Prints the settings' table (``ServeEnvironment/markdownTable(_:)``) and exits: what
    /// scripts/settings-table.sh puts in ServiceReference.md.
    @Flag(help: .hidden)
    var settingsTable = false

    @OptionGroup(title: "imgproxy's formats, header fields, clients and sources")
    var compatibility: ServeCompatibilityOptions

    @OptionGroup(title: "Object storage: s3://, gs:// and abs:// sources, results in a bucket")
    var storage: ServeStorageOptions

    func validate() throws {
        if settingsTable { return }
        guard key.count == salt.count else { throw ValidationError("give as many --salt as --key") }
        // The settings' own checks, here too: a bad value is a usage mistake of `serve`.
        let environment = ImgproxyEnvironment(ProcessInfo.processInfo.environment)
        _ = try settings(environment)
        var configuration = ImageService.Configuration()
        _ = try urlRules(settings(environment), configuration: &configuration, environment: environment)
        _ = try compatibility.healthPath(environment)
        try storage.apply(to: &configuration, environment: environment)
    }

    func run() async throws {
        if settingsTable {
            return print(
                ServeEnvironment.markdownTable(ServeEnvironment.serve), terminator: "")
        }
        let environment = ImgproxyEnvironment(ProcessInfo.processInfo.environment)
        let settings = try settings(environment)
        let level = Logger.Level(rawValue: settings.logLevel) ?? .info
        let format = settings.logFormat
        LoggingSystem.bootstrap { label in format.handler(label: label, level: level) }
        // Before any thread that allocates is started (the exporters' among them): glibc
        // fixes its arena cap once it has made eight arenas.
        let keepsBuffers = MemoryAllocator.keepImageBuffers()
        let namespace = prometheusNamespace ?? environment.text("IMGPROXY_PROMETHEUS_NAMESPACE")
        let observability = try ServeObservability.bootstrap(
            traces: openTelemetry || environment.flag("IMGPROXY_OPEN_TELEMETRY_ENABLE") == true,
            metrics: openTelemetryMetrics || environment.flag("IMGPROXY_OPEN_TELEMETRY_ENABLE_METRICS") == true,
            namespace: namespace, environment: environment.values)
        let registry = observability.registry
        let logger = Logger(label: "imageloader.serve")
        let unsupported = Self.unsupportedVariables(ProcessInfo.processInfo.environment)
        if !unsupported.isEmpty {
            logger.warning(
                "imgproxy settings this service does not read, left without effect: \(unsupported.joined(separator: ", "))"
            )
        }
        let descriptors = System.raiseDescriptorLimit()
        let connections =
            settings.maxConnections
            ?? min(ServeCommand.defaultMaxConnections, max(16, descriptors.now - ServeCommand.reservedDescriptors))
        logger.debug(
            "connections",
            metadata: [
                "fileDescriptors": "\(descriptors.now)", "raisedFrom": "\(descriptors.before)",
                "maxConnections": "\(connections)",
            ])
        logger.debug("malloc", metadata: ["keepsImageBuffers": "\(keepsBuffers)"])

        var configuration = ImageService.Configuration()
        let pairs = try signaturePairs(environment)
        if !pairs.isEmpty {
            configuration.signature = try ServeCommand.signature(pairs, size: settings.signatureSize)
        } else if !allowUnsigned {
            throw CommandFailure(
                "no signing key: give --key and --salt (or IMGPROXY_KEY and IMGPROXY_SALT), or --allow-unsigned")
        }
        configuration.allowsUnsigned = allowUnsigned
        configuration.pathPrefix = settings.pathPrefix
        configuration.sources = SourcePolicy(allowedPrefixes: settings.allowSource, localRoot: settings.localRoot)
        var allowed = Set<IPAddress>()
        for text in allowAddress {
            guard let address = IPAddress(text) else {
                throw CommandFailure("--allow-address \(text) is not an IP address")
            }
            allowed.insert(address)
        }
        configuration.network = NetworkPolicy(allowsPrivateNetworks: allowPrivateNetworks, allowedAddresses: allowed)
        configuration.maxSourceBytes = settings.maxSrcBytes
        configuration.maxSourcePixels = settings.maxSrcPixels
        configuration.maxResultSide = settings.maxResultSize
        configuration.maxAnimationFrames = settings.maxAnimationFrames
        configuration.maxAnimationFramePixels = settings.maxAnimationFramePixels
        configuration.timeout = .milliseconds(Int(settings.timeout * 1000))
        configuration.ttl = settings.ttl
        let sizing = MemoryBudget(
            limit: MemoryAllocator.controlGroupLimit(), cores: configuration.workers,
            maxSourceBytes: settings.maxSrcBytes, maxSourcePixels: settings.maxSrcPixels)
        configuration.workers = settings.workers ?? sizing.workers
        configuration.resultCacheBytes = resultCacheMB.map { $0 << 20 } ?? sizing.resultCacheBytes
        if let limit = sizing.limit {
            logger.info(
                "memory limit",
                metadata: [
                    "limitMiB": "\(limit >> 20)", "workers": "\(configuration.workers)",
                    "resultCacheMiB": "\(configuration.resultCacheBytes >> 20)",
                ])
        }
        configuration.fetchesAhead = fetchesAhead
        configuration.workerNiceness = workerNiceness
        configuration.queue = settings.queue
        configuration.allowsUploads = allowUploads
        configuration.infoIncludesLocation = infoExifGps
        configuration.quality = settings.quality
        configuration.formatQuality = Dictionary(
            uniqueKeysWithValues: settings.formatQuality.compactMap { name, value in
                ResultFormat(name: name).map { ($0, value) }
            })
        configuration.autoWebP = settings.autoWebP
        configuration.autoAVIF = settings.autoAVIF
        configuration.autoJXL = settings.autoJXL
        configuration.pngCompressionLevel = pngCompression
        configuration.urlRules = try urlRules(settings, configuration: &configuration, environment: environment)
        configuration.healthCheckPath = try compatibility.healthPath(environment)
        if let path = settings.watermarkPath {
            do {
                configuration.watermark = try ImageDecoder().decode(
                    .file(path: path), options: DecodingOptions(frames: .first))
            } catch {
                throw CommandFailure("cannot read the watermark \(path): \(Terminal.describe(error))")
            }
        }
        configuration.watermarkOpacity = settings.watermarkOpacity
        configuration.logger = logger
        configuration.tracesRequests = observability.tracesRequests
        if let cacheDir { configuration.loader.cacheDirectory = cacheDir }
        if diskCacheMB == 0 { configuration.loader.cacheDirectory = nil }
        configuration.loader.diskCacheMaxBytes = diskCacheMB << 20
        if let sourceTtl { configuration.sourceTTL = sourceTtl }
        if let staleWhenUnreachable {
            configuration.loader.staleWhenUnreachable =
                staleWhenUnreachable > 0 ? TimeInterval(staleWhenUnreachable) : nil
        }
        configuration.loader.logger = Logger(label: "imageloader.loader")
        try storage.apply(to: &configuration, environment: environment)

        let service: ImageService
        do {
            service = try ImageService(configuration: configuration)
        } catch {
            throw CommandFailure("cannot start: \(Terminal.describe(error))")
        }
        let metricsText: @Sendable () -> String = { registry.emitToString() }
        let (host, port) = (settings.host, settings.port)
        let app = service.application(
            host: host, port: port, maxConnections: connections,
            idleTimeout: .milliseconds(Int64(settings.idleTimeout * 1000)),
            metricsText: settings.metricsBind == nil ? metricsText : nil,
            onServerRunning: { channel in
                let bound = channel.localAddress?.port ?? port
                // The one line a supervisor or a test reads to find the port (in the log's
                // format when that is for a collector: every line then parses).
                let line = "listening on http://\(host):\(bound)"
                if format == .pretty { Terminal.line(line) } else { logger.notice("\(line)") }
            },
            logger: Logger(label: "imageloader.http"))
        // The exporters first: they stop last, once the servers have sent their last spans.
        var services: [any Service] =
            observability.services + [
                service,
                Listener(server: app, address: "\(host):\(port)", option: "--port (0 picks a free one) or --host"),
            ]
        if let bind = settings.metricsBind {
            // /metrics alone, on an address scrapers reach and clients do not.
            let metricsRouter = Router()
            metricsRouter.get("metrics") { _, _ in
                Response(
                    status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                    body: .init(byteBuffer: ByteBuffer(string: metricsText())))
            }
            let metrics =
                Application(
                    router: metricsRouter, configuration: .init(address: .hostname(bind.host, port: bind.port)),
                    onServerRunning: { channel in
                        Terminal.line("metrics on http://\(bind.host):\(channel.localAddress?.port ?? bind.port)")
                    }, logger: Logger(label: "imageloader.metrics"))
            services.append(Listener(server: metrics, address: "\(bind.host):\(bind.port)", option: "--metrics-bind"))
        }
        var groupConfiguration = ServiceGroupConfiguration(
            // Shut down in reverse order: the HTTP servers first (finishing what is in
            // flight), then the service and its loader.
            services: services.map { ServiceGroupConfiguration.ServiceConfiguration(service: $0) }, logger: logger)
        groupConfiguration.maximumGracefulShutdownDuration = .milliseconds(Int(settings.gracefulStopTimeout * 1000))
        let group = ServiceGroup(configuration: groupConfiguration)
        let stop = GracefulStop(service: service, group: group, drainSeconds: settings.drainDelay, logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            tasks.addTask { await stop.run() }
            if settings.freeMemoryInterval > 0 {
                let interval = Duration.milliseconds(Int(settings.freeMemoryInterval * 1000))
                tasks.addTask { await MemoryReturn(service: service, interval: interval, logger: logger).run() }
            }
            // The group ends once stopped (or failing to start): the signal watcher and the
            // memory returns end with it.
            do {
                try await tasks.next()
            } catch {
                tasks.cancelAll()
                // Past the graceful stop's time the group cancels what is left; that is the
                // stop asked for, not a failure.
                guard stop.wasAsked else { throw error }
                logger.warning("stopped", metadata: ["error": "\(error)"])
            }
            tasks.cancelAll()
        }
    }
}

extension ServeCommand {
    /// Descriptors kept out of the default connection limit: for sources, disk-cache
    /// files, connections to origins, the listening socket and the log.
    static let reservedDescriptors = 256
    /// An idle connection holds about 15 KiB (measured: 5,000 connections that sent half a
    /// request, 71 MiB), so the default bounds idle connections to about 60 MiB.
    static let defaultMaxConnections = 4096
}
