import ArgumentParser
import CoreMetrics
import Foundation
import Hummingbird
import ImageLoader
import ImageService
import Logging
import Prometheus
import ServiceLifecycle

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve thumbnails at imgproxy-format URLs (signed unless --allow-unsigned).",
        discussion: """
            Keys and salts are hexadecimal: --key K --salt S (repeat both for rotation), or the \
            environment variables IMGPROXY_KEY and IMGPROXY_SALT (IMGPROXY_KEYS and IMGPROXY_SALTS: \
            comma-separated lists). SIGTERM or SIGINT stops accepting connections, finishes the \
            requests in flight and exits 0.
            """)

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on (0: any free port, printed at start).")
    var port = 8080

    @Option(help: "A signing key, hexadecimal (repeatable, paired with --salt).")
    var key: [String] = []

    @Option(help: "A signing salt, hexadecimal (repeatable, paired with --key).")
    var salt: [String] = []

    @Flag(help: "Serve unsigned URLs (`insecure` or `_` in place of the signature).")
    var allowUnsigned = false

    @Option(help: "Serve local:///path sources from under this folder.")
    var localRoot: String?

    @Option(help: "Only sources starting with this text (repeatable).")
    var allowSource: [String] = []

    @Flag(help: "Allow sources on loopback, private and link-local networks (off: refused, against SSRF).")
    var allowPrivateNetworks = false

    @Option(help: "An address allowed although it is private or loopback: one internal origin (repeatable).")
    var allowAddress: [String] = []

    @Option(help: "The largest source, in bytes.")
    var maxSrcBytes = 64 << 20

    @Option(help: "The largest source, in pixels.")
    var maxSrcPixels = 50_000_000

    @Option(help: "The longest side of a result, in pixels.")
    var maxResultSize = 8192

    @Option(help: "Seconds a request may take, queueing, fetching and processing included.")
    var timeout = 10.0

    @Option(help: "Seconds of max-age when the source states no freshness.")
    var ttl = 3600

    @Option(help: "Seconds a client may take to send a request's head, or the next request after an answer.")
    var idleTimeout = 60.0

    @Option(
        help: """
            Client connections open at once; more are closed when accepted (default: the file-descriptor \
            limit, raised to its hard limit at start, less \(ServeCommand.reservedDescriptors), up to \
            \(ServeCommand.defaultMaxConnections)).
            """)
    var maxConnections: Int?

    @Option(help: "Images decoded, resized and encoded at once (default: the cores).")
    var workers: Int?

    @Option(help: "Requests that fetch their source while the workers are busy (default: as many as workers).")
    var fetchesAhead: Int?

    @Option(help: "How far below the event loops the workers run, as a nice increment (0 to 19).")
    var workerNiceness = 10

    @Option(help: "Requests waiting to start before 503 (default: 4 per worker).")
    var queue: Int?

    @Option(name: .customLong("result-cache-mb"), help: "MiB of processed images kept in memory; 0 keeps none.")
    var resultCacheMB = 128

    @Option(help: "The quality of JPEG results when the URL names none.")
    var jpegQuality = 80

    @Option(help: "The quality of WebP results when the URL names none.")
    var webpQuality = 75

    @Option(help: "The quality of AVIF results when the URL names none.")
    var avifQuality = 60

    @Option(help: "The quality of JPEG XL results when the URL names none (100: lossless).")
    var jxlQuality = 75

    @Flag(help: "Answer AVIF when the URL names no format and Accept lists image/avif (before WebP).")
    var autoAvif = false

    @Flag(help: "Answer JPEG XL when the URL names no format and Accept lists image/jxl (before AVIF and WebP).")
    var autoJxl = false

    @Option(help: "The compression level of PNG results, 0 (stored) to 9.")
    var pngCompression = 6

    @Flag(help: "Serve POST /upload/{options}.")
    var allowUploads = false

    @Option(help: "The disk cache's folder for sources (default: $XDG_CACHE_HOME/imageloader).")
    var cacheDir: String?

    @Option(name: .customLong("disk-cache-mb"), help: "MiB of sources kept on disk; 0 keeps none.")
    var diskCacheMB = 1024

    @Option(help: "The log level: trace, debug, info (one line per request), notice, warning, error.")
    var logLevel = "info"

    func validate() throws {
        guard key.count == salt.count else { throw ValidationError("give as many --salt as --key") }
        guard (1...65_535).contains(port) || port == 0 else { throw ValidationError("--port must be 0 to 65535") }
        guard timeout > 0, timeout <= 3600 else { throw ValidationError("--timeout must be between 0 and 3600") }
        guard idleTimeout > 0, idleTimeout <= 3600 else {
            throw ValidationError("--idle-timeout must be between 0 and 3600")
        }
        if let maxConnections, maxConnections < 1 { throw ValidationError("--max-connections must be 1 or more") }
        for (name, value) in [
            ("--max-src-bytes", maxSrcBytes), ("--max-src-pixels", maxSrcPixels), ("--max-result-size", maxResultSize),
        ] where value < 1 {
            throw ValidationError("\(name) must be 1 or more")
        }
        guard (1...100).contains(jpegQuality), (1...100).contains(webpQuality), (1...100).contains(avifQuality),
            (1...100).contains(jxlQuality), (0...9).contains(pngCompression)
        else {
            throw ValidationError("qualities are 1 to 100, --png-compression 0 to 9")
        }
        if let workers, workers < 1 { throw ValidationError("--workers must be 1 or more") }
        if let fetchesAhead, fetchesAhead < 0 { throw ValidationError("--fetches-ahead must be 0 or more") }
        if let queue, queue < 0 { throw ValidationError("--queue must be 0 or more") }
        guard (0...19).contains(workerNiceness) else { throw ValidationError("--worker-niceness is 0 to 19") }
        guard ttl >= 0, resultCacheMB >= 0, diskCacheMB >= 0 else {
            throw ValidationError("--ttl, --result-cache-mb and --disk-cache-mb must be 0 or more")
        }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level") }
    }

    /// The key and salt pairs from the options, else from the environment.
    func signaturePairs() throws -> [(key: String, salt: String)] {
        if !key.isEmpty { return Array(zip(key, salt)).map { (key: $0.0, salt: $0.1) } }
        let environment = ProcessInfo.processInfo.environment
        func list(_ name: String) -> [String] {
            environment[name].map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } } ?? []
        }
        let keys = list("IMGPROXY_KEY") + list("IMGPROXY_KEYS")
        let salts = list("IMGPROXY_SALT") + list("IMGPROXY_SALTS")
        guard keys.count == salts.count else {
            throw CommandFailure("IMGPROXY_KEY(S) and IMGPROXY_SALT(S) must list as many values")
        }
        return Array(zip(keys, salts)).map { (key: $0.0, salt: $0.1) }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardOutput(label: label)
            handler.logLevel = level
            return handler
        }
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let logger = Logger(label: "imageloader.serve")
        let descriptors = FileDescriptorLimit.raiseToHardLimit()
        let connections =
            maxConnections
            ?? min(ServeCommand.defaultMaxConnections, max(16, descriptors.now - ServeCommand.reservedDescriptors))
        logger.debug(
            "connections",
            metadata: [
                "fileDescriptors": "\(descriptors.now)", "raisedFrom": "\(descriptors.before)",
                "maxConnections": "\(connections)",
            ])
        let keepsBuffers = MemoryAllocator.keepImageBuffers()
        logger.debug("malloc", metadata: ["keepsImageBuffers": "\(keepsBuffers)"])

        var configuration = ImageService.Configuration()
        let pairs = try signaturePairs()
        if !pairs.isEmpty {
            do {
                configuration.signature = try URLSignature(hexPairs: pairs)
            } catch {
                throw CommandFailure(error.description)
            }
        } else if !allowUnsigned {
            throw CommandFailure(
                "no signing key: give --key and --salt (or IMGPROXY_KEY and IMGPROXY_SALT), or --allow-unsigned")
        }
        configuration.allowsUnsigned = allowUnsigned
        configuration.sources = SourcePolicy(allowedPrefixes: allowSource, localRoot: localRoot)
        var allowed = Set<IPAddress>()
        for text in allowAddress {
            guard let address = IPAddress(text) else {
                throw CommandFailure("--allow-address \(text) is not an IP address")
            }
            allowed.insert(address)
        }
        configuration.network = NetworkPolicy(allowsPrivateNetworks: allowPrivateNetworks, allowedAddresses: allowed)
        configuration.maxSourceBytes = maxSrcBytes
        configuration.maxSourcePixels = maxSrcPixels
        configuration.maxResultSide = maxResultSize
        configuration.timeout = .milliseconds(Int(timeout * 1000))
        configuration.ttl = ttl
        if let workers { configuration.workers = workers }
        configuration.fetchesAhead = fetchesAhead
        configuration.workerNiceness = workerNiceness
        configuration.queue = queue
        configuration.resultCacheBytes = resultCacheMB << 20
        configuration.allowsUploads = allowUploads
        configuration.jpegQuality = jpegQuality
        configuration.webPQuality = webpQuality
        configuration.avifQuality = avifQuality
        configuration.jxlQuality = jxlQuality
        configuration.autoAVIF = autoAvif
        configuration.autoJXL = autoJxl
        configuration.pngCompressionLevel = pngCompression
        configuration.logger = logger
        if let cacheDir { configuration.loader.cacheDirectory = cacheDir }
        if diskCacheMB == 0 { configuration.loader.cacheDirectory = nil }
        configuration.loader.diskCacheMaxBytes = diskCacheMB << 20
        configuration.loader.logger = Logger(label: "imageloader.loader")

        let service: ImageService
        do {
            service = try ImageService(configuration: configuration)
        } catch {
            throw CommandFailure("cannot start: \(error)")
        }
        let limit = ConnectionLimit(maximum: connections)
        let requestDeadlineMilliseconds = Int64(timeout * 1000) + 1000
        let router = Router(context: ImageServiceRequestContext.self)
        service.addRoutes(to: router, metricsText: { registry.emitToString() })
        let (host, port) = (self.host, self.port)
        let app = Application(
            router: router,
            // Connections past the limit are closed when accepted (ConnectionLimitHandler), idle
            // ones after --idle-timeout, and one whose request has not arrived in full within
            // --timeout (and a second, for a late upload's 504 to go first) too
            // (RequestDeadlineHandler); work for a client that has gone stops
            // (ClientDepartureHandler); results in the cache are answered on the event loop,
            // before the router (CachedResultHandler).
            server: .http1(
                configuration: .init(
                    additionalChannelHandlers: [
                        ConnectionLimitHandler(limit: limit),
                        RequestDeadlineHandler(deadline: .milliseconds(requestDeadlineMilliseconds)),
                        ClientDepartureHandler(), CachedResultHandler(service: service),
                    ],
                    idleTimeout: .milliseconds(Int64(idleTimeout * 1000)))),
            configuration: .init(address: .hostname(host, port: port), serverName: nil),
            onServerRunning: { channel in
                let bound = channel.localAddress?.port ?? port
                // The one line a supervisor or a test reads to find the port.
                Terminal.line("listening on http://\(host):\(bound)")
            },
            logger: Logger(label: "imageloader.http"))
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                // Shut down in reverse order: the HTTP server first (finishing what is in
                // flight), then the service and its loader.
                services: [service, app], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
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

/// The process's limit on open file descriptors.
enum FileDescriptorLimit {
    /// Raises the soft limit to the hard one (Debian's default soft limit, 1024, is the
    /// hard limit of a `select` loop, not of this process); returns the limit before and now.
    static func raiseToHardLimit() -> (before: Int, now: Int) {
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return (1024, 1024) }
        let before = Int(clamping: limit.rlim_cur)
        // An unlimited hard limit is not a count setrlimit takes for RLIMIT_NOFILE.
        let wanted = limit.rlim_max == rlim_t.max ? max(limit.rlim_cur, 1 << 20) : limit.rlim_max
        guard wanted > limit.rlim_cur else { return (before, before) }
        var raised = limit
        raised.rlim_cur = wanted
        guard setrlimit(resource, &raised) == 0 else { return (before, before) }
        return (before, Int(clamping: wanted))
    }

    private static let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
}
