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

    @Option(help: "The address to listen on (IMGPROXY_BIND: host:port) [default: 127.0.0.1].")
    var host: String?

    @Option(help: "The port to listen on (0: any free port, printed at start) [default: 8080].")
    var port: Int?

    @Option(help: "A signing key, hexadecimal (repeatable, paired with --salt).")
    var key: [String] = []

    @Option(help: "A signing salt, hexadecimal (repeatable, paired with --key).")
    var salt: [String] = []

    @Option(help: "Bytes of the signature, 1 to 32 (IMGPROXY_SIGNATURE_SIZE) [default: 32].")
    var signatureSize: Int?

    @Flag(help: "Serve unsigned URLs (`insecure` or `_` in place of the signature).")
    var allowUnsigned = false

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

    @Option(help: "Images decoded, resized and encoded at once (IMGPROXY_WORKERS; default: the cores).")
    var workers: Int?

    @Option(help: "Requests that fetch their source while the workers are busy (default: as many as workers).")
    var fetchesAhead: Int?

    @Option(help: "How far below the event loops the workers run, as a nice increment (0 to 19).")
    var workerNiceness = 10

    @Option(help: "Requests waiting to start before 503 (IMGPROXY_REQUESTS_QUEUE_SIZE; default: 4 per worker).")
    var queue: Int?

    @Option(name: .customLong("result-cache-mb"), help: "MiB of processed images kept in memory; 0 keeps none.")
    var resultCacheMB = 128

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
        help: "The log level: trace, debug, info (one line per request), notice, warning, error (IMGPROXY_LOG_LEVEL).")
    var logLevel: String?

    @OptionGroup(title: "imgproxy's formats, header fields, clients and sources")
    var compatibility: ServeCompatibilityOptions

    @OptionGroup(title: "Object storage: s3://, gs:// and abs:// sources, results in a bucket")
    var storage: ServeStorageOptions

    func validate() throws {
        guard key.count == salt.count else { throw ValidationError("give as many --salt as --key") }
        // The settings' own checks, here too: a bad value is a usage mistake of `serve`.
        let environment = ImgproxyEnvironment(ProcessInfo.processInfo.environment)
        _ = try settings(environment)
        var configuration = ImageService.Configuration()
        _ = try urlRules(settings(environment), configuration: &configuration, environment: environment)
        _ = try compatibility.healthPath(environment)
        try storage.apply(to: &configuration, environment: environment)
    }

    /// The URL rules (presets, only-presets, security options, imgproxy's URL settings),
    /// with the compatibility settings applied to `configuration`; a preset that is not
    /// `NAME=OPTIONS` with options a URL takes is a usage error.
    func urlRules(
        _ settings: Settings, configuration: inout ImageService.Configuration, environment: ImgproxyEnvironment
    ) throws -> URLRules {
        var rules = URLRules()
        try compatibility.apply(to: &configuration, rules: &rules, environment: environment)
        rules.onlyPresets = settings.onlyPresets
        rules.allowsSecurityOptions = settings.allowSecurityOptions
        do {
            try rules.addPresets(settings.presets)
        } catch {
            throw ValidationError(error.description)
        }
        return rules
    }

    /// The key and salt pairs from the options, else from the environment, each with
    /// the name of where it was given (for errors: `--key 2`, `IMGPROXY_SALT`).
    func signaturePairs(_ environment: ImgproxyEnvironment) throws -> [(
        key: String, salt: String, names: (String, String)
    )] {
        func named(_ values: [String], _ name: String) -> [(String, String)] {
            values.enumerated().map { ($1, values.count > 1 ? "\(name) (value \($0 + 1))" : name) }
        }
        let keys: [(String, String)]
        let salts: [(String, String)]
        if !key.isEmpty {
            keys = key.enumerated().map { ($1, key.count > 1 ? "--key \($0 + 1)" : "--key") }
            salts = salt.enumerated().map { ($1, salt.count > 1 ? "--salt \($0 + 1)" : "--salt") }
        } else {
            keys =
                named(environment.list("IMGPROXY_KEY"), "IMGPROXY_KEY")
                + named(environment.list("IMGPROXY_KEYS"), "IMGPROXY_KEYS")
            salts =
                named(environment.list("IMGPROXY_SALT"), "IMGPROXY_SALT")
                + named(environment.list("IMGPROXY_SALTS"), "IMGPROXY_SALTS")
            guard keys.count == salts.count else {
                func count(_ n: Int, _ noun: String) -> String { "\(n) \(noun)\(n == 1 ? "" : "s")" }
                throw CommandFailure(
                    "IMGPROXY_KEY and IMGPROXY_KEYS give \(count(keys.count, "key")), IMGPROXY_SALT and "
                        + "IMGPROXY_SALTS \(count(salts.count, "salt")): give a salt for each key")
            }
        }
        return zip(keys, salts).map { (key: $0.0, salt: $1.0, names: ($0.1, $1.1)) }
    }

    /// The signature from `pairs`, or an error naming the option or variable at fault
    /// (never its value: it is a secret).
    static func signature(_ pairs: [(key: String, salt: String, names: (String, String))], size: Int) throws
        -> URLSignature
    {
        do {
            return try URLSignature(hexPairs: pairs.map { (key: $0.key, salt: $0.salt) }, size: size)
        } catch {
            guard let index = error.pairIndex, pairs.indices.contains(index) else {
                throw CommandFailure(error.description)
            }
            let (name, value) =
                error.isSalt ? (pairs[index].names.1, pairs[index].salt) : (pairs[index].names.0, pairs[index].key)
            throw CommandFailure(
                "\(name) \(value.isEmpty ? "is empty" : "is not hexadecimal"): give an even number of hex digits "
                    + "(0-9, a-f), as `openssl rand -hex 32` prints")
        }
    }

    /// The settings: each option given, else its `IMGPROXY_*` variable, else its default;
    /// every value checked.
    func settings(_ environment: ImgproxyEnvironment) throws -> Settings {
        var settings = Settings()
        if let bind = try environment.bind("IMGPROXY_BIND") { (settings.host, settings.port) = bind }
        if let host { settings.host = host }
        if let port { settings.port = port }
        guard (1...65_535).contains(settings.port) || settings.port == 0 else {
            throw ValidationError("--port must be 0 to 65535")
        }
        settings.signatureSize = try signatureSize ?? environment.integer("IMGPROXY_SIGNATURE_SIZE") ?? 32
        guard (1...32).contains(settings.signatureSize) else { throw ValidationError("--signature-size is 1 to 32") }
        settings.pathPrefix = pathPrefix ?? environment.text("IMGPROXY_PATH_PREFIX") ?? ""
        if settings.pathPrefix.hasSuffix("/") { settings.pathPrefix.removeLast() }
        guard settings.pathPrefix.isEmpty || settings.pathPrefix.hasPrefix("/") else {
            throw ValidationError("--path-prefix must start with /")
        }
        settings.localRoot = localRoot ?? environment.text("IMGPROXY_LOCAL_FILESYSTEM_ROOT")
        if let root = settings.localRoot {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: root, isDirectory: &isFolder), isFolder.boolValue else {
                let name = localRoot != nil ? "--local-root" : "IMGPROXY_LOCAL_FILESYSTEM_ROOT"
                let why = FileManager.default.fileExists(atPath: root) ? "is not a folder" : "does not exist"
                throw ValidationError("\(name) \(root) \(why): local:/// sources are read from under that folder")
            }
        }
        settings.allowSource = allowSource.isEmpty ? environment.list("IMGPROXY_ALLOWED_SOURCES") : allowSource
        settings.maxSrcBytes =
            try maxSrcBytes ?? environment.integer("IMGPROXY_MAX_SRC_FILE_SIZE").flatMap {
                $0 == 0 ? nil : $0
            } ?? (64 << 20)
        settings.maxSrcPixels = try maxSrcPixels ?? environment.megapixels("IMGPROXY_MAX_SRC_RESOLUTION") ?? 50_000_000
        settings.maxResultSize =
            try maxResultSize ?? environment.integer("IMGPROXY_MAX_RESULT_DIMENSION").flatMap {
                $0 == 0 ? nil : $0
            } ?? 8192
        settings.maxAnimationFrames =
            try maxAnimationFrames ?? environment.integer("IMGPROXY_MAX_ANIMATION_FRAMES") ?? 1
        settings.maxAnimationFramePixels =
            try maxAnimationFramePixels
            ?? environment.megapixels("IMGPROXY_MAX_ANIMATION_FRAME_RESOLUTION").flatMap {
                $0 == 0 ? nil : $0
            }
        for (name, value) in [
            ("--max-src-bytes", settings.maxSrcBytes), ("--max-src-pixels", settings.maxSrcPixels),
            ("--max-result-size", settings.maxResultSize), ("--max-animation-frames", settings.maxAnimationFrames),
            ("--max-animation-frame-pixels", settings.maxAnimationFramePixels ?? 1),
        ] where value < 1 {
            throw ValidationError("\(name) must be 1 or more")
        }
        settings.timeout = try timeout ?? environment.decimal("IMGPROXY_TIMEOUT") ?? 10
        guard settings.timeout > 0, settings.timeout <= 3600 else {
            throw ValidationError("--timeout must be between 0 and 3600")
        }
        settings.idleTimeout = try idleTimeout ?? environment.decimal("IMGPROXY_KEEP_ALIVE_TIMEOUT") ?? 60
        guard settings.idleTimeout > 0, settings.idleTimeout <= 3600 else {
            throw ValidationError("--idle-timeout must be between 0 and 3600")
        }
        settings.ttl = try ttl ?? environment.integer("IMGPROXY_TTL") ?? 31_536_000
        settings.maxConnections =
            try maxConnections
            ?? environment.integer("IMGPROXY_MAX_CLIENTS").flatMap {
                $0 == 0 ? nil : $0
            }
        if let connections = settings.maxConnections, connections < 1 {
            throw ValidationError("--max-connections must be 1 or more")
        }
        settings.workers =
            try workers ?? environment.integer("IMGPROXY_WORKERS")
            ?? environment.integer(
                "IMGPROXY_CONCURRENCY")
        if let workers = settings.workers, workers < 1 { throw ValidationError("--workers must be 1 or more") }
        settings.queue = try queue ?? environment.integer("IMGPROXY_REQUESTS_QUEUE_SIZE").flatMap { $0 == 0 ? nil : $0 }
        if let fetchesAhead, fetchesAhead < 0 { throw ValidationError("--fetches-ahead must be 0 or more") }
        if let queue = settings.queue, queue < 0 { throw ValidationError("--queue must be 0 or more") }
        guard (0...19).contains(workerNiceness) else { throw ValidationError("--worker-niceness is 0 to 19") }
        guard settings.ttl >= 0, resultCacheMB >= 0, diskCacheMB >= 0 else {
            throw ValidationError("--ttl, --result-cache-mb and --disk-cache-mb must be 0 or more")
        }
        // Qualities as imgproxy resolves them: the URL's q, then its fq, then the
        // format's quality here, then the common one.
        settings.quality = try quality ?? environment.integer("IMGPROXY_QUALITY") ?? 80
        for (format, value) in try environment.formatQualities("IMGPROXY_FORMAT_QUALITY") {
            settings.formatQuality[format] = value
        }
        for (format, value) in try ImgproxyEnvironment.formatQualities(formatQuality, name: "--format-quality") {
            settings.formatQuality[format] = value
        }
        guard (1...100).contains(settings.quality), (0...9).contains(pngCompression) else {
            throw ValidationError("--quality is 1 to 100, --png-compression 0 to 9")
        }
        for name in settings.formatQuality.keys where ResultFormat(name: name) == nil {
            throw ValidationError("--format-quality: \(name) is not a format")
        }
        settings.autoWebP = try autoWebp ?? environment.flag("IMGPROXY_AUTO_WEBP") ?? false
        settings.autoAVIF = try autoAvif ?? environment.flag("IMGPROXY_AUTO_AVIF") ?? false
        settings.autoJXL = try autoJxl ?? environment.flag("IMGPROXY_AUTO_JXL") ?? false
        let separator = environment.text("IMGPROXY_PRESETS_SEPARATOR") ?? ","
        settings.presets = preset.isEmpty ? environment.list("IMGPROXY_PRESETS", separator: separator) : preset
        settings.onlyPresets = try onlyPresets || environment.flag("IMGPROXY_ONLY_PRESETS") == true
        settings.allowSecurityOptions =
            try allowSecurityOptions
            || environment.flag("IMGPROXY_ALLOW_SECURITY_OPTIONS") == true
        settings.watermarkPath = watermarkPath ?? environment.text("IMGPROXY_WATERMARK_PATH")
        settings.watermarkOpacity = try watermarkOpacity ?? environment.decimal("IMGPROXY_WATERMARK_OPACITY") ?? 1
        guard (0...1).contains(settings.watermarkOpacity) else {
            throw ValidationError("--watermark-opacity is 0 to 1")
        }
        settings.metricsBind =
            try (metricsBind.map { try ImgproxyEnvironment.parseBind($0, name: "--metrics-bind") })
            ?? environment.bind("IMGPROXY_PROMETHEUS_BIND")
        if let bind = settings.metricsBind, bind.host == settings.host, bind.port == settings.port, bind.port != 0 {
            throw ValidationError("--metrics-bind must differ from the main address")
        }
        settings.logLevel = logLevel ?? environment.text("IMGPROXY_LOG_LEVEL").map { $0.lowercased() } ?? "info"
        if settings.logLevel == "warn" { settings.logLevel = "warning" }
        guard Logger.Level(rawValue: settings.logLevel) != nil else { throw ValidationError("unknown --log-level") }
        return settings
    }

    /// Every setting, resolved from the options and the environment.
    struct Settings {
        var host = "127.0.0.1"
        var port = 8080
        var signatureSize = 32
        var pathPrefix = ""
        var localRoot: String?
        var allowSource: [String] = []
        var maxSrcBytes = 64 << 20
        var maxSrcPixels = 50_000_000
        var maxResultSize = 8192
        var maxAnimationFrames = 1
        var maxAnimationFramePixels: Int?
        var timeout = 10.0
        var idleTimeout = 60.0
        var ttl = 31_536_000
        var maxConnections: Int?
        var workers: Int?
        var queue: Int?
        var quality = 80
        var formatQuality = ["webp": 79, "avif": 63, "jxl": 77]
        var autoWebP = false
        var autoAVIF = false
        var autoJXL = false
        var presets: [String] = []
        var onlyPresets = false
        var allowSecurityOptions = false
        var watermarkPath: String?
        var watermarkOpacity = 1.0
        var metricsBind: (host: String, port: Int)?
        var logLevel = "info"
    }

    func run() async throws {
        let environment = ImgproxyEnvironment(ProcessInfo.processInfo.environment)
        let settings = try settings(environment)
        let level = Logger.Level(rawValue: settings.logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardOutput(label: label)
            handler.logLevel = level
            return handler
        }
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let logger = Logger(label: "imageloader.serve")
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
        let keepsBuffers = MemoryAllocator.keepImageBuffers()
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
        if let workers = settings.workers { configuration.workers = workers }
        configuration.fetchesAhead = fetchesAhead
        configuration.workerNiceness = workerNiceness
        configuration.queue = settings.queue
        configuration.resultCacheBytes = resultCacheMB << 20
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
        if let cacheDir { configuration.loader.cacheDirectory = cacheDir }
        if diskCacheMB == 0 { configuration.loader.cacheDirectory = nil }
        configuration.loader.diskCacheMaxBytes = diskCacheMB << 20
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
                // The one line a supervisor or a test reads to find the port.
                Terminal.line("listening on http://\(host):\(bound)")
            },
            logger: Logger(label: "imageloader.http"))
        var services: [any Service] = [
            service, Listener(server: app, address: "\(host):\(port)", option: "--port (0 picks a free one) or --host"),
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
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                // Shut down in reverse order: the HTTP servers first (finishing what is in
                // flight), then the service and its loader.
                services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }
}

/// A server of the command, whose failure to listen names its address and the option
/// that changes it ("cannot listen on 127.0.0.1:8080: the port is in use ...").
struct Listener: Service {
    let server: any Service
    let address: String
    let option: String

    func run() async throws {
        do {
            try await server.run()
        } catch {
            guard let code = Terminal.errno(of: error), [EADDRINUSE, EACCES, EADDRNOTAVAIL].contains(code) else {
                throw error
            }
            let why =
                switch code {
                case EADDRINUSE: "the port is in use by another program"
                case EACCES: "ports below 1024 need root (or CAP_NET_BIND_SERVICE)"
                default: "the address is not one of this machine's"
                }
            throw CommandFailure("cannot listen on \(address): \(why); choose another with \(option)")
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
