import Crypto
import Foundation
import RasterImage

/// How the service answers: the output format, and the validators a cache keys on.
public enum ResponseRules {
    /// The output format of a processed image: the one the URL names; else, from the
    /// request's `Accept` (types listed with a non-zero quality), JPEG XL when `autoJXL`
    /// is on and it lists `image/jxl`, AVIF when `autoAVIF` is on and it lists
    /// `image/avif`, WebP when it lists `image/webp`; else PNG when the image has alpha,
    /// JPEG otherwise. `variesByAccept` is true when `Accept` decided it, and the response
    /// must then say `Vary: Accept`.
    ///
    /// ```swift
    /// let (format, vary) = ResponseRules.format(
    ///     requested: nil, accept: "image/avif,image/webp,*/*", hasAlpha: false, autoAVIF: true)
    /// // (.avif, true)
    /// ```
    public static func format(
        requested: ProcessingOptions.Format?, accept: String?, hasAlpha: Bool, autoAVIF: Bool = false,
        autoJXL: Bool = false
    ) -> (format: ProcessingOptions.Format, variesByAccept: Bool) {
        if let requested { return (requested, false) }
        if let accept, let automatic = automaticFormat(accept: accept, autoAVIF: autoAVIF, autoJXL: autoJXL) {
            return (automatic, true)
        }
        return (hasAlpha ? .png : .jpeg, true)
    }

    /// The format `Accept` chooses, before the image is known: JPEG XL, AVIF (each when
    /// turned on) or WebP, or `nil` when it lists none of them.
    static func automaticFormat(accept: String, autoAVIF: Bool, autoJXL: Bool) -> ProcessingOptions.Format? {
        if autoJXL && accepts("image/jxl", in: accept) { return .jxl }
        if autoAVIF && accepts("image/avif", in: accept) { return .avif }
        if accepts("image/webp", in: accept) { return .webp }
        return nil
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

    /// A strong entity tag for a processed image: the source's identity (its URL and
    /// validator, `ETag` or `Last-Modified`, or a digest of its bytes), the options and
    /// the output format. Equal tags, equal bytes: a 304 can be answered without
    /// processing.
    public static func entityTag(
        source: String, validator: String, options: ProcessingOptions, format: ProcessingOptions.Format
    )
        -> String
    {
        var hash = SHA256()
        for part in [source, validator, options.canonical, format.rawValue] {
            hash.update(data: Array(part.utf8))
            hash.update(data: [0])  // a separator no part contains
        }
        let digest = hash.finalize().prefix(16)
        return "\"" + digest.map { String(format: "%02x", $0) }.joined() + "\""
    }

    /// Whether an `If-None-Match` value matches `tag` (`*`, or any listed tag, compared
    /// weakly as RFC 9110 says for GET).
    public static func matches(ifNoneMatch header: String, tag: String) -> Bool {
        let wanted = tag.hasPrefix("W/") ? String(tag.dropFirst(2)) : tag
        for candidate in header.split(separator: ",") {
            let trimmed = candidate.trimmingCharacters(in: .whitespaces)
            if trimmed == "*" { return true }
            let opaque = trimmed.hasPrefix("W/") ? String(trimmed.dropFirst(2)) : trimmed
            if opaque == wanted { return true }
        }
        return false
    }
}

extension ProcessingOptions.Format {
    /// The media type of the format.
    public var contentType: String {
        switch self {
        case .jpeg: "image/jpeg"
        case .png: "image/png"
        case .webp: "image/webp"
        case .avif: "image/avif"
        case .jxl: "image/jxl"
        }
    }
}

extension ProcessingOptions {
    /// Every field, in one fixed order: equal texts, equal options.
    var canonical: String {
        [
            resizingType.rawValue, String(width), String(height), enlarge ? "1" : "0", gravity.rawValue,
            quality.map(String.init) ?? "-", format?.rawValue ?? "-", String(dpr),
        ].joined(separator: ":")
    }
}
