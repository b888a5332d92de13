import Crypto
import Foundation
import RasterImage

/// How the service answers: the output format, and the validators a cache keys on.
enum ResponseRules {
    /// The output format of a processed image, as imgproxy decides it
    /// (`determineOutputFormat`): with a format in the URL, that one, unless the client
    /// takes a format the service enforces (JPEG XL, then AVIF, then HEIC, for stills;
    /// WebP). Without, the client's preferred JPEG XL, then AVIF, then HEIC (stills
    /// only), then WebP; else
    /// the source's format when it is among `preferred`; else the first of `preferred`
    /// that holds the animation and the transparency the result has; else the first.
    ///
    /// ```swift
    /// ResponseRules.outputFormat(
    ///     requested: nil, features: ClientFeatures(), source: .gif, animated: true,
    ///     expectsTransparency: false, preferred: [.jpeg, .png, .gif])
    /// // .gif
    /// ```
    static func outputFormat(
        requested: ProcessingOptions.Format?, features: ClientFeatures, source: ImageFormat?, animated: Bool,
        expectsTransparency: Bool, preferred: [ProcessingOptions.Format]
    ) -> ProcessingOptions.Format {
        let chosen = requested == nil ? features.prefers : features.enforces
        if !animated && chosen.contains(.jxl) { return .jxl }
        if !animated && chosen.contains(.avif) { return .avif }
        if !animated && chosen.contains(.heic) { return .heic }
        if chosen.contains(.webp) { return .webp }
        if let requested { return requested }
        // An SVG source is rasterised here (it is passed through before this is asked).
        if let own = source.flatMap(ProcessingOptions.Format.init), own != .svg, preferred.contains(own) { return own }
        let writable = preferred.filter { $0 != .svg }
        return writable.first { (!animated || $0.keepsAnimation) && (!expectsTransparency || $0.hasAlpha) }
            ?? writable.first ?? .jpeg
    }

    /// Whether an `Accept` value lists `type` with a quality above 0. A wildcard
    /// (`*/*`, `image/*`) does not count: browsers without the format send those too.
    static func accepts(_ wanted: String, in accept: String) -> Bool {
        for entry in accept.split(separator: ",") {
            let parts = entry.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            guard let type = parts.first, type.lowercased() == wanted else { continue }
            var quality = 1.0
            for parameter in parts.dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                if pair.count == 2, pair[0].lowercased() == "q", let value = Double(pair[1]) { quality = value }
            }
            if quality > 0 { return true }
        }
        return false
    }

    /// Whether an `If-None-Match` value matches `tag` (`*`, or any listed tag, compared
    /// weakly as RFC 9110 says for GET).
    static func matches(ifNoneMatch header: String, tag: String) -> Bool {
        // Compared without `W/` and quotes, as imgproxy compares them: an origin's
        // unquoted tag matches its quoted form.
        func opaque(_ text: some StringProtocol) -> Substring {
            var value = Substring(text.trimmingCharacters(in: .whitespaces))
            if value.hasPrefix("W/") { value = value.dropFirst(2) }
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = value.dropFirst().dropLast() }
            return value
        }
        let wanted = opaque(tag)
        for candidate in header.split(separator: ",") {
            if candidate.trimmingCharacters(in: .whitespaces) == "*" { return true }
            if opaque(candidate) == wanted { return true }
        }
        return false
    }
}

extension ProcessingOptions.Format {
    /// The source format of the same kind, whose ``ImageFormat/traits`` say the rest.
    var imageFormat: ImageFormat {
        switch self {
        case .jpeg: .jpeg
        case .png: .png
        case .webp: .webp
        case .avif: .avif
        case .jxl: .jxl
        case .gif: .gif
        case .heic: .heif
        case .ico: .ico
        case .bmp: .bmp
        case .tiff: .tiff
        case .svg: .svg
        }
    }

    /// The media type of the format.
    var contentType: String { imageFormat.contentType }

    /// The longest side a result in this format can have; larger results are scaled
    /// down to it, as imgproxy's `fixSize` does (WebP 16383, HEIC 16384, ICO 256).
    var maxSide: Int { imageFormat.traits.maxWrittenSide }

    /// Whether results in this format keep an animated source's frames.
    var keepsAnimation: Bool { imageFormat.traits.writesAnimation }

    /// Whether results in this format keep transparency.
    var hasAlpha: Bool { imageFormat.traits.writesAlpha }

    /// The output format of a source format (every source format has one: SVG's is
    /// the sanitised pass-through).
    init?(_ format: ImageFormat) {
        guard let named = Self.allCases.first(where: { $0.imageFormat == format }) else { return nil }
        self = named
    }

    /// The file name extension.
    var fileExtension: String { imageFormat.fileExtension }
}

extension ResponseRules {
    /// The `Content-Disposition` of a result, as imgproxy sends one with every result:
    /// `inline` (or `attachment` with `att`), the name the URL gives (`fn`), else the
    /// last part of the source's path (`image` when it has none), with the result's
    /// extension. In the quoted form a quote becomes `%22` (imgproxy's) and backslashes
    /// and control characters `_`; a name beyond ASCII is also given percent-encoded as
    /// `filename*` (RFC 6266).
    ///
    /// ```swift
    /// ResponseRules.contentDisposition(filename: "café", source: "https://a.example/x.png", format: .webp, attachment: true)
    /// // attachment; filename="caf_.webp"; filename*=UTF-8''caf%C3%A9.webp
    /// ```
    static func contentDisposition(
        filename: String?, source: String, format: ProcessingOptions.Format?, attachment: Bool
    ) -> String {
        contentDisposition(
            filename: filename, source: source, fileExtension: format?.fileExtension, attachment: attachment)
    }

    /// The same with the extension given as text (a source passed through, whatever its format).
    static func contentDisposition(
        filename: String?, source: String, fileExtension: String?, attachment: Bool
    ) -> String {
        var name = filename ?? ""
        if name.isEmpty {
            let path = URLComponents(string: source)?.path ?? source
            // The part after the last slash: none (a path ending in /) gives "image".
            name = path.hasSuffix("/") ? "" : path.split(separator: "/").last.map(String.init) ?? ""
            if fileExtension != nil, let dot = name.lastIndex(of: "."), dot != name.startIndex {
                name = String(name[..<dot])
            }
        }
        if name.isEmpty { name = "image" }
        if let fileExtension { name += "." + fileExtension }
        let plain = String(
            String.UnicodeScalarView(
                name.unicodeScalars.prefix(200).map { scalar in
                    scalar.isASCII && scalar.value >= 0x20 && scalar.value != 0x7f && scalar != "\\" ? scalar : "_"
                })
        ).replacingOccurrences(of: "\"", with: "%22")
        var value = (attachment ? "attachment" : "inline") + "; filename=\"" + plain + "\""
        if !name.unicodeScalars.allSatisfy({ $0.isASCII }) {
            let unreserved = CharacterSet(charactersIn: "!#$&+-.^_`|~").union(.alphanumerics).subtracting(
                CharacterSet(charactersIn: Unicode.Scalar(0x80)!...Unicode.Scalar(0x10FFFF)!))
            let encoded = String(name.prefix(200)).addingPercentEncoding(withAllowedCharacters: unreserved) ?? plain
            value += "; filename*=UTF-8''" + encoded
        }
        return value
    }
}

extension ImageFormat {
    /// The usual file name extension of the format (`jpg`, `heic`, `tiff`).
    var fileExtension: String {
        switch self {
        case .jpeg: "jpg"
        case .heif: "heic"
        default: rawValue
        }
    }
}
