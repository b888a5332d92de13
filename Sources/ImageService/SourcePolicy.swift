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
    public var allowedPrefixes: [String]
    /// The folder `local:///` paths are inside; `nil`: local sources are refused.
    public var localRoot: String?

    /// Sources starting with one of `allowedPrefixes` (any, when empty); `local:///` under `localRoot`.
    public init(allowedPrefixes: [String] = [], localRoot: String? = nil) {
        self.allowedPrefixes = allowedPrefixes
        self.localRoot = localRoot
    }

    /// What to fetch, once allowed.
    public enum Allowed: Sendable, Hashable {
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
    public func check(_ source: ProcessingURL.Source) throws(Forbidden) -> Allowed {
        switch source {
        case .remote(let url):
            let text = url.absoluteString
            guard allowedPrefixes.isEmpty || allowedPrefixes.contains(where: { text.hasPrefix($0) }) else {
                throw Forbidden(description: "source not allowed")
            }
            return .remote(url)
        case .local(let path):
            guard let localRoot else { throw Forbidden(description: "local sources are not served") }
            let text = "local://" + path
            guard allowedPrefixes.isEmpty || allowedPrefixes.contains(where: { text.hasPrefix($0) }) else {
                throw Forbidden(description: "source not allowed")
            }
            let root = URL(fileURLWithPath: localRoot).standardizedFileURL.resolvingSymlinksInPath().path
            let joined = URL(fileURLWithPath: root + "/" + path).standardizedFileURL.resolvingSymlinksInPath().path
            guard joined.hasPrefix(root.hasSuffix("/") ? root : root + "/") else {
                throw Forbidden(description: "local path outside the root")
            }
            return .file(joined)
        }
    }
}
