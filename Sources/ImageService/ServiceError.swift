import ImageLoader
import RasterImage

/// Why a request got no image: an HTTP status and a short text, never a stack trace.
///
/// | status | when |
/// |---|---|
/// | 400 | malformed URL, unknown option, bad argument, a box or crop that cannot be made |
/// | 403 | bad signature, unsigned URL not allowed, source not allowed, private address |
/// | 404 | the source does not exist |
/// | 413 | the source has more bytes or pixels than the limits |
/// | 415 | the source is not an accepted image type |
/// | 422 | the source cannot be decoded |
/// | 499 | the client closed its connection first (logged and counted only; see ``ImageService/connectionHandlers(maxConnections:)``) |
/// | 502 | the source failed (an error status, a broken response, no connection) |
/// | 503 | overloaded (with `Retry-After`), or shutting down |
/// | 504 | the source or the processing took longer than the timeout |
public struct ServiceError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The HTTP status.
    public let status: Int
    /// The short text sent as the body.
    public let message: String
    /// Seconds the answer may be cached downstream (a source's 404); 0: `no-store`.
    var maxAge = 0
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

    static let overloaded = ServiceError(status: 503, "overloaded, retry later")
    static let timedOut = ServiceError(status: 504, "timed out")
    /// nginx's status for a client that closed its connection before the answer: logged
    /// and counted, never seen by the client.
    static let clientClosed = ServiceError(status: 499, "client closed the connection")

    /// The status and text for anything a request can throw.
    static func from(_ error: any Error) -> ServiceError {
        switch error {
        case let error as ServiceError: return error
        case let error as ProcessingURL.Failure: return ServiceError(status: error.status, error.description)
        case let error as SourcePolicy.Forbidden: return ServiceError(status: 403, error.description)
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

    /// The status and text a client gets for a load's failure.
    private static func answer(_ error: ImageLoadingError) -> ServiceError {
        switch error.reason {
        case .httpStatus(let status), .rememberedFailure(let status?, _):
            return status == 404 || status == 410
                ? ServiceError(status: 404, "source not found")
                : ServiceError(status: 502, "source answered \(status)")
        case .rememberedFailure(nil, _): return ServiceError(status: 502, "source failed recently")
        case .timeout: return ServiceError(status: 504, "source timed out")
        case .responseTooLarge(let limit): return ServiceError(status: 413, "source larger than \(limit) bytes")
        case .contentType(let why): return ServiceError(status: 415, why.description)
        case .decoding(let why): return from(why)
        case .forbiddenAddress:
            return ServiceError(
                status: 403,
                "source address not allowed: loopback, private and link-local addresses are refused "
                    + "(imageloader serve --allow-address ADDRESS or --allow-private-networks allows them)")
        case .cannotConnect(let failure):
            switch failure.kind {
            case .refused: return ServiceError(status: 502, "source refused the connection")
            case .unreachable: return ServiceError(status: 502, "source unreachable")
            case .nameNotResolved: return ServiceError(status: 502, "source host not found")
            case .tlsHandshake: return ServiceError(status: 502, "source TLS handshake failed")
            }
        case .network, .invalidResponse, .tooManyRedirects, .unsupportedURL:
            return ServiceError(status: 502, "source failed")
        case .cancelled, .shutDown: return ServiceError(status: 503, "shutting down")
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
        case .inputTooLarge, .tooManyPixels, .tooManyFrames, .tooManyBytes, .tooMuchWorkingMemory, .tooMuchWork,
            .tooManyScans, .tooManyMetadataBlocks:
            return ServiceError(status: 413, error.description)
        case .unrecognizedFormat: return ServiceError(status: 415, error.description)
        // What the request asked for cannot be made: the request's fault, not the source's.
        case .invalidThumbnailSize, .invalidCrop: return ServiceError(status: 400, error.description)
        default: return ServiceError(status: 422, error.description)
        }
    }
}
