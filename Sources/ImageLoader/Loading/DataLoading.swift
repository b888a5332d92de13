import Foundation

/// One HTTP request as the loader makes it: a GET, or (for object stores' writes and
/// credential endpoints) another method with a body.
public struct DataRequest: Sendable, Hashable {
    /// The URL to get.
    public var url: URL
    /// The request's header fields, in order.
    public var headers: [HeaderField]
    /// The method; `GET` unless a store writes.
    public var method = "GET"
    /// The body sent with the request (a `PUT` or `POST`), if any.
    public var body: [UInt8]?

    /// A GET of `url` with `headers`.
    public init(url: URL, headers: [HeaderField] = []) {
        self.url = url
        self.headers = headers
    }
}

/// What came back, with the times the cache's age calculation needs.
public struct DataResponse: Sendable, Hashable {
    /// Where the response came from, after redirects.
    public var url: URL
    /// The HTTP status code.
    public var status: Int
    /// The response's header fields, in order.
    public var headers: [HeaderField]
    /// The body's bytes.
    public var body: [UInt8]
    /// When the request was sent and when the response arrived.
    public var requestTime: Date
    /// When the response arrived.
    public var responseTime: Date
    /// The addresses connected to, the request's and each redirect's, when the loader
    /// checked them against an address filter (``HTTPDataLoader/Configuration/addressFilter``);
    /// `nil` when it did not. Stored with the response, so that a cache hit is judged by
    /// the filter of the loader that reads it, not of the one that stored it.
    public var connectedAddresses: [String]?

    /// A response, with the times the cache's age calculation needs.
    public init(
        url: URL, status: Int, headers: [HeaderField], body: [UInt8], requestTime: Date, responseTime: Date,
        connectedAddresses: [String]? = nil
    ) {
        self.url = url
        self.status = status
        self.headers = headers
        self.body = body
        self.requestTime = requestTime
        self.responseTime = responseTime
        self.connectedAddresses = connectedAddresses
    }

    /// The first value of the header field `name`, any case.
    public func value(_ name: String) -> String? {
        headers.first(named: name)
    }
}

/// Fetches bytes: the seam for another HTTP stack, a fake one, or a loader of other
/// schemes that hands the rest on (the ObjectStorage library's `ObjectStorageDataLoader`
/// reads `s3://`, `gs://` and `abs://` this way).
///
/// ```swift
/// struct Fixtures: DataLoading {
///     func load(_ request: DataRequest, progress: @escaping @Sendable (Int, Int?) -> Void) async throws
///         -> DataResponse
///     {
///         DataResponse(url: request.url, status: 200, headers: [], body: bytes, requestTime: .now, responseTime: .now)
///     }
///     func shutdown() async throws {}
/// }
/// configuration.dataLoader = Fixtures()
/// ```
public protocol DataLoading: Sendable {
    /// Sends `request`, reporting progress (bytes received, bytes expected if known).
    /// Throws ``ImageLoadingError``.
    func load(_ request: DataRequest, progress: @escaping @Sendable (Int, Int?) -> Void) async throws -> DataResponse
    /// Releases connections and threads. The loader calls it from its own
    /// ``ImageLoader/shutdown()``.
    func shutdown() async throws
    /// Whether `url` (which has a host) is one this loader fetches. By default `http`
    /// and `https`; any other URL fails with `.unsupportedURL` before it is sent.
    func canLoad(_ url: URL) -> Bool
    /// The filter every address this loader connects to for `url` passes, if it has one
    /// (``HTTPDataLoader/Configuration/addressFilter``). A stored response to `url` is
    /// used only when each address it came from passes the filter that governs `url`
    /// now. `nil` by default: the loader connects where it likes.
    func addressFilter(for url: URL) -> (@Sendable (String) -> Bool)?
}

extension DataLoading {
    public func canLoad(_ url: URL) -> Bool {
        let scheme = url.scheme?.lowercased()
        return scheme == "http" || scheme == "https"
    }

    public func addressFilter(for url: URL) -> (@Sendable (String) -> Bool)? { nil }
}
