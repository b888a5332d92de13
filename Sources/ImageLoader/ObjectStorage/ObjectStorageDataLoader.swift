import Crypto
import Foundation
import ImageLoaderSupport
import Logging

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

/// One kind of store: how a read or a write of an object becomes a signed HTTP request.
protocol ObjectStore: Sendable {
    /// The request that reads `object` with `headers` (validators, User-Agent), signed.
    func read(_ object: ObjectLocation, headers: [HeaderField]) async throws -> DataRequest
    /// The request that writes `body` to `object`, signed.
    func write(_ object: ObjectLocation, body: [UInt8], contentType: String, metadata: [String: String]) async throws
        -> DataRequest
    /// The answer to a read as the cache should see it (a store's own fields named as HTTP's).
    func normalized(_ response: DataResponse) -> DataResponse
    /// A 304 made here when the store cannot answer one itself but can say cheaply
    /// whether the object changed; `nil` to send the read.
    func notModified(_ object: ObjectLocation, headers: [HeaderField], http: any DataLoading) async throws
        -> DataResponse?
    /// A stored object's metadata entry, as the write sent it and the read returns it.
    func metadataName(_ name: String) -> String
}

extension ObjectStore {
    func normalized(_ response: DataResponse) -> DataResponse { response }
    func notModified(_ object: ObjectLocation, headers: [HeaderField], http: any DataLoading) async throws
        -> DataResponse?
    { nil }
}

/// Loads `s3://`, `gs://` and `abs://` URLs from the stores configured, and hands every
/// other URL to the loader it wraps. Reads are HTTP requests to the store's endpoint,
/// signed as they leave (so the cache above keys, stores and revalidates them by the
/// object's URL and never sees a credential), through an HTTP client of their own:
/// the store is the operator's choice, so the address filter for sources does not apply.
final class ObjectStorageDataLoader: DataLoading {
    let fallback: any DataLoading
    let http: HTTPDataLoader
    /// Short timeouts, for the credential endpoints (instance metadata is not there
    /// off EC2: its absence must cost a second at most).
    let metadata: HTTPDataLoader
    let stores: [String: any ObjectStore]
    let logger: Logger

    init(
        configuration: ObjectStorageConfiguration, http settings: HTTPDataLoader.Configuration,
        fallback: any DataLoading, logger: Logger
    ) throws(ImageLoadingError) {
        var settings = settings
        settings.addressFilter = nil
        settings.credentials = nil
        http = HTTPDataLoader(configuration: settings, logger: logger)
        var quick = settings
        quick.connectTimeout = .seconds(1)
        quick.readTimeout = .seconds(2)
        quick.timeout = .seconds(3)
        quick.maxResponseBytes = 64 << 10
        metadata = HTTPDataLoader(configuration: quick, logger: logger)
        self.fallback = fallback
        self.logger = logger
        var stores: [String: any ObjectStore] = [:]
        if let s3 = configuration.s3 {
            stores["s3"] = S3Store(
                s3, credentials: AWSCredentialProvider(source: s3.credentials, metadata: metadata, logger: logger))
        }
        if let gcs = configuration.gcs { stores["gs"] = try GCSStore(gcs, http: http, metadata: metadata) }
        if let azure = configuration.azureBlob { stores["abs"] = try AzureBlobStore(azure) }
        self.stores = stores
    }

    func handles(_ url: URL) -> Bool {
        stores[url.scheme?.lowercased() ?? ""] != nil
    }

    func load(_ request: DataRequest, progress: @escaping @Sendable (Int, Int?) -> Void) async throws -> DataResponse {
        guard let scheme = request.url.scheme?.lowercased(), let store = stores[scheme] else {
            return try await fallback.load(request, progress: progress)
        }
        let started = Date()
        guard let object = ObjectLocation(request.url) else {
            return DataResponse(
                url: request.url, status: 404, headers: [], body: [], requestTime: started, responseTime: Date())
        }
        // The caller's credentials never go to a store.
        let headers = request.headers.filter { field in
            !(field.hasName("Authorization") || field.hasName("Proxy-Authorization") || field.hasName("Cookie")
                || field.hasName("Host"))
        }
        if let answer = try await store.notModified(object, headers: headers, http: http) {
            var answer = answer
            answer.url = request.url
            return answer
        }
        var response = try await send(
            try await store.read(object, headers: headers), for: request.url, progress: progress)
        response = store.normalized(response)
        response.url = request.url
        return response
    }

    /// Sends a signed request; a failure's body is read for the log and dropped.
    func send(_ signed: DataRequest, for url: URL, progress: @escaping @Sendable (Int, Int?) -> Void = { _, _ in })
        async throws -> DataResponse
    {
        var response: DataResponse
        do {
            response = try await http.load(signed, progress: progress)
        } catch let error as ImageLoadingError {
            // The error names the object, not the endpoint's URL (which may carry a query).
            throw ImageLoadingError(error.reason, url: url.absoluteString)
        }
        if response.status >= 400 {
            logger.warning(
                "object store refused",
                metadata: [
                    "url": "\(url)", "status": "\(response.status)",
                    "reason": "\(ObjectStorageDataLoader.reason(response.body))",
                ])
            response.body = []
        }
        return response
    }

    /// The store's words from an error body: S3's and Azure's XML `Code` and `Message`,
    /// GCS's JSON `message`, else its first line; at most 300 characters.
    static func reason(_ body: [UInt8]) -> String {
        let text = String(decoding: body.prefix(16 << 10), as: UTF8.self)
        func element(_ name: String) -> String? {
            guard let start = text.range(of: "<\(name)>"),
                let end = text.range(of: "</\(name)>", range: start.upperBound..<text.endIndex)
            else { return nil }
            return String(text[start.upperBound..<end.lowerBound])
        }
        var words: String
        if let code = element("Code") {
            words = code + (element("Message").map { ": " + $0 } ?? "")
        } else if let range = text.range(of: #""message""#),
            let open = text[range.upperBound...].firstIndex(of: "\""),
            let close = text[text.index(after: open)...].firstIndex(of: "\"")
        {
            words = String(text[text.index(after: open)..<close])
        } else {
            words = text.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        }
        words = String(words.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F }.map(Character.init))
        return words.isEmpty ? "no reason given" : String(words.prefix(300))
    }

    /// Writes `body` to the object `url` names; throws on any failure (the caller decides what it costs).
    func write(_ url: URL, body: [UInt8], contentType: String, metadata: [String: String]) async throws {
        guard let object = ObjectLocation(url), let store = stores[object.scheme] else {
            throw ImageLoadingError(.unsupportedURL, url: url.absoluteString)
        }
        let response = try await send(
            try await store.write(object, body: body, contentType: contentType, metadata: metadata), for: url)
        guard (200..<300).contains(response.status) else {
            throw ImageLoadingError(.httpStatus(response.status), url: url.absoluteString)
        }
    }

    func shutdown() async throws {
        try await runEvery([
            { try await self.http.shutdown() }, { try await self.metadata.shutdown() },
            { try await self.fallback.shutdown() },
        ])
    }
}

// MARK: - S3

struct S3Store: ObjectStore {
    let region: String
    let endpoint: URL?
    let usesPathStyle: Bool
    let credentials: AWSCredentialProvider
    /// The endpoint as text without a trailing `/`, and its scheme (worked out once).
    private let endpointText: String
    private let endpointScheme: String

    init(_ configuration: S3Configuration, credentials: AWSCredentialProvider) {
        var region = configuration.region
        if region.isEmpty {
            var environment = ProcessInfo.processInfo.environment
            if case .standardWith(let custom) = configuration.credentials { environment = custom }
            region = AWSCredentialProvider.configuredRegion(environment: environment) ?? "us-east-1"
        }
        self.region = region
        endpoint = configuration.endpoint
        usesPathStyle = configuration.usesPathStyle
        self.credentials = credentials
        var text = configuration.endpoint?.absoluteString ?? ""
        while text.hasSuffix("/") { text.removeLast() }
        endpointText = text
        endpointScheme = configuration.endpoint?.scheme ?? "https"
    }

    /// Scheme and authority, and the path prefix, for `bucket`.
    private func base(_ bucket: String) -> (origin: String, path: String) {
        let encodedBucket = SignatureV4.encode(bucket, keepsSlash: false)
        if endpoint != nil {
            if usesPathStyle { return (endpointText, "/" + encodedBucket) }
            let authority = endpointText.dropFirst(endpointScheme.count + 3)
            return ("\(endpointScheme)://\(bucket).\(authority)", "")
        }
        let host = "s3.\(region).amazonaws.com"
        // Names with dots break the certificate's wildcard: path style for those.
        let virtual = !bucket.contains(".") && bucket == bucket.lowercased()
        return virtual ? ("https://\(bucket).\(host)", "") : ("https://\(host)", "/" + encodedBucket)
    }

    func read(_ object: ObjectLocation, headers: [HeaderField]) async throws -> DataRequest {
        try await read(object, headers: headers, at: Date())
    }

    func read(_ object: ObjectLocation, headers: [HeaderField], at date: Date) async throws -> DataRequest {
        try await signed(
            "GET", object, query: object.version.map { [("versionId", $0)] } ?? [], headers: headers, body: nil,
            at: date)
    }

    func write(_ object: ObjectLocation, body: [UInt8], contentType: String, metadata: [String: String]) async throws
        -> DataRequest
    {
        try await write(object, body: body, contentType: contentType, metadata: metadata, at: Date())
    }

    func write(
        _ object: ObjectLocation, body: [UInt8], contentType: String, metadata: [String: String], at date: Date
    ) async throws -> DataRequest {
        var headers = [HeaderField("Content-Type", contentType)]
        for (name, value) in metadata.sorted(by: { $0.key < $1.key }) {
            headers.append(HeaderField(metadataName(name), value))
        }
        return try await signed("PUT", object, query: [], headers: headers, body: body, at: date)
    }

    func metadataName(_ name: String) -> String { "x-amz-meta-" + name }

    private func signed(
        _ method: String, _ object: ObjectLocation, query: [(name: String, value: String)], headers: [HeaderField],
        body: [UInt8]?, at date: Date
    ) async throws -> DataRequest {
        let (origin, prefix) = base(object.bucket)
        let path = prefix + "/" + SignatureV4.encode(object.key, keepsSlash: true)
        let queryText = query.isEmpty ? "" : "?" + SignatureV4.canonicalQuery(query)
        guard let url = URL(string: origin + path + queryText), let host = url.host else {
            throw ImageLoadingError(.unsupportedURL, url: "s3://\(object.bucket)/")
        }
        var request = DataRequest(url: url, headers: headers)
        request.method = method
        request.body = body
        guard let credentials = try await credentials.credentials() else { return request }
        let authority = url.port.map { "\(host):\($0)" } ?? host
        let payloadHash = body.map { Hex.lowercase(Array(SHA256.hash(data: $0))) } ?? SignatureV4.emptyPayloadHash
        var signedFields: [(name: String, value: String)] = [
            ("host", authority), ("x-amz-content-sha256", payloadHash),
            ("x-amz-date", SignatureV4.timestamps(date).stamp),
        ]
        if let token = credentials.sessionToken { signedFields.append(("x-amz-security-token", token)) }
        // What a write says of its content is signed too: a proxy cannot change it.
        for field in headers where field.name.lowercased().hasPrefix("x-amz-") || field.hasName("Content-Type") {
            signedFields.append((field.name, field.value))
        }
        let signer = SignatureV4(credentials: credentials, region: region, service: "s3")
        let signature = signer.sign(
            SignatureV4.Request(
                method: method, path: path, query: query, headers: signedFields, payloadHash: payloadHash),
            at: date)
        for (name, value) in signedFields where name != "host" && !headers.contains(where: { $0.hasName(name) }) {
            request.headers.append(HeaderField(name, value))
        }
        request.headers.append(HeaderField("Authorization", signature.authorization))
        return request
    }
}

// MARK: - Google Cloud Storage

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

// MARK: - Azure Blob Storage

struct AzureBlobStore: ObjectStore {
    let endpoint: String
    let signer: AzureSharedKey?
    /// The service version the requests speak.
    static let version = "2021-08-06"

    init(_ configuration: AzureBlobConfiguration) throws(ImageLoadingError) {
        var text =
            configuration.endpoint?.absoluteString ?? "https://\(configuration.accountName).blob.core.windows.net"
        while text.hasSuffix("/") { text.removeLast() }
        endpoint = text
        if let key = configuration.accountKey, !key.isEmpty {
            guard let decoded = Data(base64Encoded: key) else {
                throw ImageLoadingError(.credentials("the Azure account key is not base64"), url: "abs://")
            }
            signer = AzureSharedKey(accountName: configuration.accountName, key: Array(decoded))
        } else {
            signer = nil
        }
    }

    func read(_ object: ObjectLocation, headers: [HeaderField]) async throws -> DataRequest {
        try signed("GET", object, headers: headers, body: nil)
    }

    func write(_ object: ObjectLocation, body: [UInt8], contentType: String, metadata: [String: String]) async throws
        -> DataRequest
    {
        var headers = [HeaderField("Content-Type", contentType), HeaderField("x-ms-blob-type", "BlockBlob")]
        for (name, value) in metadata.sorted(by: { $0.key < $1.key }) {
            headers.append(HeaderField(metadataName(name), value))
        }
        return try signed("PUT", object, headers: headers, body: body)
    }

    func metadataName(_ name: String) -> String { "x-ms-meta-" + name }

    private func signed(_ method: String, _ object: ObjectLocation, headers: [HeaderField], body: [UInt8]?) throws
        -> DataRequest
    {
        let text =
            endpoint + "/" + SignatureV4.encode(object.bucket, keepsSlash: false) + "/"
            + SignatureV4.encode(object.key, keepsSlash: true)
        guard let url = URL(string: text) else {
            throw ImageLoadingError(.unsupportedURL, url: "abs://\(object.bucket)/")
        }
        var request = DataRequest(url: url, headers: headers)
        request.method = method
        request.body = body
        request.headers.append(HeaderField("x-ms-date", HTTPDate.format(Date())))
        request.headers.append(HeaderField("x-ms-version", AzureBlobStore.version))
        if let signer {
            // The length is signed; the HTTP client writes the field itself.
            let signing = request.headers + (body.map { [HeaderField("Content-Length", "\($0.count)")] } ?? [])
            request.headers.append(
                HeaderField(
                    "Authorization",
                    signer.authorization(
                        method: method, path: url.path(percentEncoded: true), query: [], headers: signing)))
        }
        return request
    }
}

// MARK: - Objects read and written directly (the service's result storage)

extension ImageLoader {
    /// The object `url` names (`s3://bucket/key`, ...), read from its store without the
    /// HTTP cache; `nil` when the store has no such object. Throws when no store is
    /// configured for the scheme or the store fails.
    package func storedObject(at url: URL) async throws -> (body: [UInt8], headers: [HeaderField])? {
        guard let stores = objectStores, stores.handles(url) else {
            throw ImageLoadingError(.unsupportedURL, url: url.absoluteString)
        }
        let response = try await stores.load(DataRequest(url: url)) { _, _ in }
        switch response.status {
        case 200: return (response.body, response.headers)
        case 404: return nil
        default: throw ImageLoadingError(.httpStatus(response.status), url: url.absoluteString)
        }
    }

    /// Writes `bytes` to the object `url` names, in the background: the caller does not
    /// wait, ``shutdown()`` does. `completion` gets the failure, if any.
    package func storeObjectInBackground(
        at url: URL, bytes: [UInt8], contentType: String,
        completion: @escaping @Sendable ((any Error)?) -> Void
    ) {
        guard let stores = objectStores, stores.handles(url) else {
            completion(ImageLoadingError(.unsupportedURL, url: url.absoluteString))
            return
        }
        context.operations.startInBackground {
            do {
                try await stores.write(url, body: bytes, contentType: contentType, metadata: [:])
                completion(nil)
            } catch {
                completion(error)
            }
        }
    }
}
