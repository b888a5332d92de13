import Foundation
import HTTPTypes
import ImageLoader
import ImageLoaderSupport
import Logging
import NIOCore
import ObjectStorage

/// Processed results kept in a bucket (`s3://bucket/prefix`, `gs://...`, `abs://...`)
/// that every instance of a cluster names: an instance looks a result up there before
/// processing, and puts what it processes there afterwards, without making the answer
/// wait. A stored result carries the header fields it was first sent with, and is used
/// while the service would have kept it in its own result cache (its source's freshness,
/// the URL's `exp`). Any failure of the store is logged and costs only the processing.
struct ResultStorage: Sendable {
    /// The bucket and the key prefix, as the `serve` option names them.
    let location: URL
    let stores: ObjectStorageDataLoader
    let logger: Logger

    /// The object a request's result is kept in: the prefix, then the SHA-256 of the
    /// request path and the client features it was made for (two levels of folders).
    func objectURL(for key: ResultCacheKey) -> URL {
        URL(string: ResultStorage.objectName(prefix: location.absoluteString, key: key)) ?? location
    }

    /// The object's URL as text, under `prefix`.
    static func objectName(prefix: String, key: ResultCacheKey) -> String {
        var text = prefix
        while text.hasSuffix("/") { text.removeLast() }
        let features = key.features
        let identity = [
            key.path, features.prefers.map(\.rawValue).sorted().joined(separator: ","),
            features.enforces.map(\.rawValue).sorted().joined(separator: ","),
            features.dpr.map { "\($0)" } ?? "", features.width.map { "\($0)" } ?? "",
        ].joined(separator: "\n")
        let digest = ImageLoader.digest(of: Array(identity.utf8))
        return text + "/\(digest.prefix(2))/\(digest.dropFirst(2).prefix(2))/\(digest)"
    }

    /// The stored result for `key`, when there is one still usable at `now`.
    func read(_ key: ResultCacheKey, now: Date) async -> ProcessedResult? {
        let url = objectURL(for: key)
        do {
            guard let (body, _) = try await stores.storedObject(at: url) else { return nil }
            guard let result = StoredResult.decode(body) else {
                logger.warning("stored result unreadable, processed again", metadata: ["object": "\(url)"])
                return nil
            }
            return result.meta.keepUntil > now ? result : nil
        } catch {
            logger.warning("result storage read failed", metadata: ["object": "\(url)", "error": "\(error)"])
            return nil
        }
    }

    /// Puts `result` in the bucket under `key`, in the background.
    func write(_ result: ProcessedResult, for key: ResultCacheKey, done: @escaping @Sendable (Bool) -> Void) {
        let url = objectURL(for: key)
        let logger = self.logger
        stores.storeObjectInBackground(
            at: url, bytes: StoredResult.encode(result), contentType: "application/vnd.imageloader.result"
        ) { error in
            if let error {
                logger.warning("result storage write failed", metadata: ["object": "\(url)", "error": "\(error)"])
            }
            done(error == nil)
        }
    }
}

/// The stored form of a result: a ``ChecksummedEnvelope`` with the magic `ILR2`, the
/// header as JSON for its metadata and the image's bytes for its body (an object cut
/// short or changed in the bucket is no result). Objects of the earlier, unchecked form
/// (`ILR1`) are not read: their results are made again and stored anew.
enum StoredResult {
    static let magic = Array("ILR2".utf8)
    /// The most header bytes read: a result's fields are a few hundred.
    static let maxHeaderBytes = 64 << 10

    struct Header: Codable {
        var status: Int
        var contentType: String
        var sourceTag: String?
        var sourceLastModified: String?
        var entityTag: String?
        var lastModified: String?
        var vary: String?
        var keepUntil: Double
        var caching: ClientCaching
        var contentDisposition: String?
        var extra: [[String]]
        /// The image's bytes after the header: an object cut short is no result.
        var bodyLength: Int
    }

    static func encode(_ result: ProcessedResult) -> [UInt8] {
        let meta = result.meta
        let header = Header(
            status: meta.status, contentType: meta.contentType, sourceTag: meta.sourceTag,
            sourceLastModified: meta.sourceLastModified, entityTag: meta.entityTag, lastModified: meta.lastModified,
            vary: meta.vary, keepUntil: meta.keepUntil.timeIntervalSince1970, caching: meta.caching,
            contentDisposition: meta.contentDisposition, extra: meta.extra.map { [$0.name.rawName, $0.value] },
            bodyLength: result.body.readableBytes)
        let json = Array((try? JSONEncoder().encode(header)) ?? Data())
        return ChecksummedEnvelope.encode(magic: magic, metadata: json, body: result.body.readableBytesView)
    }

    /// The result `bytes` hold; `nil` for anything that is not one (a damaged or foreign object).
    static func decode(_ bytes: [UInt8]) -> ProcessedResult? {
        guard case .valid(let json, let body) = ChecksummedEnvelope.decode(bytes, magic: magic),
            json.count <= maxHeaderBytes,
            let header = try? JSONDecoder().decode(Header.self, from: Data(json)),
            (200..<600).contains(header.status), header.keepUntil.isFinite, header.bodyLength == body.count
        else { return nil }
        var extra = HTTPFields()
        for pair in header.extra {
            guard pair.count == 2, let name = HTTPField.Name(pair[0]) else { return nil }
            extra.append(HTTPField(name: name, value: pair[1]))
        }
        let meta = ResponseMeta(
            status: header.status, contentType: header.contentType, sourceTag: header.sourceTag,
            sourceLastModified: header.sourceLastModified, entityTag: header.entityTag,
            lastModified: header.lastModified, vary: header.vary,
            keepUntil: Date(timeIntervalSince1970: header.keepUntil), caching: header.caching,
            contentDisposition: header.contentDisposition, extra: extra)
        return ProcessedResult(bytes: body, meta: meta)
    }
}
