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

        /// The HTTP status the service answers with.
        public var status: Int {
            switch self {
            case .badSignature, .unsignedNotAllowed: 403
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
            }
        }
    }

    /// Parses `path` (the request's path, percent-encoding as received). The signature is
    /// checked first, against the path after the signature segment exactly as received;
    /// `insecure` or `_` is accepted only when `allowsUnsigned`.
    public static func parse(_ path: String, signature: URLSignature?, allowsUnsigned: Bool) throws(Failure)
        -> ProcessingURL
    {
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
        return try parseSigned(signed)
    }

    /// Options alone (`/rs:fit:300:300/q:80`, the path of an upload), any extension as
    /// `f:`. Every segment must be an option.
    public static func parseOptions(_ path: Substring) throws(Failure) -> ProcessingOptions {
        var options = ProcessingOptions()
        for segment in path.split(separator: "/") {
            guard segment.contains(":") else { throw .unknownOption(String(segment)) }
            try options.apply(segment)
        }
        return options
    }

    /// The part after the signature: options, then the source.
    static func parseSigned(_ signed: Substring) throws(Failure) -> ProcessingURL {
        let segments = signed.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
        var options = ProcessingOptions()
        var index = 0
        while index < segments.count {
            let segment = segments[index]
            if segment == "plain" {
                let rest = segments[(index + 1)...].joined(separator: "/")
                return try plainSource(rest, options: options)
            }
            guard segment.contains(":") else { break }
            try options.apply(segment)
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

/// The processing options of a URL, by imgproxy's names (short and long).
///
/// | option | arguments |
/// |---|---|
/// | `rs`, `resize` | `{type}:{width}:{height}:{enlarge}:{extend}` (each may be empty) |
/// | `s`, `size` | `{width}:{height}:{enlarge}:{extend}` |
/// | `rt`, `resizing_type` | `fit`, `fill`, `fill-down`, `force`, `auto` |
/// | `w`, `width` / `h`, `height` | pixels; 0 follows the other side |
/// | `g`, `gravity` | `ce`, `no`, `so`, `ea`, `we`, `noea`, `nowe`, `soea`, `sowe`, `sm` (as `ce`); offsets of 0 only |
/// | `q`, `quality` | 1 to 100 (0: the default) |
/// | `f`, `format`, `ext` | `jpg`, `jpeg`, `png`, `webp` |
/// | `dpr` | 0.1 to 8 |
/// | `el`, `enlarge` | `1`, `t`, `true`, `0`, `f`, `false` |
/// | `ex`, `extend` | `0`, `f`, `false` only: results are never padded to the box |
public struct ProcessingOptions: Sendable, Hashable {
    /// How the image meets the box.
    public enum ResizingType: String, Sendable, Hashable, CaseIterable {
        case fit, fill
        case fillDown = "fill-down"
        case force, auto
    }

    /// Where a crop keeps the image (`sm`, smart, is taken as the centre).
    public enum Gravity: String, Sendable, Hashable, CaseIterable {
        case center = "ce"
        case north = "no"
        case south = "so"
        case east = "ea"
        case west = "we"
        case northEast = "noea"
        case northWest = "nowe"
        case southEast = "soea"
        case southWest = "sowe"
        case smart = "sm"
    }

    /// An output format a URL can name.
    public enum Format: String, Sendable, Hashable {
        case jpeg, png, webp, avif, jxl
    }

    /// How the image meets the box (`fit` by default).
    public var resizingType = ResizingType.fit
    /// Pixels; 0 means "follow the other side" (both 0: the source's size).
    public var width = 0
    /// Pixels; 0 means "follow the other side".
    public var height = 0
    /// Whether a source smaller than the box is enlarged.
    public var enlarge = false
    /// What a `fill` crop keeps.
    public var gravity = Gravity.center
    /// 1 to 100; `nil` for the service's default.
    public var quality: Int?
    /// The output format the URL names, if any.
    public var format: Format?
    /// Device pixel ratio: the box is multiplied by it.
    public var dpr = 1.0

    /// The largest width or height a URL may ask for before the service's own limit.
    static let maxSide = 100_000

    /// The defaults: fit, no box, no enlargement, centre gravity, the service's quality and format.
    public init() {}

    mutating func apply(_ segment: Substring) throws(ProcessingURL.Failure) {
        let parts = segment.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        try apply(name: parts[0], Array(parts.dropFirst()))
    }

    mutating func apply(name: String, _ arguments: [String]) throws(ProcessingURL.Failure) {
        func argument(_ index: Int) -> String? {
            index < arguments.count && !arguments[index].isEmpty ? arguments[index] : nil
        }
        func limit(_ count: Int) throws(ProcessingURL.Failure) {
            guard arguments.count <= count, !arguments.isEmpty else {
                throw .invalidArgument(option: name, value: arguments.joined(separator: ":"))
            }
        }
        // An extend argument (imgproxy's padding to the box) is accepted when it asks for none.
        func noExtend(_ index: Int) throws(ProcessingURL.Failure) {
            guard let extend = argument(index) else { return }
            guard try !flag(extend, name) else {
                throw .invalidArgument(option: name, value: arguments.joined(separator: ":"))
            }
        }
        switch name {
        case "rs", "resize":
            try limit(5)
            if let type = argument(0) { resizingType = try parse(type, name) }
            if let width = argument(1) { self.width = try pixels(width, name) }
            if let height = argument(2) { self.height = try pixels(height, name) }
            if let enlarge = argument(3) { self.enlarge = try flag(enlarge, name) }
            try noExtend(4)
        case "s", "size":
            try limit(4)
            if let width = argument(0) { self.width = try pixels(width, name) }
            if let height = argument(1) { self.height = try pixels(height, name) }
            if let enlarge = argument(2) { self.enlarge = try flag(enlarge, name) }
            try noExtend(3)
        case "ex", "extend":
            try limit(1)
            try noExtend(0)
        case "rt", "resizing_type":
            try limit(1)
            resizingType = try parse(arguments[0], name)
        case "w", "width":
            try limit(1)
            width = try pixels(arguments[0], name)
        case "h", "height":
            try limit(1)
            height = try pixels(arguments[0], name)
        case "g", "gravity":
            // Offsets shift imgproxy's crop; none (0, or left out) is all that is served.
            try limit(3)
            gravity = try parse(arguments[0], name)
            for index in 1..<3 {
                guard let offset = argument(index) else { continue }
                guard offset.utf8.count <= 16, let value = Double(offset), value == 0 else {
                    throw .invalidArgument(option: name, value: arguments.joined(separator: ":"))
                }
            }
        case "q", "quality":
            try limit(1)
            let value = try number(arguments[0], name, max: 100)
            quality = value == 0 ? nil : value
        case "f", "format", "ext":
            try limit(1)
            switch arguments[0].lowercased() {
            case "jpg", "jpeg": format = .jpeg
            case "png": format = .png
            case "webp": format = .webp
            case "avif": format = .avif
            case "jxl": format = .jxl
            default: throw .invalidArgument(option: name, value: arguments[0])
            }
        case "dpr":
            try limit(1)
            guard arguments[0].utf8.count <= 8, let value = Double(arguments[0]), value >= 0.1, value <= 8 else {
                throw .invalidArgument(option: name, value: arguments[0])
            }
            dpr = value
        case "el", "enlarge":
            try limit(1)
            enlarge = try flag(arguments[0], name)
        default:
            throw .unknownOption(name)
        }
    }

    private func parse<T: RawRepresentable<String>>(_ text: String, _ option: String) throws(ProcessingURL.Failure)
        -> T
    {
        guard let value = T(rawValue: text) else { throw .invalidArgument(option: option, value: text) }
        return value
    }

    private func pixels(_ text: String, _ option: String) throws(ProcessingURL.Failure) -> Int {
        try number(text, option, max: ProcessingOptions.maxSide)
    }

    /// A decimal number of digits only, at most `max`: no sign, no spaces, no overflow.
    private func number(_ text: String, _ option: String, max: Int) throws(ProcessingURL.Failure) -> Int {
        guard !text.isEmpty, text.utf8.count <= 9, text.utf8.allSatisfy({ (48...57).contains($0) }),
            let value = Int(text), value <= max
        else { throw .invalidArgument(option: option, value: text) }
        return value
    }

    private func flag(_ text: String, _ option: String) throws(ProcessingURL.Failure) -> Bool {
        switch text {
        case "1", "t", "true": return true
        case "0", "f", "false": return false
        default: throw .invalidArgument(option: option, value: text)
        }
    }
}
