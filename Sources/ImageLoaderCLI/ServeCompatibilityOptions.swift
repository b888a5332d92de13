import ArgumentParser
import Foundation
import ImageLoader
import ImageService
import RasterImage

/// The settings of `serve` that follow imgproxy's beyond the core ones: the format a
/// result takes, its header fields, what clients send and what goes on to sources.
/// Each option also reads its `IMGPROXY_*` variable; the option wins.
struct ServeCompatibilityOptions: ParsableArguments {
    @Option(
        help: """
            A format results take when neither the URL nor Accept names one: the source's own when listed, \
            else the first listed that holds the result's animation and alpha (repeatable; \
            IMGPROXY_PREFERRED_FORMATS) [default: jpeg, png, gif].
            """)
    var preferredFormat: [String] = []

    @Option(
        help: """
            A source format sent as it is, unprocessed, when the URL names no other (repeatable; \
            IMGPROXY_SKIP_PROCESSING_FORMATS).
            """)
    var skipProcessingFormat: [String] = []

    @Flag(
        help: "Answer WebP to clients whose Accept lists it, even when the URL names a format (IMGPROXY_ENFORCE_WEBP).")
    var enforceWebp = false

    @Flag(
        help: "Answer AVIF to clients whose Accept lists it, even when the URL names a format (IMGPROXY_ENFORCE_AVIF).")
    var enforceAvif = false

    @Flag(
        help:
            "Answer JPEG XL to clients whose Accept lists it, even when the URL names a format (IMGPROXY_ENFORCE_JXL).")
    var enforceJxl = false

    @Flag(
        help: """
            Answer HEIC when the URL names no format and Accept lists image/heic or image/heif, after JPEG XL and \
            AVIF, before WebP (IMAGELOADER_AUTO_HEIC; imgproxy has no such setting).
            """)
    var autoHeic = false

    @Flag(
        help:
            "Answer HEIC to clients whose Accept lists it, even when the URL names a format (IMAGELOADER_ENFORCE_HEIC)."
    )
    var enforceHeic = false

    @Flag(
        help: """
            Rasterise SVG sources when the URL names no format, instead of answering the sanitised SVG \
            (IMGPROXY_ALWAYS_RASTERIZE_SVG).
            """)
    var alwaysRasterizeSvg = false

    @Flag(
        help: """
            Read the client hints Sec-CH-DPR/DPR and Sec-CH-Width/Width as the URL's default dpr and width \
            (IMGPROXY_ENABLE_CLIENT_HINTS).
            """)
    var clientHints = false

    @Flag(
        help: """
            Send the source's own Cache-Control (or its Expires as max-age) instead of --ttl's \
            (IMGPROXY_CACHE_CONTROL_PASSTHROUGH).
            """)
    var cacheControlPassthrough = false

    @Flag(
        inversion: .prefixedNo,
        help: "Send the source's ETag and answer If-None-Match (IMGPROXY_USE_ETAG) [default: on].")
    var etag: Bool?

    @Option(help: "Text every ETag sent is made with; changing it changes them all (IMGPROXY_ETAG_BUSTER).")
    var etagBuster: String?

    @Flag(
        inversion: .prefixedNo,
        help: "Send the source's Last-Modified and answer If-Modified-Since (IMGPROXY_USE_LAST_MODIFIED) [default: on]."
    )
    var lastModified: Bool?

    @Option(
        help: """
            A time (RFC 3339, as 2026-01-31T00:00:00Z) no Last-Modified sent is older than, and before which \
            If-Modified-Since gets no 304 (IMGPROXY_LAST_MODIFIED_BUSTER).
            """)
    var lastModifiedBuster: String?

    @Flag(
        help: "Send Link: <source>; rel=\"canonical\" with results of http(s) sources (IMGPROXY_SET_CANONICAL_HEADER).")
    var canonicalHeader = false

    @Flag(
        help: """
            Send X-Origin-Width, X-Origin-Height, X-Result-Width, X-Result-Height and X-Origin-Content-Length \
            (IMGPROXY_ENABLE_DEBUG_HEADERS).
            """)
    var debugHeaders = false

    @Option(help: "A signature accepted without checking (repeatable; IMGPROXY_TRUSTED_SIGNATURES, comma-separated).")
    var trustedSignature: [String] = []

    @Option(help: "Text put before every source that does not start with it (IMGPROXY_BASE_URL).")
    var baseURL: String?

    @Option(
        help: """
            A rewrite of sources, PATTERN=REPLACEMENT: PATTERN matches the start, * a run without /, \
            ${1} in REPLACEMENT is what the first * matched (repeatable; IMGPROXY_URL_REPLACEMENTS, \
            separated by ;).
            """)
    var urlReplacement: [String] = []

    @Flag(help: "Base64 sources may end with /FILENAME, which is left out (IMGPROXY_BASE64_URL_INCLUDES_FILENAME).")
    var base64URLIncludesFilename = false

    @Option(help: "The character between an option's name and arguments (IMGPROXY_ARGUMENTS_SEPARATOR) [default: :].")
    var argumentsSeparator: String?

    @Option(
        help: """
            An option URLs may use, by any of its names; others are refused with 404 (repeatable; \
            IMGPROXY_ALLOWED_PROCESSING_OPTIONS, comma-separated) [default: all].
            """)
    var allowedOption: [String] = []

    @Option(help: "The image processed in place of a source that cannot be fetched (IMGPROXY_FALLBACK_IMAGE_PATH).")
    var fallbackImagePath: String?

    @Option(help: "The same, as base64 (IMGPROXY_FALLBACK_IMAGE_DATA).")
    var fallbackImageData: String?

    @Option(help: "The status a fallback image is sent with; 0: the failure's (IMGPROXY_FALLBACK_IMAGE_HTTP_CODE).")
    var fallbackImageHttpCode: Int?

    @Option(
        help: "Seconds of max-age a fallback image is sent with; 0: as other results (IMGPROXY_FALLBACK_IMAGE_TTL).")
    var fallbackImageTtl: Int?

    @Option(help: "A secret requests must carry as Authorization: Bearer SECRET, else 403 (IMGPROXY_SECRET).")
    var secret: String?

    @Option(help: "The Access-Control-Allow-Origin of every answer (IMGPROXY_ALLOW_ORIGIN).")
    var allowOrigin: String?

    @Flag(
        help: """
            Pass the client's cookies on to sources on the host they were set for (IMGPROXY_COOKIE_PASSTHROUGH); \
            such requests skip every cache.
            """)
    var cookiePassthrough = false

    @Flag(help: "With --cookie-passthrough, pass them to every source (IMGPROXY_COOKIE_PASSTHROUGH_ALL).")
    var cookiePassthroughAll = false

    @Option(help: "The URL cookies count as set for, instead of the request's host (IMGPROXY_COOKIE_BASE_URL).")
    var cookieBaseURL: String?

    @Option(help: "The User-Agent of requests to sources (IMGPROXY_USER_AGENT) [default: imageloader].")
    var userAgent: String?

    @Option(help: "Redirects followed for a source (IMGPROXY_MAX_REDIRECTS) [default: 10].")
    var maxRedirects: Int?

    @Option(help: "Seconds a source's download may take, past it 504 (IMGPROXY_DOWNLOAD_TIMEOUT) [default: 5].")
    var downloadTimeout: Double?

    @Flag(help: "Errors as HTML pages naming their cause; for development (IMGPROXY_DEVELOPMENT_ERRORS_MODE).")
    var developmentErrors = false

    @Flag(help: "Allow sources on loopback addresses (IMGPROXY_ALLOW_LOOPBACK_SOURCE_ADDRESSES).")
    var allowLoopbackSourceAddresses = false

    @Flag(help: "Allow sources on link-local addresses (IMGPROXY_ALLOW_LINK_LOCAL_SOURCE_ADDRESSES).")
    var allowLinkLocalSourceAddresses = false

    @Flag(help: "Allow sources on private addresses (IMGPROXY_ALLOW_PRIVATE_SOURCE_ADDRESSES).")
    var allowPrivateSourceAddresses = false

    @Option(help: "Another path /health is answered on (IMGPROXY_HEALTH_CHECK_PATH).")
    var healthCheckPath: String?

    /// Sets what these options and their variables say on `configuration`, `rules` and
    /// `signature`; every value checked.
    func apply(
        to configuration: inout ImageService.Configuration, rules: inout URLRules,
        environment: ImgproxyEnvironment
    ) throws {
        func on(_ flag: Bool, _ name: String) throws -> Bool { try flag || environment.flag(name) == true }
        let preferred = try formats(preferredFormat, "--preferred-format", environment, "IMGPROXY_PREFERRED_FORMATS")
        if !preferred.isEmpty {
            configuration.preferredFormats = try preferred.map {
                guard let format = ResultFormat(name: $0) else {
                    throw ValidationError("--preferred-format: \($0) is not a format results are written in")
                }
                return format
            }
        }
        configuration.skipProcessingFormats = Set(
            try formats(
                skipProcessingFormat, "--skip-processing-format", environment, "IMGPROXY_SKIP_PROCESSING_FORMATS"
            )
            .map {
                guard let format = ImageFormat(imgproxyName: $0) else {
                    throw ValidationError("--skip-processing-format: \($0) is not an image format")
                }
                return format
            })
        configuration.enforceWebP = try on(enforceWebp, "IMGPROXY_ENFORCE_WEBP")
        configuration.enforceAVIF = try on(enforceAvif, "IMGPROXY_ENFORCE_AVIF")
        configuration.enforceJXL = try on(enforceJxl, "IMGPROXY_ENFORCE_JXL")
        configuration.autoHEIC = autoHeic
        configuration.enforceHEIC = enforceHeic
        configuration.alwaysRasterizeSVG = try on(alwaysRasterizeSvg, "IMGPROXY_ALWAYS_RASTERIZE_SVG")
        configuration.clientHints = try on(clientHints, "IMGPROXY_ENABLE_CLIENT_HINTS")
        configuration.cacheControlPassthrough = try on(cacheControlPassthrough, "IMGPROXY_CACHE_CONTROL_PASSTHROUGH")
        configuration.validators.entityTags = try etag ?? environment.flag("IMGPROXY_USE_ETAG") ?? true
        configuration.validators.entityTagBuster = etagBuster ?? environment.text("IMGPROXY_ETAG_BUSTER")
        configuration.validators.lastModified =
            try lastModified ?? environment.flag("IMGPROXY_USE_LAST_MODIFIED") ?? true
        if let text = lastModifiedBuster ?? environment.text("IMGPROXY_LAST_MODIFIED_BUSTER") {
            guard let date = ServeCompatibilityOptions.rfc3339(text) else {
                throw ValidationError("--last-modified-buster \(text) is not an RFC 3339 time (2026-01-31T00:00:00Z)")
            }
            configuration.validators.lastModifiedBuster = date
        }
        configuration.canonicalHeader = try on(canonicalHeader, "IMGPROXY_SET_CANONICAL_HEADER")
        configuration.debugHeaders = try on(debugHeaders, "IMGPROXY_ENABLE_DEBUG_HEADERS")
        configuration.developmentErrors = try on(developmentErrors, "IMGPROXY_DEVELOPMENT_ERRORS_MODE")
        configuration.secret = secret ?? environment.text("IMGPROXY_SECRET")
        configuration.allowOrigin = allowOrigin ?? environment.text("IMGPROXY_ALLOW_ORIGIN")

        let trusted = trustedSignature.isEmpty ? environment.list("IMGPROXY_TRUSTED_SIGNATURES") : trustedSignature
        if !trusted.isEmpty { configuration.signature?.trusted = Set(trusted) }
        rules.baseURL = baseURL ?? environment.text("IMGPROXY_BASE_URL")
        let replacements =
            urlReplacement.isEmpty ? environment.list("IMGPROXY_URL_REPLACEMENTS", separator: ";") : urlReplacement
        rules.urlReplacements = try replacements.map { entry in
            let parts = entry.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2,
                let replacement = URLRules.URLReplacement(
                    wildcard: String(parts[0]), template: String(parts[1]))
            else { throw ValidationError("--url-replacement \(entry) is not PATTERN=REPLACEMENT") }
            return replacement
        }
        rules.base64URLIncludesFilename = try on(base64URLIncludesFilename, "IMGPROXY_BASE64_URL_INCLUDES_FILENAME")
        if let separator = argumentsSeparator ?? environment.text("IMGPROXY_ARGUMENTS_SEPARATOR") {
            guard separator.count == 1, let character = separator.first, character != "/" else {
                throw ValidationError("--arguments-separator is one character, not /")
            }
            rules.argumentsSeparator = character
        }
        let allowed = allowedOption.isEmpty ? environment.list("IMGPROXY_ALLOWED_PROCESSING_OPTIONS") : allowedOption
        if !allowed.isEmpty { rules.allowedOptions = Set(allowed) }

        var fallbackBytes: [UInt8]?
        if let data = fallbackImageData ?? environment.text("IMGPROXY_FALLBACK_IMAGE_DATA") {
            guard let bytes = Data(base64Encoded: data, options: .ignoreUnknownCharacters) else {
                throw ValidationError("--fallback-image-data is not base64")
            }
            fallbackBytes = Array(bytes)
        } else if let path = fallbackImagePath ?? environment.text("IMGPROXY_FALLBACK_IMAGE_PATH") {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ValidationError("--fallback-image-path \(path) cannot be read")
            }
            fallbackBytes = Array(data)
        }
        let status =
            try environment.integer(
                fallbackImageHttpCode, "--fallback-image-http-code", "IMGPROXY_FALLBACK_IMAGE_HTTP_CODE", in: 0...599)
            ?? 0
        guard status == 0 || status >= 100 else {
            throw ValidationError("the fallback image's HTTP code is 0 (the error's own) or 100 to 599")
        }
        let ttl =
            try environment.integer(
                fallbackImageTtl, "--fallback-image-ttl", "IMGPROXY_FALLBACK_IMAGE_TTL", in: 0...Int.max)
            ?? 0
        if let bytes = fallbackBytes {
            guard (try? ImageDecoder().info(.bytes(bytes))) != nil else {
                throw ValidationError("the fallback image is not an image the service reads")
            }
            configuration.fallbackImage = ImageService.FallbackImage(
                bytes: bytes, status: status == 0 ? nil : status, ttl: ttl == 0 ? nil : ttl)
        }

        if try on(cookiePassthrough, "IMGPROXY_COOKIE_PASSTHROUGH") {
            if try on(cookiePassthroughAll, "IMGPROXY_COOKIE_PASSTHROUGH_ALL") {
                configuration.cookies = .all
            } else {
                let base = cookieBaseURL ?? environment.text("IMGPROXY_COOKIE_BASE_URL")
                guard base.map({ URL(string: $0)?.host != nil }) ?? true else {
                    throw ValidationError("--cookie-base-url must be a URL with a host")
                }
                configuration.cookies = .sameHost(baseURL: base.flatMap { URL(string: $0) })
            }
        }
        let agent = userAgent ?? environment.text("IMGPROXY_USER_AGENT") ?? "imageloader"
        configuration.loader.requestHeaders.removeAll { $0.hasName("User-Agent") }
        configuration.loader.requestHeaders.append(HeaderField("User-Agent", agent))
        let redirects =
            try environment.integer(maxRedirects, "--max-redirects", "IMGPROXY_MAX_REDIRECTS", in: 0...100) ?? 10
        configuration.loader.http.maxRedirects = redirects
        let download =
            try environment.decimal(
                downloadTimeout, "--download-timeout", "IMGPROXY_DOWNLOAD_TIMEOUT", in: 0.001...3600)
            ?? 5
        configuration.downloadTimeout = .milliseconds(Int(download * 1000))
        configuration.network.allowsLoopback = try on(
            allowLoopbackSourceAddresses, "IMGPROXY_ALLOW_LOOPBACK_SOURCE_ADDRESSES")
        configuration.network.allowsLinkLocal = try on(
            allowLinkLocalSourceAddresses, "IMGPROXY_ALLOW_LINK_LOCAL_SOURCE_ADDRESSES")
        configuration.network.allowsPrivate = try on(
            allowPrivateSourceAddresses, "IMGPROXY_ALLOW_PRIVATE_SOURCE_ADDRESSES")
    }

    /// Another path `/health` is answered on, checked.
    func healthPath(_ environment: ImgproxyEnvironment) throws -> String? {
        guard let path = healthCheckPath ?? environment.text("IMGPROXY_HEALTH_CHECK_PATH") else { return nil }
        guard path.hasPrefix("/"), path.count > 1 else {
            throw ValidationError("--health-check-path must start with /")
        }
        return path
    }

    /// Format names from the options, else the variable's list.
    private func formats(_ given: [String], _ option: String, _ environment: ImgproxyEnvironment, _ name: String)
        throws -> [String]
    {
        (given.isEmpty ? environment.list(name) : given.flatMap { $0.split(separator: ",").map(String.init) })
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty }
    }

    /// An RFC 3339 time (`2026-01-31T00:00:00Z`, with an offset or fractional seconds).
    static func rfc3339(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }
}
