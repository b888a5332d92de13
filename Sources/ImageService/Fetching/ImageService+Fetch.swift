import CoreMetrics
import Crypto
import Foundation
import HTTPTypes
import ImageLoader
import ImageLoaderSupport
import Logging
import RasterImage
import ServiceLifecycle

extension ImageService {
    /// The source's bytes and their validators. A remote source goes through the
    /// loader, with the client's conditions (for an origin the loader has nothing
    /// stored from: ``ImageLoadingError/Reason/notModified(headers:)`` when it answers
    /// 304) and, when passed on, its cookies (neither from nor into the caches).
    func fetch(_ allowed: SourcePolicy.Allowed, conditions: Conditions, cookie: String?) async throws
        -> SourceData
    {
        switch allowed {
        case .remote(let url):
            if let scheme = url.scheme?.lowercased(), let flag = SourcePolicy.objectStorageSchemes[scheme],
                !configuration.objectStorage.schemes.contains(scheme)
            {
                throw ServiceError(status: 404, "\(scheme):// sources are not enabled (imageloader serve \(flag))")
            }
            var options = LoadOptions()
            options.clientValidators = conditions.fields
            if let cookie {
                options.headers = [HeaderField("Cookie", cookie)]
                options.bypassesCache = true
            }
            let data = try await loader.data(for: url, options: options)
            let tier =
                switch data.source {
                case .disk: "disk"
                case .memory: "memory"
                case .networkNotModified: "revalidated"
                default: "network"
                }
            return SourceData(
                bytes: data.bytes, contentType: data.value("Content-Type"), entityTag: data.value("ETag"),
                lastModified: data.value("Last-Modified"), freshFor: data.freshFor, tier: tier,
                cacheControl: data.value("Cache-Control"), expires: data.value("Expires"))
        case .file(let path):
            let maxBytes = configuration.maxSourceBytes
            let read = try await fileReads.run {
                () -> Result<(FileStatus, [UInt8]), ServiceError> in
                guard let status = FileSystem.status(path) else {
                    return .failure(ServiceError.missingSource())
                }
                guard status.size <= maxBytes else {
                    return .failure(ServiceError.sourceTooLarge(bytes: maxBytes))
                }
                guard let bytes = FileSystem.readRegularFile(path, maxBytes: maxBytes) else {
                    return .failure(ServiceError.missingSource())
                }
                return .success((status, bytes))
            }
            let (status, bytes) = try read.get()
            return SourceData(
                bytes: bytes, contentType: nil, entityTag: SourceData.fileTag(path: path, status),
                lastModified: HTTPDate.format(Date(timeIntervalSince1970: TimeInterval(status.modifiedSeconds))),
                freshFor: nil, tier: "local")
        }
    }
}

/// A source as fetched.
struct SourceData: Sendable {
    let bytes: [UInt8]
    let contentType: String?
    /// The source's `ETag` (for a local file: a digest of its path, size and time, as imgproxy makes it).
    let entityTag: String?
    let lastModified: String?
    let freshFor: TimeInterval?
    /// Where it came from, for the hit metrics.
    let tier: String
    /// The origin's `Cache-Control` and `Expires`, for ``ImageService/Configuration/cacheControlPassthrough``.
    var cacheControl: String? = nil
    var expires: String? = nil

    /// A local file's entity tag: the SHA-256 of its path, size and modification time
    /// in nanoseconds, in quoted base64url.
    static func fileTag(path: String, _ status: FileStatus) -> String {
        let nanoseconds = Checked.saturatingAdd(
            Checked.saturatingMultiply(status.modifiedSeconds, 1_000_000_000), status.modifiedNanoseconds)
        let digest = SHA256.hash(data: Array("\(path)__\(status.size)__\(nanoseconds)".utf8))
        return "\"" + Base64URL.encode(Array(digest)) + "\""
    }
}

extension SourcePolicy.Allowed {
    /// The source as text, for keys and tags.
    var text: String {
        switch self {
        case .remote(let url): url.absoluteString
        case .file(let path): "local://" + path
        }
    }
}
