import Foundation
import ImageLoaderSupport
import RasterImage

/// What a processing URL asks for: options, a source and an output format.
///
/// The URL format is a documented subset of imgproxy's, so its URL builders and
/// signing libraries work unchanged:
///
/// ```
/// /{signature}/{option}/{option}.../{base64url(source)}[.{extension}]
/// /{signature}/{option}/{option}.../plain/{percent-encoded source}[@{extension}]
/// ```
///
/// ```swift
/// let request = try ProcessingURL.parse(path, signature: signature, allowsUnsigned: false)
/// request.options.width       // 300
/// request.source              // .remote(https://example.com/cat.jpg)
/// ```
struct ProcessingURL: Sendable, Hashable {
    /// The options, in the order applied.
    var options: ProcessingOptions
    /// Where the image comes from.
    var source: Source
    /// The output format the URL names (its extension, or `f:`), if any.
    var format: ProcessingOptions.Format? { options.format }

    /// Where the image comes from.
    enum Source: Sendable, Hashable {
        /// An http or https URL, or an object in a store (`s3://bucket/key`,
        /// `gs://bucket/object`, `abs://container/blob`).
        case remote(URL)
        /// A `local:///path` source: a path under the service's local root.
        case local(path: String)
    }

    /// Why a URL cannot be served, with imgproxy's status for it: 404 for a URL that
    /// names nothing the service can make (malformed, an unknown or invalid option, a
    /// preset it does not have, an option the allowed list leaves out, expired), 403 for
    /// one it may not make (the signature, a security option not allowed).
    enum Failure: Error, Sendable, Hashable, CustomStringConvertible {
        /// No signature segment, no source, or an empty segment.
        case malformedPath
        /// An option the service does not know.
        case unknownOption(String)
        /// A known option with a value it cannot take.
        case invalidArgument(option: String, value: String)
        /// The source is not valid base64url, not a URL, or of a scheme not served.
        case invalidSource(String)
        /// The signature does not match (403).
        case badSignature
        /// `insecure` or `_` in place of a signature, and unsigned URLs are not allowed (403).
        case unsignedNotAllowed
        /// `pr` names a preset the service does not have.
        case unknownPreset(String)
        /// A security option (`msr`, `msfs`, `maf`, `mafr`, `mrd`) without `--allow-security-options` (403).
        case forbiddenOption(String)
        /// An option the allowed list (``URLRules/allowedOptions``) leaves out.
        case optionNotAllowed(String)
        /// `exp` is in the past.
        case expired
        /// A format imgproxy writes and this service does not (BMP, TIFF, HEIC, ICO, SVG): 422,
        /// as imgproxy answers a format it cannot save.
        case cannotWrite(String)

        /// The HTTP status the service answers with (imgproxy's).
        var status: Int {
            switch self {
            case .badSignature, .unsignedNotAllowed, .forbiddenOption: 403
            case .cannotWrite: 422
            default: 404
            }
        }

        /// The text the service answers with.
        var description: String {
            switch self {
            case .malformedPath: "malformed processing URL"
            case .unknownOption(let name): "unknown option \(name)"
            case .invalidArgument(let option, let value): "invalid value \(value) for option \(option)"
            case .invalidSource(let why): "invalid source: \(why)"
            case .badSignature: "invalid signature"
            case .unsignedNotAllowed: "unsigned URLs are not allowed"
            case .unknownPreset(let name): "unknown preset \(name)"
            case .forbiddenOption(let name): "option \(name) is not allowed"
            case .optionNotAllowed(let name): "forbidden processing option \(name)"
            case .expired: "expired URL"
            case .cannotWrite(let format): "results cannot be written as \(format)"
            }
        }
    }

    /// One option of a URL or a preset: its name and its arguments, as written.
    struct Option: Sendable, Hashable {
        var name: String
        var arguments: [String]
    }

    /// Parses `path` (the request's path after any prefix, percent-encoding as received),
    /// as imgproxy does: the signature segment first; then the rest repaired where
    /// proxies and CDNs change it (`%3A` for `:` in options, `scheme:/` for `scheme://` in
    /// a plain source); the signature is checked against that, under the pairs of
    /// `signature`. Without one and with `allowsUnsigned`, any text without `:` stands in
    /// for the signature (imgproxy's unsigned mode: `unsafe`, `insecure`, `_`); with one,
    /// `insecure` and `_` are accepted only when `allowsUnsigned`.
    static func parse(
        _ path: String, signature: URLSignature?, allowsUnsigned: Bool, rules: URLRules = URLRules(),
        starting: ProcessingOptions = ProcessingOptions()
    ) throws(Failure) -> ProcessingURL {
        var rest = Substring(path)
        if rest.hasPrefix("/") { rest = rest.dropFirst() }
        guard let slash = rest.firstIndex(of: "/") else { throw .malformedPath }
        let signatureText = rest[..<slash]
        let signed = repaired(rest[rest.index(after: slash)...])
        guard !signatureText.isEmpty, !signed.isEmpty else { throw .malformedPath }
        if let signature {
            let unsigned = signatureText == "insecure" || signatureText == "_"
            if unsigned {
                guard allowsUnsigned else { throw .unsignedNotAllowed }
            } else if !signature.isTrusted(signatureText) {
                guard signature.isValid(signatureText, for: "/" + signed) else { throw .badSignature }
            }
        } else {
            guard allowsUnsigned else { throw .unsignedNotAllowed }
            guard !signatureText.contains(":") else { throw .badSignature }
        }
        return try parseSigned(Substring(signed), rules: rules, starting: starting)
    }

    /// The path after the signature as imgproxy repairs it: `%3A` in the options part
    /// back to `:` (proxies and CDNs escape it), and in a plain source `scheme:/x` back
    /// to `scheme://x` (`local:/x` to `local:///x`: proxies merge the slashes).
    static func repaired(_ path: Substring) -> String {
        var options: Substring
        var plain: Substring?
        if path.hasPrefix("plain/") {
            options = ""
            plain = path.dropFirst("plain/".count)
        } else if let range = path.range(of: "/plain/") {
            options = path[..<range.lowerBound]
            plain = path[range.upperBound...]
        } else {
            options = path
        }
        let fixedOptions = options.replacingOccurrences(of: "%3A", with: ":")
        guard var source = plain.map(String.init) else {
            return fixedOptions.hasPrefix("/") ? String(fixedOptions.dropFirst()) : fixedOptions
        }
        // `scheme:/x`, the scheme free of spaces and x not a slash: the slash put back.
        if let colon = source.firstIndex(of: ":"), colon > source.startIndex,
            !source[..<colon].contains(where: \.isWhitespace)
        {
            let after = source.index(after: colon)
            if after < source.endIndex, source[after] == "/" {
                let next = source.index(after: after)
                if next < source.endIndex, source[next] != "/" {
                    let scheme = source[..<colon]
                    source = scheme + (scheme == "local" ? ":///" : "://") + source[next...]
                }
            }
        }
        let joined = fixedOptions + "/plain/" + source
        return joined.hasPrefix("/") ? String(joined.dropFirst()) : joined
    }

    /// Options alone (`/rs:fit:300:300/q:80`, the path of an upload), any extension as
    /// `f:`. Every segment must be an option.
    static func parseOptions(
        _ path: Substring, rules: URLRules = URLRules(), starting: ProcessingOptions = ProcessingOptions()
    ) throws(Failure) -> ProcessingOptions {
        var options = try defaults(rules, starting: starting)
        let segments = path.split(separator: "/")
        let (parsed, rest) = Self.options(in: segments, rules)
        guard rest.isEmpty else { throw .unknownOption(String(rest[0])) }
        try apply(parsed, to: &options, rules: rules)
        return options
    }

    /// The options every URL starts from: `starting` (the client hints'), then the
    /// `default` preset's, when there is one.
    private static func defaults(_ rules: URLRules, starting: ProcessingOptions = ProcessingOptions()) throws(Failure)
        -> ProcessingOptions
    {
        var options = starting
        if rules.presets["default"] != nil { try options.apply(name: "pr", ["default"], rules: rules) }
        return options
    }

    /// The leading segments that are options (a name and arguments, split by the
    /// separator), and the segments after them: the source. Segments are read as
    /// imgproxy reads them: the first without a separator ends the options.
    static func options(in segments: [some StringProtocol], _ rules: URLRules) -> ([Option], [Substring]) {
        var parsed: [Option] = []
        for (index, segment) in segments.enumerated() {
            let parts = segment.split(separator: rules.argumentsSeparator, omittingEmptySubsequences: false)
            guard parts.count > 1 else { return (parsed, segments[index...].map { Substring($0) }) }
            parsed.append(Option(name: String(parts[0]), arguments: parts[1...].map { String($0) }))
        }
        return (parsed, [])
    }

    /// Applies a URL's options, each allowed by ``URLRules/allowedOptions`` (a preset's
    /// own options are not checked).
    private static func apply(_ parsed: [Option], to options: inout ProcessingOptions, rules: URLRules) throws(Failure)
    {
        for option in parsed {
            if let allowed = rules.allowedOptions, !allowed.contains(option.name) {
                throw .optionNotAllowed(option.name)
            }
            try options.apply(name: option.name, option.arguments, rules: rules)
        }
    }

    /// The part after the signature: options (or, with only presets, a segment of
    /// preset names), then the source.
    static func parseSigned(_ signed: Substring, rules: URLRules, starting: ProcessingOptions = ProcessingOptions())
        throws(Failure) -> ProcessingURL
    {
        let segments = signed.split(separator: "/", omittingEmptySubsequences: false)
        guard let first = segments.first, !first.isEmpty else { throw .malformedPath }
        var options = try defaults(rules, starting: starting)
        let sourceSegments: [Substring]
        if rules.onlyPresets {
            let names = first.split(separator: rules.argumentsSeparator, omittingEmptySubsequences: false).map(
                String.init)
            try options.apply(name: "pr", names, rules: rules)
            sourceSegments = Array(segments.dropFirst())
        } else {
            // imgproxy's old basic format (`/fill/300/200/...`) is not served.
            guard ProcessingOptions.ResizingType(rawValue: String(first)) == nil else { throw .malformedPath }
            let (parsed, rest) = Self.options(in: segments, rules)
            try apply(parsed, to: &options, rules: rules)
            sourceSegments = rest
        }
        guard let head = sourceSegments.first else { throw .malformedPath }
        let (text, ext): (String, String?)
        if head == "plain" && sourceSegments.count > 1 {
            (text, ext) = try plainSource(sourceSegments[1...].joined(separator: "/"))
        } else {
            var parts = sourceSegments
            if parts.count > 1 && rules.base64URLIncludesFilename { parts.removeLast() }
            (text, ext) = try base64Source(parts.joined())
        }
        if let ext, !ext.isEmpty, !options.raw { try options.apply(name: "ext", [ext]) }
        return ProcessingURL(options: options, source: try source(rewritten(text, rules)))
    }

    /// A base64url source and the extension after its dot.
    private static func base64Source(_ encoded: String) throws(Failure) -> (String, String?) {
        let parts = encoded.split(separator: ".", omittingEmptySubsequences: false)
        guard let body = parts.first, !body.isEmpty else { throw .invalidSource("empty") }
        guard parts.count <= 2 else { throw .invalidSource("several formats") }
        var trimmed = Substring(body)
        while trimmed.hasSuffix("=") { trimmed = trimmed.dropLast() }
        guard let decoded = Base64URL.decode(trimmed), let text = String(validating: decoded, as: UTF8.self)
        else { throw .invalidSource("not base64url") }
        return (text, parts.count == 2 ? String(parts[1]) : nil)
    }

    /// A percent-encoded source and the extension after its `@`.
    private static func plainSource(_ rest: String) throws(Failure) -> (String, String?) {
        let parts = rest.split(separator: "@", omittingEmptySubsequences: false)
        guard let body = parts.first, !body.isEmpty else { throw .invalidSource("empty") }
        guard parts.count <= 2 else { throw .invalidSource("several formats") }
        guard let text = body.removingPercentEncoding else { throw .invalidSource("not percent-encoded") }
        return (text, parts.count == 2 ? String(parts[1]) : nil)
    }

    /// The source after the replacements, with the base URL in front unless it starts with it.
    private static func rewritten(_ text: String, _ rules: URLRules) -> String {
        var text = text
        for replacement in rules.urlReplacements { text = replacement.apply(text) }
        guard let base = rules.baseURL, !base.isEmpty, !text.hasPrefix(base) else { return text }
        return base + text
    }

    private static func source(_ text: String) throws(Failure) -> Source {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased() else {
            throw .invalidSource("not a URL")
        }
        switch scheme {
        case "http", "https":
            guard let host = url.host, !host.isEmpty else { throw .invalidSource("no host") }
            return .remote(url)
        case "s3", "gs", "abs":
            // The bucket is the host; an empty key is the store's 404, as imgproxy answers it.
            guard let bucket = url.host, !bucket.isEmpty else { throw .invalidSource("no bucket") }
            return .remote(url)
        case "local":
            guard url.host == nil || url.host == "" else { throw .invalidSource("local sources have no host") }
            let path = url.path.removingPercentEncoding ?? url.path
            guard !path.isEmpty else { throw .invalidSource("empty local path") }
            return .local(path: path)
        default:
            throw .invalidSource("scheme \(scheme) is not served")
        }
    }
}
