import Foundation
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
public struct ProcessingURL: Sendable, Hashable {
    /// The options, in the order applied.
    public var options: ProcessingOptions
    /// Where the image comes from.
    public var source: Source
    /// The output format the URL names (its extension, or `f:`), if any.
    public var format: ProcessingOptions.Format? { options.format }

    /// Where the image comes from.
    public enum Source: Sendable, Hashable {
        /// An http or https URL.
        case remote(URL)
        /// A `local:///path` source: a path under the service's local root.
        case local(path: String)
    }

    /// Why a URL cannot be served: a 400 or a 403.
    public enum Failure: Error, Sendable, Hashable, CustomStringConvertible {
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
        /// `exp` is in the past (404, as imgproxy).
        case expired

        /// The HTTP status the service answers with.
        public var status: Int {
            switch self {
            case .badSignature, .unsignedNotAllowed, .forbiddenOption: 403
            case .expired: 404
            default: 400
            }
        }

        /// The text the service answers with.
        public var description: String {
            switch self {
            case .malformedPath: "malformed processing URL"
            case .unknownOption(let name): "unknown option \(name)"
            case .invalidArgument(let option, let value): "invalid value \(value) for option \(option)"
            case .invalidSource(let why): "invalid source: \(why)"
            case .badSignature: "invalid signature"
            case .unsignedNotAllowed: "unsigned URLs are not allowed"
            case .unknownPreset(let name): "unknown preset \(name)"
            case .forbiddenOption(let name): "option \(name) is not allowed"
            case .expired: "expired URL"
            }
        }
    }

    /// What a service allows in URLs beyond the options themselves: presets, security
    /// options, and the clock `expires` is judged by.
    ///
    /// ```swift
    /// var rules = ProcessingURL.Rules()
    /// try rules.addPreset("thumb=rs:fill:300:300/q:70")
    /// let url = try ProcessingURL.parse("/_/pr:thumb/plain/https://example.com/a.jpg", signature: nil,
    ///                                   allowsUnsigned: true, rules: rules)
    /// ```
    public struct Rules: Sendable {
        /// Presets by name: their option segments (`rs:fill:300:300`), applied where `pr` names
        /// them. The `default` preset is applied to every URL before its own options.
        public private(set) var presets: [String: [String]] = [:]
        /// Only presets may be named: the option segments of a URL are preset names
        /// (imgproxy's `IMGPROXY_ONLY_PRESETS`); `pr:` segments are accepted too.
        public var onlyPresets = false
        /// Serve the security options (`msr`, `msfs`, `maf`, `mafr`, `mrd`); each can only
        /// lower the service's own limit.
        public var allowsSecurityOptions = false
        /// The time `exp` is compared with.
        public var now: @Sendable () -> Date = { Date() }
        /// Parsing an `/info` URL: its own options (`bh`) are accepted.
        var forInfo = false

        public init() {}

        /// Adds `NAME=OPTIONS` (options separated by `/`, as in a URL), checking every option.
        public mutating func addPreset(_ definition: String) throws(Failure) {
            guard let equals = definition.firstIndex(of: "="), equals != definition.startIndex else {
                throw .invalidArgument(option: "preset", value: definition)
            }
            let name = String(definition[..<equals]).trimmingCharacters(in: .whitespaces)
            let segments = definition[definition.index(after: equals)...].split(separator: "/").map {
                $0.trimmingCharacters(in: .whitespaces)
            }.filter { !$0.isEmpty }
            presets[name] = segments
            var check = ProcessingOptions()
            for segment in segments { try check.apply(Substring(segment), rules: self) }
        }
    }

    /// Parses `path` (the request's path, percent-encoding as received). The signature is
    /// checked first, against the path after the signature segment exactly as received;
    /// `insecure` or `_` is accepted only when `allowsUnsigned`.
    public static func parse(
        _ path: String, signature: URLSignature?, allowsUnsigned: Bool, rules: Rules = Rules()
    ) throws(Failure) -> ProcessingURL {
        let bytes = path.utf8
        guard bytes.first == UInt8(ascii: "/"),
            let slash = bytes.dropFirst().firstIndex(of: UInt8(ascii: "/"))
        else { throw .malformedPath }
        let signatureText = path[path.index(after: path.startIndex)..<slash]
        let signed = path[slash...]
        if signatureText == "insecure" || signatureText == "_" {
            guard allowsUnsigned else { throw .unsignedNotAllowed }
        } else {
            guard let signature, signature.isValid(signatureText, for: signed) else { throw .badSignature }
        }
        return try parseSigned(signed, rules: rules)
    }

    /// Options alone (`/rs:fit:300:300/q:80`, the path of an upload), any extension as
    /// `f:`. Every segment must be an option.
    public static func parseOptions(_ path: Substring, rules: Rules = Rules()) throws(Failure) -> ProcessingOptions {
        var options = try defaults(rules)
        for segment in path.split(separator: "/") {
            try apply(segment, to: &options, rules: rules)
        }
        return options
    }

    /// The options every URL starts from: the `default` preset's, when there is one.
    private static func defaults(_ rules: Rules) throws(Failure) -> ProcessingOptions {
        var options = ProcessingOptions()
        if rules.presets["default"] != nil { try options.apply(name: "pr", ["default"], rules: rules) }
        return options
    }

    /// One option segment; with only presets, a bare name is a preset's.
    private static func apply(_ segment: Substring, to options: inout ProcessingOptions, rules: Rules)
        throws(Failure)
    {
        if rules.onlyPresets {
            if segment.hasPrefix("pr:") || segment.hasPrefix("preset:") {
                try options.apply(segment, rules: rules)
            } else {
                try options.apply(name: "pr", [String(segment)], rules: rules)
            }
            return
        }
        guard segment.contains(":") else { throw .unknownOption(String(segment)) }
        try options.apply(segment, rules: rules)
    }

    /// The part after the signature: options, then the source.
    static func parseSigned(_ signed: Substring, rules: Rules) throws(Failure) -> ProcessingURL {
        let segments = signed.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
        var options = try defaults(rules)
        var index = 0
        while index < segments.count {
            let segment = segments[index]
            if segment == "plain" {
                let rest = segments[(index + 1)...].joined(separator: "/")
                return try plainSource(rest, options: options)
            }
            // With only presets, every segment but the last (the source) names presets.
            if rules.onlyPresets {
                guard index < segments.count - 1, !segment.isEmpty else { break }
            } else {
                guard segment.contains(":") else { break }
            }
            try apply(segment, to: &options, rules: rules)
            index += 1
        }
        guard index < segments.count else { throw .malformedPath }
        // The encoded source may be split by slashes; the extension follows the last dot.
        var encoded = segments[index...].joined()
        if let dot = encoded.lastIndex(of: ".") {
            let ext = String(encoded[encoded.index(after: dot)...])
            encoded = String(encoded[..<dot])
            try options.apply(name: "ext", [ext])
        }
        guard !encoded.isEmpty, let decoded = URLSignature.decodeBase64URL(encoded),
            let text = String(validating: decoded, as: UTF8.self)
        else { throw .invalidSource("not base64url") }
        return ProcessingURL(options: options, source: try source(text))
    }

    private static func plainSource(_ rest: String, options: ProcessingOptions) throws(Failure) -> ProcessingURL {
        var options = options
        var encoded = Substring(rest)
        if let at = rest.lastIndex(of: "@") {
            try options.apply(name: "ext", [String(rest[rest.index(after: at)...])])
            encoded = rest[..<at]
        }
        guard !encoded.isEmpty, let text = encoded.removingPercentEncoding else {
            throw .invalidSource("not percent-encoded")
        }
        return ProcessingURL(options: options, source: try source(text))
    }

    private static func source(_ text: String) throws(Failure) -> Source {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased() else {
            throw .invalidSource("not a URL")
        }
        switch scheme {
        case "http", "https":
            guard let host = url.host, !host.isEmpty else { throw .invalidSource("no host") }
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
