import Foundation
import ImageLoaderSupport

/// Builds an imgproxy processing URL from Swift, signed or not: the inverse of what
/// the service reads. A web application that renders `<img>` tags for a deployment of
/// `imageloader serve` (or of imgproxy itself) makes its URLs with it.
///
/// Options are written in the order they are added, each as imgproxy's
/// `name:argument:argument`; the source is base64url without padding (imgproxy's
/// encoded form) or, with ``SourceEncoding/plain``, percent-encoded after `/plain/`.
/// The URLs equal those the `imgproxy` package from PyPI makes from the same options
/// in the same order (the tests compare them).
///
/// ```swift
/// let signature = try URLSignature(hexPairs: [(key: keyHex, salt: saltHex)])
/// let path = ImgproxyURL(source: "https://example.com/photos/cat.jpg", format: "webp")
///     .gravity("ce")
///     .resize("fill", width: 300, height: 200)
///     .signed(with: signature)
/// // "/U4oKpEcr.../g:ce/rs:fill:300:200:0/aHR0cHM6Ly9leGFtcGxlLmNvbS9waG90b3MvY2F0LmpwZw.webp"
/// ```
public struct ImgproxyURL: Sendable, Hashable {
    /// How the source URL is written.
    public enum SourceEncoding: Sendable, Hashable {
        /// base64url without padding, the extension after a dot (imgproxy's default).
        case base64
        /// `/plain/` and the source percent-encoded, the extension after an `@`.
        case plain
    }

    /// One processing option: its name (`rs`, `q`, `wm`...) and its arguments.
    public struct Option: Sendable, Hashable {
        public var name: String
        public var arguments: [String]

        /// The option `name:arguments...`.
        public init(_ name: String, _ arguments: [String]) {
            self.name = name
            self.arguments = arguments
        }
    }

    /// The source: `https://...`, `local:///...`, `s3://bucket/key`, ...
    public var source: String
    /// The result's format (`webp`, `jpg`, `png`...), or `nil` to let the service choose.
    public var format: String?
    /// The options, in the order they are written.
    public var options: [Option] = []
    /// How the source is written.
    public var sourceEncoding: SourceEncoding = .base64

    /// A URL for `source`, in `format` when given, with no options yet.
    public init(source: String, format: String? = nil, sourceEncoding: SourceEncoding = .base64) {
        self.source = source
        self.format = format
        self.sourceEncoding = sourceEncoding
    }

    /// This URL with the option `name:arguments...` added (any option the service reads:
    /// `.option("bl", "1.5")`, `.option("wm", "0.5", "soea", "5", "5", "0.2")`).
    public func option(_ name: String, _ arguments: String...) -> ImgproxyURL {
        var url = self
        url.options.append(Option(name, arguments))
        return url
    }

    /// `rs:TYPE:WIDTH:HEIGHT:ENLARGE` (`fit`, `fill`, `fill-down`, `force`, `auto`; a side
    /// of 0 follows the other).
    public func resize(_ type: String, width: Int, height: Int, enlarge: Bool = false) -> ImgproxyURL {
        option("rs", type, String(width), String(height), enlarge ? "1" : "0")
    }

    /// `g:TYPE[:ARGUMENTS]` (`ce`, `sm`, `nowe`, `fp:0.3:0.7`, `ea:10:0.1`...).
    public func gravity(_ type: String, _ arguments: String...) -> ImgproxyURL {
        var url = self
        url.options.append(Option("g", [type] + arguments))
        return url
    }

    /// `q:QUALITY` (1 to 100; 0 for the service's default).
    public func quality(_ quality: Int) -> ImgproxyURL { option("q", String(quality)) }

    /// The path without a signature: `/OPTIONS.../SOURCE`.
    public var path: String {
        var path = ""
        for option in options {
            path += "/" + ([option.name] + option.arguments).joined(separator: ":")
        }
        switch sourceEncoding {
        case .base64:
            path += "/" + Base64URL.encode(Array(source.utf8))
            if let format { path += "." + format }
        case .plain:
            path += "/plain/" + ImgproxyURL.percentEncoded(source)
            if let format { path += "@" + format }
        }
        return path
    }

    /// The path signed with the first key and salt of `signature`: `/SIGNATURE/OPTIONS.../SOURCE`.
    public func signed(with signature: URLSignature) -> String {
        let path = self.path
        return "/" + signature.sign(path) + path
    }

    /// The path for a service that takes unsigned URLs: `/insecure/OPTIONS.../SOURCE`.
    public var unsigned: String { "/insecure" + path }

    /// The source with what would end or split the path escaped: `%`, `?`, `#`, `@` and
    /// spaces, as imgproxy's plain sources expect.
    static func percentEncoded(_ source: String) -> String {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "?#@%")
        return source.addingPercentEncoding(withAllowedCharacters: allowed) ?? source
    }
}
