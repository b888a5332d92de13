import Foundation
import ImageLoader

/// An object in a store, as `s3://bucket/key?version`, `gs://bucket/object?generation`
/// or `abs://container/blob` names it.
struct ObjectLocation: Sendable, Hashable {
    let scheme: String
    let bucket: String
    /// The key, decoded, without the leading `/`.
    let key: String
    /// An object version (S3 `versionId`, GCS generation), from the query.
    let version: String?

    /// The object `url` names; `nil` when it names no bucket or no key (imgproxy's 404),
    /// or a key with `.` or `..` segments.
    init?(_ url: URL) {
        guard let scheme = url.scheme?.lowercased(), let bucket = url.host(percentEncoded: false), !bucket.isEmpty
        else { return nil }
        var key = url.path(percentEncoded: false)
        if key.hasPrefix("/") { key.removeFirst() }
        guard !key.isEmpty else { return nil }
        // `.` and `..` segments (written plainly or percent-encoded) are refused: a store,
        // or a proxy before it, that resolves them would read outside the bucket the URL
        // names (and the allowed-source patterns checked).
        guard !key.split(separator: "/", omittingEmptySubsequences: false).contains(where: { $0 == "." || $0 == ".." })
        else { return nil }
        self.scheme = scheme
        self.bucket = bucket
        self.key = key
        // `?versionId=ID` (S3's own name) or imgproxy's bare `?ID`.
        if let query = url.query(percentEncoded: false), !query.isEmpty {
            let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
            version =
                items.first { $0.name == "versionId" || $0.name == "generation" }?.value ?? query
        } else {
            version = nil
        }
    }
}
