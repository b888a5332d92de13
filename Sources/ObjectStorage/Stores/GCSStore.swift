import Crypto
import Foundation
import ImageLoader
import ImageLoaderSupport
import Logging

struct GCSStore: ObjectStore {
    let endpoint: String
    let tokens: GoogleTokenProvider?
    let http: any DataLoading

    init(_ configuration: GCSConfiguration, http: any DataLoading, metadata: any DataLoading) throws(ImageLoadingError)
    {
        var text = configuration.endpoint?.absoluteString ?? "https://storage.googleapis.com"
        while text.hasSuffix("/") { text.removeLast() }
        // imgproxy's form names the API's path (`.../storage/v1/`): the paths below add it.
        if text.hasSuffix("/storage/v1") { text.removeLast("/storage/v1".count) }
        endpoint = text
        self.http = http
        let environment = configuration.environment ?? ProcessInfo.processInfo.environment
        if let key = configuration.serviceAccountKey, !key.isEmpty {
            tokens = try GoogleTokenProvider(json: key, http: http)
        } else if configuration.endpoint != nil {
            tokens = nil  // an emulator, or public buckets through a proxy
        } else if let path = environment["GOOGLE_APPLICATION_CREDENTIALS"], !path.isEmpty {
            guard let key = try? String(contentsOfFile: path, encoding: .utf8) else {
                throw ImageLoadingError(
                    .credentials("GOOGLE_APPLICATION_CREDENTIALS names a file that cannot be read"), url: "gs://")
            }
            tokens = try GoogleTokenProvider(json: key, http: http)
        } else {
            let host = environment["GCE_METADATA_HOST"].flatMap { $0.isEmpty ? nil : $0 } ?? "metadata.google.internal"
            tokens = GoogleTokenProvider(metadataHost: host, http: metadata)
        }
    }

    private func objectURL(_ object: ObjectLocation, media: Bool) throws -> URL {
        var query: [(name: String, value: String)] = media ? [("alt", "media")] : []
        if let version = object.version { query.append(("generation", version)) }
        let text =
            endpoint + "/storage/v1/b/" + SignatureV4.encode(object.bucket, keepsSlash: false) + "/o/"
            + SignatureV4.encode(object.key, keepsSlash: false)
            + (query.isEmpty ? "" : "?" + SignatureV4.canonicalQuery(query))
        guard let url = URL(string: text) else {
            throw ImageLoadingError(.unsupportedURL, url: "gs://\(object.bucket)/")
        }
        return url
    }

    private func authorized(_ request: DataRequest) async throws -> DataRequest {
        guard let tokens else { return request }
        var request = request
        request.headers.append(HeaderField("Authorization", "Bearer " + (try await tokens.token())))
        return request
    }

    func read(_ object: ObjectLocation, headers: [HeaderField]) async throws -> DataRequest {
        try await authorized(DataRequest(url: try objectURL(object, media: true), headers: headers))
    }

    func write(_ object: ObjectLocation, body: [UInt8], contentType: String, metadata: [String: String]) async throws
        -> DataRequest
    {
        // A multipart upload: the object's metadata (its content type and ours) and its bytes in one request.
        let boundary = "imageloader-" + Hex.lowercase(Array(SHA256.hash(data: body)).prefix(8).map { $0 })
        struct Resource: Encodable {
            var name: String
            var contentType: String
            var metadata: [String: String]
        }
        let resource = GoogleTokenProvider.json(
            Resource(name: object.key, contentType: contentType, metadata: metadata))
        var payload = Array(
            ("--\(boundary)\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n\(resource)\r\n--\(boundary)\r\n"
                + "Content-Type: \(contentType)\r\n\r\n").utf8)
        payload += body
        payload += Array("\r\n--\(boundary)--\r\n".utf8)
        let text =
            endpoint + "/upload/storage/v1/b/" + SignatureV4.encode(object.bucket, keepsSlash: false)
            + "/o?uploadType=multipart"
        guard let url = URL(string: text) else {
            throw ImageLoadingError(.unsupportedURL, url: "gs://\(object.bucket)/")
        }
        var request = DataRequest(
            url: url, headers: [HeaderField("Content-Type", "multipart/related; boundary=\(boundary)")])
        request.method = "POST"
        request.body = payload
        return try await authorized(request)
    }

    func metadataName(_ name: String) -> String { "x-goog-meta-" + name }

    /// The object's generation is its version: the entity tag the cache keeps is it,
    /// which the object's metadata (a small JSON answer) confirms without the bytes.
    func normalized(_ response: DataResponse) -> DataResponse {
        guard response.status == 200, let generation = response.value("X-Goog-Generation") else { return response }
        var response = response
        response.headers.removeAll { $0.hasName("ETag") }
        response.headers.append(HeaderField("ETag", "\"\(generation)\""))
        return response
    }

    private struct Metadata: Decodable {
        var generation: String?
        var updated: String?
        var metadata: [String: String]?
    }

    func notModified(_ object: ObjectLocation, headers: [HeaderField], http: any DataLoading) async throws
        -> DataResponse?
    {
        let tag = headers.first(named: "If-None-Match")
        let since = headers.first(named: "If-Modified-Since").flatMap(HTTPDate.parse)
        guard tag != nil || since != nil else { return nil }
        let requestTime = Date()
        let response = try await http.load(
            try await authorized(DataRequest(url: try objectURL(object, media: false)))
        ) { _, _ in }
        guard response.status == 200,
            let metadata = try? JSONDecoder().decode(Metadata.self, from: Data(response.body)),
            let generation = metadata.generation
        else { return nil }
        let updated = metadata.updated.flatMap(HTTPDate.parseISO8601)
        let unchanged: Bool
        if let tag {
            unchanged = tag.split(separator: ",").contains {
                $0.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "W/", with: "") == "\"\(generation)\""
            }
        } else if let since, let updated {
            unchanged = updated.timeIntervalSince1970.rounded(.down) <= since.timeIntervalSince1970
        } else {
            unchanged = false
        }
        guard unchanged else { return nil }
        var fields = [HeaderField("ETag", "\"\(generation)\"")]
        if let updated { fields.append(HeaderField("Last-Modified", HTTPDate.format(updated))) }
        return DataResponse(
            url: response.url, status: 304, headers: fields, body: [], requestTime: requestTime, responseTime: Date())
    }
}
