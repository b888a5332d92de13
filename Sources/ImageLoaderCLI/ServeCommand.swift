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
        (settings.host, settings.port) = try Self.address(host: host, port: port, environment: environment)
        settings.signatureSize =
            try environment.integer(signatureSize, "--signature-size", "IMGPROXY_SIGNATURE_SIZE", in: 1...32) ?? 32
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
            try maxSrcBytes.map { try ImgproxyEnvironment.checked($0, "--max-src-bytes", 1...Int.max) }
            ?? environment.integer(nil, "", "IMGPROXY_MAX_SRC_FILE_SIZE", in: 0...Int.max).flatMap {
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
        settings.timeout = try environment.decimal(timeout, "--timeout", "IMGPROXY_TIMEOUT", in: 0.001...3600) ?? 10
        settings.idleTimeout =
            try environment.decimal(idleTimeout, "--idle-timeout", "IMGPROXY_KEEP_ALIVE_TIMEOUT", in: 0.001...3600)
            ?? 60
        settings.ttl = try environment.integer(ttl, "--ttl", "IMGPROXY_TTL", in: 0...Int.max) ?? 31_536_000
        // imgproxy's 0 is "no limit" for the variables; the options take only limits.
        settings.maxConnections =
            try maxConnections.map { try ImgproxyEnvironment.checked($0, "--max-connections", 1...Int.max) }
            ?? environment.integer(nil, "", "IMGPROXY_MAX_CLIENTS", in: 0...Int.max).flatMap { $0 == 0 ? nil : $0 }
        settings.workers =
            try environment.integer(workers, "--workers", "IMGPROXY_WORKERS", in: 1...Int.max)
            ?? environment.integer(nil, "", "IMGPROXY_CONCURRENCY", in: 1...Int.max)
        settings.queue =
            try queue.map { try ImgproxyEnvironment.checked($0, "--queue", 0...Int.max) }
            ?? environment.integer(nil, "", "IMGPROXY_REQUESTS_QUEUE_SIZE", in: 0...Int.max).flatMap {
                $0 == 0 ? nil : $0
            }
        if let fetchesAhead, fetchesAhead < 0 { throw ValidationError("--fetches-ahead must be 0 or more") }
        guard (0...19).contains(workerNiceness) else { throw ValidationError("--worker-niceness is 0 to 19") }
        for (name, value) in [
            ("--result-cache-mb", resultCacheMB ?? 0), ("--disk-cache-mb", diskCacheMB),
            ("--source-ttl", sourceTtl ?? 0),
            ("--stale-when-unreachable", staleWhenUnreachable ?? 0),
        ] {
            _ = try ImgproxyEnvironment.checked(value, name, 0...Int.max)
        }
        // Qualities as imgproxy resolves them: the URL's q, then its fq, then the
        // format's quality here, then the common one.
        settings.quality = try environment.integer(quality, "--quality", "IMGPROXY_QUALITY", in: 1...100) ?? 80
        for (format, value) in try environment.formatQualities("IMGPROXY_FORMAT_QUALITY") {
            settings.formatQuality[format] = value
        }
        for (format, value) in try ImgproxyEnvironment.formatQualities(formatQuality, name: "--format-quality") {
            settings.formatQuality[format] = value
        }
        _ = try ImgproxyEnvironment.checked(pngCompression, "--png-compression", 0...9)
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
        let format = logFormat ?? environment.text("IMGPROXY_LOG_FORMAT")?.lowercased() ?? "pretty"
        guard let logFormat = LogFormat(rawValue: format) else {
            throw ValidationError(
                "--log-format \(format) is not one of \(LogFormat.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        settings.logFormat = logFormat
        settings.drainDelay = drainDelay ?? 0
        _ = try ImgproxyEnvironment.checked(settings.drainDelay, "--drain-delay", 0...3600)
        settings.gracefulStopTimeout =
            try environment.decimal(
                gracefulStopTimeout, "--graceful-stop-timeout", "IMGPROXY_GRACEFUL_STOP_TIMEOUT", in: 0...3600)
            ?? min(settings.timeout * 2, 3600)
        settings.freeMemoryInterval =
            try environment.decimal(
                freeMemoryInterval, "--free-memory-interval", "IMGPROXY_FREE_MEMORY_INTERVAL", in: 0...3600) ?? 10
        settings.logLevel = logLevel ?? environment.text("IMGPROXY_LOG_LEVEL").map { $0.lowercased() } ?? "info"
        if settings.logLevel == "warn" { settings.logLevel = "warning" }
        guard Logger.Level(rawValue: settings.logLevel) != nil else { throw ValidationError("unknown --log-level") }
        return settings
    }

    /// The address to listen on: the options, else `IMGPROXY_BIND`, else `PORT` (as
    /// platforms that assign a port set it) on every interface, else imgproxy's `:8080`.
    static func address(host: String?, port: Int?, environment: ImgproxyEnvironment) throws -> (String, Int) {
        var address = ("0.0.0.0", 8080)
        if let text = environment.text("PORT") {
            guard let number = Int(text), (0...65_535).contains(number) else {
                throw ValidationError("PORT must be a port number, 0 to 65535")
            }
            address.1 = number
        }
        if let bind = try environment.bind("IMGPROXY_BIND") { address = bind }
        if let host { address.0 = host }
        if let port { address.1 = port }
        guard (0...65_535).contains(address.1) else { throw ValidationError("--port must be 0 to 65535") }
        return address
    }

    /// The `IMGPROXY_*` variables `serve` reads besides those its options' help names.
    static let imgproxyVariablesBesideOptions = [
        "IMGPROXY_PRESETS_SEPARATOR", "IMGPROXY_CONCURRENCY",
    ]

    /// The `IMGPROXY_*` variables set in `environment` that `serve` does not read, sorted.
    static func unsupportedVariables(_ environment: [String: String]) -> [String] {
        let known = Set(
            imgproxyVariablesBesideOptions
                + ServeEnvironment.serve.flatMap(\.imgproxyVariables))
        return environment.keys.filter { $0.hasPrefix("IMGPROXY_") && !known.contains($0) }.sorted()
    }

    /// Every setting, resolved from the options and the environment.
    struct Settings {
        var host = "0.0.0.0"
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
        var logFormat = LogFormat.pretty
        var drainDelay = 0.0
        var gracefulStopTimeout = 20.0
        var freeMemoryInterval = 10.0
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

/// SIGTERM or SIGINT: `/health` answers 503 (``ImageService/startDraining()``) for the
/// drain delay while requests are still served, then the group's graceful shutdown
/// closes the listeners and gives the requests in flight its time to finish. A second
/// signal skips what is left of the delay.
struct GracefulStop: Sendable {
    let service: ImageService
    let group: ServiceGroup
    /// The drain's length, as `--drain-delay` gives it (0 to 3600 seconds).
    let drainSeconds: Double
    let logger: Logger
    private let asked = Lock(false)

    init(service: ImageService, group: ServiceGroup, drainSeconds: Double, logger: Logger) {
        self.service = service
        self.group = group
        self.drainSeconds = drainSeconds
        self.logger = logger
    }

    /// Whether a signal asked the process to stop.
    var wasAsked: Bool { asked.withLock { $0 } }

    func run() async {
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        await withTaskGroup(of: Void.self) { tasks in
            for await signal in signals {
                let first = asked.withLock { asked in
                    defer { asked = true }
                    return !asked
                }
                guard first, drainSeconds > 0 else {
                    logger.notice("stopping", metadata: ["signal": "\(signal)"])
                    await group.triggerGracefulShutdown()
                    continue
                }
                service.startDraining()
                logger.notice(
                    "draining: /health answers 503 until the listener closes",
                    metadata: ["signal": "\(signal)", "seconds": .stringConvertible(drainSeconds)])
                let delay = Duration.milliseconds(Int(drainSeconds * 1000))
                tasks.addTask { [group] in
                    try? await Task.sleep(for: delay)
                    await group.triggerGracefulShutdown()
                }
            }
            tasks.cancelAll()
        }
    }
}

/// Returns freed memory to the system every `interval` while the service is idle after
/// work (``ImageService/returnFreeMemory()``): after a burst, resident memory falls
/// back towards its idle level instead of staying at its peak.
struct MemoryReturn: Sendable {
    let service: ImageService
    let interval: Duration
    let logger: Logger

    func run() async {
        var returnedAfter = 0
        while !Task.isCancelled {
            do { try await Task.sleep(for: interval) } catch { return }
            let activity = service.activity
            guard activity.idle, activity.finished != returnedAfter else { continue }
            returnedAfter = activity.finished
            let start = ContinuousClock.now
            await service.returnFreeMemory()
            logger.debug("returned free memory", metadata: ["took": "\(ContinuousClock.now - start)"])
        }
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
