import Foundation
import ImageLoader
import ImageLoaderSupport
import Logging

/// Loads `s3://`, `gs://` and `abs://` URLs from the stores configured, and hands every
/// other URL to the loader it wraps: a `DataLoading` for
/// `ImageLoader.Configuration.dataLoader`. Reads are HTTP requests to the
/// store's endpoint, signed as they leave (so the loader's cache keys, stores and
/// revalidates them by the object's URL and never sees a credential), through an HTTP
/// client of their own: the store is the operator's choice, so the address filter for
/// sources does not apply to it.
///
/// ```swift
/// var configuration = ImageLoader.Configuration()
/// configuration.dataLoader = try ObjectStorageDataLoader(
///     ObjectStorageConfiguration(s3: S3Configuration(region: "eu-west-1")), wrapping: configuration)
/// let loader = try ImageLoader(configuration: configuration)
/// let photo = try await loader.image(for: URL(string: "s3://photos/2026/cat.jpg")!)
/// ```
public final class ObjectStorageDataLoader: DataLoading {
    let fallback: any DataLoading
    let http: HTTPDataLoader
    /// Short timeouts, for the credential endpoints (instance metadata is not there
    /// off EC2: its absence must cost a second at most).
    let metadata: HTTPDataLoader
    let stores: [String: any ObjectStore]
    let logger: Logger
    /// Writes started in the background, which ``shutdown()`` waits for.
    private let writes = Operations()

    /// Reads the stores `storage` configures, and hands every other URL to what the
    /// loader `configuration` describes would fetch through (its `ImageLoader.Configuration.dataLoader`,
    /// or its HTTP loader). The stores' requests take `configuration.http`'s timeouts
    /// and size caps, neither its address filter nor its credentials. Throws
    /// `.credentials` when a store's key cannot be read.
    public convenience init(
        _ storage: ObjectStorageConfiguration, wrapping configuration: ImageLoader.Configuration
    ) throws(ImageLoadingError) {
        try self.init(
            configuration: storage, http: configuration.httpWithClock, fallback: configuration.makeDataLoader(),
            logger: configuration.logger)
    }

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

    /// The schemes of the stores configured (`s3`, `gs`, `abs`).
    public var schemes: Set<String> { Set(stores.keys) }

    /// Whether `url` names an object in a configured store.
    public func handles(_ url: URL) -> Bool {
        stores[url.scheme?.lowercased() ?? ""] != nil
    }

    /// The stores' schemes, and what the wrapped loader takes.
    public func canLoad(_ url: URL) -> Bool {
        handles(url) || fallback.canLoad(url)
    }

    /// None for an object (a store's endpoint is configuration, not input); the wrapped
    /// loader's for any other URL.
    public func addressFilter(for url: URL) -> (@Sendable (String) -> Bool)? {
        handles(url) ? nil : fallback.addressFilter(for: url)
    }

    public func load(_ request: DataRequest, progress: @escaping @Sendable (Int, Int?) -> Void) async throws
        -> DataResponse
    {
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

    /// Waits for the writes started in the background, then releases the stores' clients
    /// and the wrapped loader.
    public func shutdown() async throws {
        await writes.closeAndWait()
        try await runEvery([
            { try await self.http.shutdown() }, { try await self.metadata.shutdown() },
            { try await self.fallback.shutdown() },
        ])
    }

    // MARK: Objects read and written directly (the service's result storage)

    /// The object `url` names (`s3://bucket/key`, ...), read from its store without the
    /// HTTP cache; `nil` when the store has no such object. Throws when no store is
    /// configured for the scheme or the store fails.
    package func storedObject(at url: URL) async throws -> (body: [UInt8], headers: [HeaderField])? {
        guard handles(url) else { throw ImageLoadingError(.unsupportedURL, url: url.absoluteString) }
        let response = try await load(DataRequest(url: url)) { _, _ in }
        switch response.status {
        case 200: return (response.body, response.headers)
        case 404: return nil
        default: throw ImageLoadingError(.httpStatus(response.status), url: url.absoluteString)
        }
    }

    /// Writes `bytes` to the object `url` names, in the background: the caller does not
    /// wait, ``shutdown()`` does; one asked for after that is refused with `.shutDown`.
    /// `completion` gets the failure, if any.
    package func storeObjectInBackground(
        at url: URL, bytes: [UInt8], contentType: String,
        completion: @escaping @Sendable ((any Error)?) -> Void
    ) {
        guard handles(url) else {
            completion(ImageLoadingError(.unsupportedURL, url: url.absoluteString))
            return
        }
        let started = writes.startInBackground {
            do {
                try await self.write(url, body: bytes, contentType: contentType, metadata: [:])
                completion(nil)
            } catch {
                completion(error)
            }
        }
        if !started { completion(ImageLoadingError(.shutDown, url: url.absoluteString)) }
    }
}
