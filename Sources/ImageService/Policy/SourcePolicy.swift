import Foundation

/// Which sources a service fetches: `--allow-source` prefixes, and `local:///` paths only
/// under `--local-root`, never outside it (no `..`, no symbolic link leading out).
///
/// ```swift
/// let policy = SourcePolicy(allowedPrefixes: ["https://images.example.com/"], localRoot: "/srv/images")
/// let file = try policy.check(.local(path: "/cats/1.jpg"))     // .file("/srv/images/cats/1.jpg")
/// ```
public struct SourcePolicy: Sendable, Hashable {
    /// Sources must start with one of these (as text); empty: any http or https URL.
    /// A `*` in a prefix stands for any run of characters without a `/` (imgproxy's
    /// `IMGPROXY_ALLOWED_SOURCES`: `https://*.example.com/` allows every subdomain).
    public var allowedPrefixes: [String]
    /// The folder `local:///` paths are inside; `nil`: local sources are refused.
    public var localRoot: String?
    /// Per object storage scheme (`s3`, `gs`, `abs`), the only buckets served; a scheme
    /// not listed serves any (imgproxy's `IMGPROXY_S3_ALLOWED_BUCKETS`, ...).
    public var allowedBuckets: [String: Set<String>] = [:]
    /// Per scheme, buckets never served (imgproxy's `IMGPROXY_S3_DENIED_BUCKETS`, ...).
    public var deniedBuckets: [String: Set<String>] = [:]

    /// The object stores' schemes, with the `serve` option that enables each.
    package static let objectStorageSchemes = ["s3": "--use-s3", "gs": "--use-gcs", "abs": "--use-abs"]

    /// Sources starting with one of `allowedPrefixes` (any, when empty); `local:///` under `localRoot`.
    public init(allowedPrefixes: [String] = [], localRoot: String? = nil) {
        self.allowedPrefixes = allowedPrefixes
        self.localRoot = localRoot
    }

    /// What to fetch, once allowed.
    enum Allowed: Sendable, Hashable {
        case remote(URL)
        /// A file's real path, symbolic links resolved, inside the local root.
        case file(String)
    }

    /// Why a source is refused (403).
    public struct Forbidden: Error, Sendable, Hashable, CustomStringConvertible {
        /// Why, in one line.
        public let description: String
    }

    /// Checks `source` against the prefixes and, for a local path, the root.
    func check(_ source: ProcessingURL.Source) throws(Forbidden) -> Allowed {
        switch source {
        case .remote(let url):
            let text = url.absoluteString
            guard allows(text) else { throw Forbidden(description: "source not allowed") }
            if let scheme = url.scheme?.lowercased(), let bucket = url.host(percentEncoded: false) {
                if let allowed = allowedBuckets[scheme], !allowed.contains(bucket) {
                    throw Forbidden(description: "bucket not allowed")
                }
                if deniedBuckets[scheme]?.contains(bucket) == true {
                    throw Forbidden(description: "bucket not allowed")
                }
            }
            return .remote(url)
        case .local(let path):
            guard let localRoot else { throw Forbidden(description: "local sources are not served") }
            guard allows("local://" + path) else { throw Forbidden(description: "source not allowed") }
            let root = URL(fileURLWithPath: localRoot).standardizedFileURL.resolvingSymlinksInPath().path
            let joined = URL(fileURLWithPath: root + "/" + path).standardizedFileURL.resolvingSymlinksInPath().path
            guard joined.hasPrefix(root.hasSuffix("/") ? root : root + "/") else {
                throw Forbidden(description: "local path outside the root")
            }
            return .file(joined)
        }
    }

    /// Whether `text` starts with one of the prefixes (any, when there are none).
    func allows(_ text: String) -> Bool {
        allowedPrefixes.isEmpty || allowedPrefixes.contains { SourcePolicy.matches(prefix: $0, text[...]) }
    }

    /// Whether `text` starts with `prefix`, each `*` in it matching a run of characters
    /// other than `/` (the shortest that lets the rest match: a backtracking match over
    /// at most a few wildcards and a URL's length).
    static func matches(prefix: some StringProtocol, _ text: Substring) -> Bool {
        guard let star = prefix.firstIndex(of: "*") else { return text.hasPrefix(prefix) }
        let head = prefix[..<star]
        let rest = prefix[prefix.index(after: star)...]
        guard text.hasPrefix(head) else { return false }
        var position = text.index(text.startIndex, offsetBy: head.count)
        while true {
            if matches(prefix: rest, text[position...]) { return true }
            guard position < text.endIndex, text[position] != "/" else { return false }
            position = text.index(after: position)
        }
    }
}
