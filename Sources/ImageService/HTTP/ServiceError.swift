import ImageLoader
import RasterImage

/// Why a request got no image: an HTTP status and a short text, never a stack trace.
/// The statuses are imgproxy's, so that monitoring, CDN rules and clients written
/// against it keep working; where imgproxy's would mislead (a source that cannot be
/// reached), the service's is kept and listed in "Differences from imgproxy".
///
/// | status | when |
/// |---|---|
/// | 400 | an upload's body cannot be read |
/// | 401, 403, 404, 410, ... | the source's origin answered that 4xx status (404 also: a URL or option that names nothing, a source not allowed, a private address, too many redirects, an expired URL) |
/// | 403 | bad signature, unsigned URL not allowed, a security option not allowed |
/// | 413 | an upload's body past `--max-src-bytes` |
/// | 422 | the source is too large (bytes or pixels), not an accepted image type, cannot be decoded, or its response was cut short; a format that cannot be written |
/// | 429 | overloaded: the queue is full (with `Retry-After`) |
/// | 499 | the client closed its connection first (logged and counted only; see ``ImageService/connectionHandlers(maxConnections:)``) |
/// | 502 | the source's origin failed (a 5xx), or no connection could be made to it |
/// | 503 | the request took longer than `--timeout`, or the service is shutting down |
/// | 504 | the source took longer than the loader's timeout |
public struct ServiceError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The HTTP status.
    public let status: Int
    /// The short text sent as the body.
    public let message: String
    /// Seconds the answer may be cached downstream (a source's 404); 0: `no-store`.
    var maxAge = 0
    /// Whether the source does not exist (its origin's 404 or 410, a missing local
    /// file): the one failure a cache downstream may keep, for `notFoundTTL`.
    var isMissingSource = false
    /// What happened, in more words than the client is told (the source's URL, the
    /// system's reason): for the access log's line, never for the body.
    var cause: String?

    /// A failure answered with `status` and `message`.
    public init(status: Int, _ message: String) {
        self.status = status
        self.message = message
    }

    /// The status and the text.
    public var description: String { "\(status) \(message)" }

    static let overloaded = ServiceError(status: 429, "too many requests, retry later")
    static let timedOut = ServiceError(status: 503, "timed out")

    /// The source has more bytes than the limit (imgproxy's 422).
    static func sourceTooLarge(bytes limit: Int) -> ServiceError {
        ServiceError(status: 422, "source larger than \(limit) bytes")
    }

    /// The source has more pixels than the limit (imgproxy's 422).
    static func sourceTooLarge(pixels limit: Int) -> ServiceError {
        ServiceError(status: 422, "source larger than \(limit) pixels")
    }

    /// The source does not exist.
    static func missingSource(status: Int = 404) -> ServiceError {
        var failure = ServiceError(status: status, "source not found")
        failure.isMissingSource = true
        return failure
    }

    /// A source refused by the allowed prefixes or the local root (imgproxy's 404).
    static func sourceNotAllowed(_ why: String) -> ServiceError { ServiceError(status: 404, why) }
    /// nginx's status for a client that closed its connection before the answer: logged
    /// and counted, never seen by the client.
    static let clientClosed = ServiceError(status: 499, "client closed the connection")

    /// The status and text for anything a request can throw.
    static func from(_ error: any Error) -> ServiceError {
        switch error {
        case let error as ServiceError: return error
        case let error as ProcessingURL.Failure: return ServiceError(status: error.status, error.description)
        case let error as SourcePolicy.Forbidden: return sourceNotAllowed(error.description)
        case let error as ImageLoadingError: return from(error)
        case let error as ImageDecodingError: return from(error)
        case is CancellationError: return ServiceError(status: 503, "cancelled")
        default: return ServiceError(status: 500, "internal error")
        }
    }

    static func from(_ error: ImageLoadingError) -> ServiceError {
        var failure = answer(error)
        failure.cause = error.description
        return failure
    }

    /// The status and text a client gets for a load's failure: the origin's 4xx as it
    /// is, a 5xx as 502, as imgproxy answers.
    private static func answer(_ error: ImageLoadingError) -> ServiceError {
        switch error.reason {
        case .httpStatus(let status), .rememberedFailure(let status?, _):
            switch status {
            case 404, 410: return .missingSource(status: status)
            case 400..<500: return ServiceError(status: status, "source answered \(status)")
            default: return ServiceError(status: 502, "source answered \(status)")
            }
        case .rememberedFailure(nil, _): return ServiceError(status: 502, "source failed recently")
        case .timeout: return ServiceError(status: 504, "source timed out")
        case .responseTooLarge(let limit): return sourceTooLarge(bytes: limit)
        case .contentType(let why): return ServiceError(status: 422, why.description)
        case .decoding(let why): return from(why)
        case .forbiddenAddress:
            return ServiceError(
                status: 404,
                "source address not allowed: loopback, private and link-local addresses are refused "
                    + "(imageloader serve --allow-address ADDRESS or --allow-private-networks allows them)")
        case .cannotConnect(let failure):
            switch failure.kind {
            case .refused: return ServiceError(status: 502, "source refused the connection")
            case .unreachable: return ServiceError(status: 502, "source unreachable")
            case .nameNotResolved: return ServiceError(status: 502, "source host not found")
            case .tlsHandshake: return ServiceError(status: 502, "source TLS handshake failed")
            }
        case .network: return ServiceError(status: 502, "source failed")
        case .invalidResponse: return ServiceError(status: 422, "source response is incomplete or malformed")
        case .tooManyRedirects, .unsupportedURL: return ServiceError(status: 404, "source is unreachable")
        // The service's own configuration, not the client's request.
        case .credentials: return ServiceError(status: 500, "object store credentials unavailable")
        case .cancelled, .shutDown: return ServiceError(status: 503, "shutting down")
        // Answered as a 304 where the service passes a client's validators on; never here.
        case .notModified: return ServiceError(status: 502, "source answered 304 unasked")
        }
    }

    static func from(_ error: ImageDecodingError) -> ServiceError {
        var failure = answer(error)
        if failure.message != error.description { failure.cause = error.description }
        return failure
    }

    /// The status and text a client gets for a decoder's failure.
    private static func answer(_ error: ImageDecodingError) -> ServiceError {
        switch error.reason {
        // What the request asked for cannot be made: a URL that names nothing, as imgproxy answers it.
        case .invalidThumbnailSize, .invalidCrop: return ServiceError(status: 404, error.description)
        // Too large, not an image, not decodable: imgproxy's 422 for each.
        default: return ServiceError(status: 422, error.description)
        }
    }
}
