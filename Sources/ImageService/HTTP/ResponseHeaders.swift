import Foundation
import HTTPTypes
import ImageLoader
import ImageLoaderSupport

extension ImageService {
    /// The validators results carry, as imgproxy sends them: the source's own `ETag`
    /// and `Last-Modified`, passed on. A client's `If-None-Match` and
    /// `If-Modified-Since` are answered with a 304 when they match the source's, and are
    /// passed on to an origin the service has nothing stored from, so a 304 costs no
    /// download.
    ///
    /// ```swift
    /// var validators = ImageService.Validators()
    /// validators.entityTagBuster = "v2"   // every ETag sent changes: caches fetch again
    /// ```
    public struct Validators: Sendable, Hashable {
        /// Send the source's `ETag` and answer `If-None-Match` (imgproxy's `IMGPROXY_USE_ETAG`).
        public var entityTags = true
        /// Text that every `ETag` sent is made from with the source's, so changing it
        /// changes them all (imgproxy's `IMGPROXY_ETAG_BUSTER`): `"{buster}/{base64url of
        /// the source's tag}"`. A tag without the current buster matches nothing.
        public var entityTagBuster: String?
        /// Send the source's `Last-Modified` and answer `If-Modified-Since` (imgproxy's
        /// `IMGPROXY_USE_LAST_MODIFIED`).
        public var lastModified = true
        /// A time no `Last-Modified` sent is older than, and before which no
        /// `If-Modified-Since` is answered with a 304 (imgproxy's `IMGPROXY_LAST_MODIFIED_BUSTER`).
        public var lastModifiedBuster: Date?

        /// Both validators, no busters.
        public init() {}

        /// The `ETag` sent for a source whose own is `source`.
        func entityTag(source: String?) -> String? {
            guard entityTags, let source, !source.isEmpty else { return nil }
            guard let buster = entityTagBuster, !buster.isEmpty else { return source }
            return "\"" + buster + "/" + Base64URL.encode(Array(source.utf8)) + "\""
        }

        /// The `Last-Modified` sent for a source whose own is `source`: never before the buster.
        func lastModified(source: String?) -> String? {
            guard lastModified, let source, let date = HTTPDate.parse(source) else { return nil }
            if let buster = lastModifiedBuster, date < buster { return HTTPDate.format(buster) }
            return source
        }

        /// A request's conditions, in the source's terms: the tag it names with the buster
        /// taken off (a tag without the current buster, or a request with one, asks
        /// nothing: the answer is the whole image), and `If-Modified-Since` when it is
        /// after the buster.
        func conditions(ifNoneMatch: String?, ifModifiedSince: String?) -> Conditions {
            var conditions = Conditions()
            if entityTags, let ifNoneMatch, !ifNoneMatch.isEmpty {
                if let buster = entityTagBuster, !buster.isEmpty {
                    var tag = Substring(ifNoneMatch.trimmingCharacters(in: .whitespaces))
                    if tag.hasPrefix("W/") { tag = tag.dropFirst(2) }
                    tag = tag.drop { $0 == "\"" }
                    while tag.hasSuffix("\"") { tag = tag.dropLast() }
                    guard tag.hasPrefix(buster + "/"),
                        let decoded = Base64URL.decode(tag.dropFirst(buster.count + 1)),
                        let source = String(validating: decoded, as: UTF8.self)
                    else { return Conditions() }
                    conditions.ifNoneMatch = source
                } else {
                    conditions.ifNoneMatch = ifNoneMatch
                }
            }
            if lastModified, let ifModifiedSince, !ifModifiedSince.isEmpty {
                if let buster = lastModifiedBuster {
                    if let since = HTTPDate.parse(ifModifiedSince), since > buster {
                        conditions.ifModifiedSince = ifModifiedSince
                    }
                } else {
                    conditions.ifModifiedSince = ifModifiedSince
                }
            }
            return conditions
        }
    }

    /// An image processed in place of a source that cannot be fetched (imgproxy's
    /// fallback image), with the options of the request.
    public struct FallbackImage: Sendable, Hashable {
        /// The image's bytes, in any format the service reads.
        public var bytes: [UInt8]
        /// The status it is sent with; `nil`: the failure's own (404 for a missing
        /// source), as imgproxy's `IMGPROXY_FALLBACK_IMAGE_HTTP_CODE` of 0.
        public var status: Int?
        /// Seconds of `max-age` it is sent with (`IMGPROXY_FALLBACK_IMAGE_TTL`); `nil`:
        /// as other results.
        public var ttl: Int?

        /// A fallback image sent with the failure's status.
        public init(bytes: [UInt8], status: Int? = nil, ttl: Int? = nil) {
            self.bytes = bytes
            self.status = status
            self.ttl = ttl
        }
    }

    /// Which of a client's cookies go on to sources (imgproxy's `IMGPROXY_COOKIE_PASSTHROUGH`,
    /// `IMGPROXY_COOKIE_PASSTHROUGH_ALL`, `IMGPROXY_COOKIE_BASE_URL`).
    public enum CookiePassthrough: Sendable, Hashable {
        /// None (the default).
        case none
        /// To sources on the host the cookies were set for: `baseURL`'s, else the one
        /// the client asked (`X-Forwarded-Host`, else `Host`), as a browser sends
        /// host-only cookies.
        case sameHost(baseURL: URL?)
        /// To every source.
        case all

        /// The `Cookie` field for a request to `source`, from the client's request.
        /// `authority` is the request's `Host` (HTTP/2's `:authority`).
        func cookie(for source: URL, request headers: HTTPFields, authority: String?) -> String? {
            guard let cookie = headers[.cookie], !cookie.isEmpty else { return nil }
            switch self {
            case .none: return nil
            case .all: return cookie
            case .sameHost(let baseURL):
                let host =
                    baseURL?.host ?? headers[HTTPField.Name("X-Forwarded-Host")!]?.split(separator: ",").first.map {
                        String($0)
                    } ?? authority
                guard let host, let sourceHost = source.host else { return nil }
                return Self.withoutPort(host) == sourceHost.lowercased() ? cookie : nil
            }
        }

        private static func withoutPort(_ host: String) -> String {
            let trimmed = host.trimmingCharacters(in: .whitespaces).lowercased()
            if trimmed.hasPrefix("["), let end = trimmed.firstIndex(of: "]") {
                return String(trimmed[trimmed.index(after: trimmed.startIndex)..<end])
            }
            if let colon = trimmed.lastIndex(of: ":"), trimmed.firstIndex(of: ":") == colon {
                return String(trimmed[..<colon])
            }
            return trimmed
        }
    }
}

/// How long clients and caches downstream may keep a result, by imgproxy's rules:
/// a URL's `exp` caps the TTL; else the source's own `Cache-Control` or `Expires` when
/// passed through; else the TTL; `no-cache` when that is 0.
indirect enum ClientCaching: Sendable, Hashable, Codable {
    /// `max-age` of the seconds left until a time, at most `cap`; once it has passed,
    /// the rule `otherwise`.
    case until(Date, cap: Int, otherwise: ClientCaching)
    /// The source's own `Cache-Control`.
    case verbatim(String)
    /// `max-age=N, public`, or `no-cache` for 0.
    case maxAge(Int)
    /// The source's own `Cache-Control`, its `max-age` and `s-maxage` less the time since
    /// `since` (when the source's response was as old as 0: its `Age`, and the time its
    /// copy has been kept, already counted).
    case aged(String, since: Date)

    /// The `Cache-Control` value at `now`.
    func value(at now: Date) -> String {
        switch self {
        case .verbatim(let text): return text
        case .maxAge(let seconds): return seconds > 0 ? "max-age=\(seconds), public" : "no-cache"
        case .aged(let text, let since):
            // Clamped before it becomes a whole number: the source's max-age may be any size.
            let elapsed = Int(max(0, min(Double(Int32.max), now.timeIntervalSince(since))).rounded(.down))
            return ClientCaching.lessAge(text, elapsed)
        case .until(let date, let cap, let otherwise):
            let left = date.timeIntervalSince(now)
            let seconds = left >= Double(Int.max) ? cap : min(cap, max(0, Int(left.rounded(.down))))
            return seconds > 0 ? "max-age=\(seconds), public" : otherwise.value(at: now)
        }
    }
}

extension ClientCaching {
    /// `text` with the seconds of each `max-age` and `s-maxage` directive lowered by
    /// `age` (at least 0); the other directives as they are.
    static func lessAge(_ text: String, _ age: Int) -> String {
        text.split(separator: ",", omittingEmptySubsequences: false).map { part in
            let directive = part.trimmingCharacters(in: .whitespaces)
            let pieces = directive.split(separator: "=", maxSplits: 1).map { String($0) }
            guard pieces.count == 2, ["max-age", "s-maxage"].contains(pieces[0].lowercased()),
                let seconds = Int(pieces[1].trimmingCharacters(in: CharacterSet(charactersIn: "\"")))
            else { return directive }
            let (left, overflow) = seconds.subtractingReportingOverflow(max(0, age))
            return "\(pieces[0])=\(overflow ? 0 : max(0, left))"
        }.joined(separator: ", ")
    }
}

/// What the headers of a processed image say, known before it is made.
struct ResponseMeta: Sendable {
    /// The status: 200, or a fallback image's.
    var status = 200
    var contentType: String
    /// The source's validators, which conditional requests are compared with.
    var sourceTag: String?
    var sourceLastModified: String?
    /// The `ETag` and `Last-Modified` sent (``ImageService/Validators``).
    var entityTag: String?
    var lastModified: String?
    /// The `Vary` value, when the answer depends on request header fields.
    var vary: String?
    /// Until when the result cache may keep it.
    var keepUntil: Date
    /// `Cache-Control`.
    var caching: ClientCaching
    /// `Content-Disposition`, when the URL asks for a file name or an attachment.
    var contentDisposition: String?
    /// More fields: `Link` (canonical), the debug fields, `Accept-Ranges`.
    var extra: HTTPFields = [:]
    /// Where the answer came from, for the access log's `cache` field: the source's
    /// `network`, `disk`, `revalidated` or `local`; `storage` (the result bucket);
    /// `result` (the result cache).
    var cache = "network"
}

/// The request's conditional header fields, in the source's terms (``ImageService/Validators``).
struct Conditions: Hashable, Sendable {
    var ifNoneMatch: String?
    var ifModifiedSince: String?

    var isEmpty: Bool { ifNoneMatch == nil && ifModifiedSince == nil }

    /// The fields that pass the conditions on to an origin.
    var fields: [HeaderField] {
        [
            ifNoneMatch.map { HeaderField("If-None-Match", $0) },
            ifModifiedSince.map { HeaderField("If-Modified-Since", $0) },
        ]
        .compactMap { $0 }
    }

    /// Whether a response with `meta` is "not modified" for these conditions.
    func matches(_ meta: ResponseMeta) -> Bool {
        matches(entityTag: meta.sourceTag, lastModified: meta.sourceLastModified)
    }

    /// Whether a source with this entity tag and `Last-Modified` is "not modified":
    /// `If-None-Match` when both it and the tag are there (compared weakly, as RFC
    /// 9110 says for GET), else `If-Modified-Since` when both it and the date are.
    func matches(entityTag: String?, lastModified: String?) -> Bool {
        if let ifNoneMatch, let entityTag { return ResponseRules.matches(ifNoneMatch: ifNoneMatch, tag: entityTag) }
        guard let ifModifiedSince, let since = HTTPDate.parse(ifModifiedSince),
            let modified = lastModified.flatMap(HTTPDate.parse)
        else { return false }
        return modified <= since
    }
}
