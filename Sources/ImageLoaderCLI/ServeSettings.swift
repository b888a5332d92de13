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

// The settings of `serve`: each option, else its variable, else its default, checked;
// the URL rules and signatures they make.
extension ServeCommand {
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
            ?? environment.integer("IMGPROXY_MAX_SRC_FILE_SIZE", in: 0...Int.max).flatMap {
                $0 == 0 ? nil : $0
            } ?? (64 << 20)
        // Options take limits only; imgproxy's variables may also say 0 ("none") where it has that.
        let positive = 1...Int.max
        settings.maxSrcPixels =
            try maxSrcPixels.map { try ImgproxyEnvironment.checked($0, "--max-src-pixels", positive) }
            ?? environment.megapixels("IMGPROXY_MAX_SRC_RESOLUTION").map {
                try ImgproxyEnvironment.checked($0, "IMGPROXY_MAX_SRC_RESOLUTION (in pixels)", positive)
            } ?? 50_000_000
        settings.maxResultSize =
            try maxResultSize.map { try ImgproxyEnvironment.checked($0, "--max-result-size", positive) }
            ?? environment.integer("IMGPROXY_MAX_RESULT_DIMENSION", in: 0...Int.max).flatMap {
                $0 == 0 ? nil : $0
            } ?? 8192
        settings.maxAnimationFrames =
            try environment.integer(
                maxAnimationFrames, "--max-animation-frames", "IMGPROXY_MAX_ANIMATION_FRAMES", in: positive) ?? 1
        settings.maxAnimationFramePixels =
            try maxAnimationFramePixels.map {
                try ImgproxyEnvironment.checked($0, "--max-animation-frame-pixels", positive)
            }
            ?? environment.megapixels("IMGPROXY_MAX_ANIMATION_FRAME_RESOLUTION").flatMap {
                $0 == 0 ? nil : $0
            }
        settings.timeout = try environment.decimal(timeout, "--timeout", "IMGPROXY_TIMEOUT", in: 0.001...3600) ?? 10
        settings.idleTimeout =
            try environment.decimal(idleTimeout, "--idle-timeout", "IMGPROXY_KEEP_ALIVE_TIMEOUT", in: 0.001...3600)
            ?? 60
        settings.ttl = try environment.integer(ttl, "--ttl", "IMGPROXY_TTL", in: 0...Int.max) ?? 31_536_000
        // imgproxy's 0 is "no limit" for the variables; the options take only limits.
        settings.maxConnections =
            try maxConnections.map { try ImgproxyEnvironment.checked($0, "--max-connections", 1...Int.max) }
            ?? environment.integer("IMGPROXY_MAX_CLIENTS", in: 0...Int.max).flatMap { $0 == 0 ? nil : $0 }
        settings.workers =
            try environment.integer(workers, "--workers", "IMGPROXY_WORKERS", in: 1...Int.max)
            ?? environment.integer("IMGPROXY_CONCURRENCY", in: 1...Int.max)
        settings.queue =
            try queue.map { try ImgproxyEnvironment.checked($0, "--queue", 0...Int.max) }
            ?? environment.integer("IMGPROXY_REQUESTS_QUEUE_SIZE", in: 0...Int.max).flatMap {
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
}
