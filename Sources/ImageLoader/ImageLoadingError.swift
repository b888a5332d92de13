import ImageLoaderSupport
import NIOPosix
import RasterImage

/// Why a load gave no image: the reason, the URL, and the HTTP status when there was one.
///
/// ```swift
/// do {
///     _ = try await loader.image(for: url)
/// } catch {
///     if case .httpStatus(404) = error.reason { ... }
/// }
/// ```
public struct ImageLoadingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Why the load failed.
    public enum Reason: Sendable, Hashable {
        /// The origin answered with an error status (4xx or 5xx, or one the loader cannot use).
        case httpStatus(Int)
        /// The connection failed after it was made: reset, or closed by the origin before
        /// the response ended (a body cut short that way included), or another failure
        /// of the network without a more precise reason.
        case network(String)
        /// No connection could be made, for a reason waiting would not change (refused,
        /// no route, a name that does not resolve, a failed TLS handshake): the load
        /// fails as soon as the system says so, not at the connect timeout.
        case cannotConnect(ConnectionFailure)
        /// The connect timeout, the read (idle) timeout or the total timeout passed.
        case timeout
        /// The response broke HTTP: header fields past the size limit, a body shorter
        /// than its Content-Length, a malformed message, a 304 to a request that had no
        /// validators.
        case invalidResponse(String)
        /// The body is larger than ``HTTPDataLoader/Configuration/maxResponseBytes``.
        case responseTooLarge(limit: Int)
        /// More redirects than ``HTTPDataLoader/Configuration/maxRedirects``.
        case tooManyRedirects(limit: Int)
        /// The response's Content-Type or the bytes' format is not accepted.
        case contentType(ContentTypeError)
        /// The bytes are not a decodable image.
        case decoding(ImageDecodingError)
        /// The URL failed before, often enough and recently enough that the loader did
        /// not ask again (error caching: ``ImageLoader/Configuration/maxAttemptsForErrors``).
        case rememberedFailure(status: Int?, attempts: Int)
        /// Not an http, https or file URL, nor one the configured
        /// ``DataLoading/canLoad(_:)`` takes (an object store's, for instance).
        case unsupportedURL
        /// An object store's credentials could not be had: none found, a key that does not
        /// parse, a token endpoint that refused. The words never contain a secret.
        case credentials(String)
        /// The host resolved to no address that ``HTTPDataLoader/Configuration/addressFilter``
        /// allows (a private or loopback network, for a service open to the internet):
        /// the host, and the addresses refused.
        case forbiddenAddress(host: String, addresses: [String])
        /// The origin answered 304 to the client validators the caller passed on
        /// (``LoadOptions/clientValidators``): the client's copy is current. The 304's
        /// header fields (its `ETag`, `Last-Modified`, `Cache-Control`).
        case notModified(headers: [HeaderField])
        /// The caller's task was cancelled.
        case cancelled
        /// The loader was shut down.
        case shutDown
    }

    /// Why the load failed.
    public let reason: Reason
    /// The URL that failed (without its fragment), as text.
    public let url: String

    /// An error for `url` (a custom ``DataLoading`` throws these).
    public init(_ reason: Reason, url: String) {
        self.reason = reason
        self.url = url
    }

    /// The HTTP status behind the failure, if any.
    public var status: Int? {
        switch reason {
        case .httpStatus(let status): status
        case .rememberedFailure(let status, _): status
        default: nil
        }
    }

    /// The URL and the reason, in words.
    public var description: String {
        let text: String
        switch reason {
        case .httpStatus(let status): text = "HTTP status \(status)"
        case .network(let message): text = "network error: \(message)"
        case .cannotConnect(let failure): text = failure.description
        case .timeout: text = "timed out"
        case .invalidResponse(let message): text = "invalid response: \(message)"
        case .responseTooLarge(let limit): text = "response larger than \(limit) bytes"
        case .tooManyRedirects(let limit): text = "more than \(limit) redirects"
        case .contentType(let error): text = error.description
        case .decoding(let error): text = error.description
        case .rememberedFailure(let status, let attempts):
            text = "failed \(attempts) times recently\(status.map { " (HTTP status \($0))" } ?? ""); not retried yet"
        case .unsupportedURL: text = "unsupported URL"
        case .credentials(let why): text = "object store credentials: \(why)"
        case .forbiddenAddress(let host, let addresses):
            text = "\(host) resolves to no allowed address (\(addresses.joined(separator: ", ")))"
        case .notModified: text = "not modified (the client's validators match)"
        case .cancelled: text = "cancelled"
        case .shutDown: text = "the loader is shut down"
        }
        return "\(url): \(text)"
    }
}

extension ImageLoadingError {
    /// What any error met while loading `url` means to a caller: the loader's one
    /// mapping. A decoder's error becomes `.decoding`, a cancellation `.cancelled`, the
    /// worker or waiting threads stopped `.shutDown`, and anything else a `.network` failure with
    /// its description (the HTTP client's errors are mapped by ``HTTPDataLoader`` first).
    init(mapping error: any Error, url: String) {
        switch error {
        case let error as ImageLoadingError: self = error
        case let error as ImageDecodingError: self.init(.decoding(error), url: url)
        case is CancellationError: self.init(.cancelled, url: url)
        case is NIOThreadPoolError.ThreadPoolInactive, is WaitingThreads.Stopped: self.init(.shutDown, url: url)
        default: self.init(.network(String(describing: error)), url: url)
        }
    }
}

/// `body`'s value, or what it throws as ``ImageLoadingError`` (``ImageLoadingError/init(mapping:url:)``).
func mappingErrors<T>(_ url: String, _ body: () async throws -> T) async throws(ImageLoadingError) -> T {
    do {
        return try await body()
    } catch {
        throw ImageLoadingError(mapping: error, url: url)
    }
}

/// Why no connection could be made to an origin: what happened, to which host and port,
/// and the system's (or the TLS library's) own words.
///
/// ```swift
/// do {
///     _ = try await loader.image(for: url)
/// } catch let error as ImageLoadingError {
///     if case .cannotConnect(let failure) = error.reason, failure.kind == .refused {
///         print("nothing listens on \(failure.host):\(failure.port)")
///     }
/// }
/// ```
public struct ConnectionFailure: Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure it was.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// Nothing listens on the port (`ECONNREFUSED`).
        case refused
        /// No route to the network or the host (`ENETUNREACH`, `EHOSTUNREACH`), or the
        /// system refused to send there (`EACCES`, `EPERM`: a broadcast address, a firewall rule).
        case unreachable
        /// The host name resolves to no address.
        case nameNotResolved
        /// The TLS handshake failed: an untrusted or expired certificate, a name the
        /// certificate does not cover, no protocol or cipher in common, or an origin
        /// that does not speak TLS on that port.
        case tlsHandshake
    }

    /// What kind of failure it was.
    public let kind: Kind
    /// The host name (or address) of the URL.
    public let host: String
    /// The port connected to.
    public let port: Int
    /// The system's or the TLS library's text, for logs.
    public let detail: String

    /// A failure of `kind` to connect to `host` and `port` (a custom ``DataLoading`` throws these).
    public init(_ kind: Kind, host: String, port: Int, detail: String) {
        self.kind = kind
        self.host = host
        self.port = port
        self.detail = detail
    }

    /// One line: what failed, where, and the system's words.
    public var description: String {
        let place = (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
        switch kind {
        case .refused: return "connection refused by \(place) (nothing listens there)"
        case .unreachable: return "cannot reach \(place): \(detail)"
        case .nameNotResolved: return "cannot resolve \(host): \(detail)"
        case .tlsHandshake: return "TLS handshake with \(place) failed: \(detail)"
        }
    }
}
