import Foundation
import HTTPTypes
import Hummingbird
import ImageLoaderSupport
import Logging

/// One line per request: its id (the proxy's `X-Request-Id` when it sends a plain one,
/// else a new one), method, path, status, bytes sent and time taken; the id also goes
/// back as `X-Request-Id`. Feeds the request and byte metrics.
struct AccessLog<Context: RequestContext>: RouterMiddleware {
    let logger: Logger
    let metrics: ServiceMetrics
    /// imgproxy's `IMGPROXY_ALLOW_ORIGIN`: added to every answer with the methods.
    var allowOrigin: String? = nil

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response)
        async throws -> Response
    {
        let start = ContinuousClock.now
        // Hummingbird's own id, from its logger's metadata (not `context.id`, which traps
        // when the application's log handler keeps no metadata: a no-op one), else a new one.
        let id =
            request.headers[.requestID].flatMap(AccessLogLine.acceptable)
            ?? context.logger[metadataKey: "hb.request.id"]?.description ?? RequestID().description
        let note = RequestNote()
        do {
            var response = try await RequestNote.$current.withValue(note) { try await next(request, context) }
            AccessLogLine.addFields(to: &response.headers, id: id, allowOrigin: allowOrigin)
            log(
                request, id: id, status: response.status.code, bytes: response.body.contentLength ?? 0, since: start,
                note: note)
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            note.note("\(error)")
            log(request, id: id, status: status, bytes: 0, since: start, note: note)
            throw error
        }
    }

    private func log(
        _ request: Request, id: String, status: Int, bytes: Int, since start: ContinuousClock.Instant, note: RequestNote
    ) {
        let (cause, cache) = note.values
        AccessLogLine.record(
            logger: logger, metrics: metrics, method: request.method, path: request.uri.path, id: id, status: status,
            bytes: bytes, since: start, cause: cause, cache: cache)
    }
}

/// What a request's access-log line says beyond its status: why it failed, in more words
/// than its answer gives (the source's URL, the system's reason), and where its answer
/// came from (``ResponseMeta/cache``). Set where the answer is made, read by
/// ``AccessLog`` once it is.
final class RequestNote: Sendable {
    @TaskLocal static var current: RequestNote?
    private let value = Lock<(cause: String?, cache: String?)>((nil, nil))

    func note(_ cause: String) { value.withLock { $0.cause = cause } }
    func cache(_ outcome: String) { value.withLock { $0.cache = outcome } }
    var values: (cause: String?, cache: String?) { value.withLock { $0 } }
}

/// The access log's line and the request and byte metrics of one request, for the
/// router's ``AccessLog`` and for answers from the result cache that never reach the
/// router (``CachedResultHandler``).
enum AccessLogLine {
    /// A request id from the proxy in front (nginx's `$request_id`), when it is short
    /// and plain: letters, digits, `-` and `_`, at most 64.
    static func acceptable(_ id: String) -> String? {
        let plain = id.utf8.allSatisfy { byte in
            (48...57).contains(byte) || (65...90).contains(byte) || (97...122).contains(byte) || byte == 45
                || byte == 95
        }
        return plain && !id.isEmpty && id.utf8.count <= 64 ? id : nil
    }

    /// The fields every answer carries, whichever door it leaves by (the router's
    /// ``AccessLog`` or ``CachedResultHandler``): `X-Request-Id`, and imgproxy's CORS
    /// fields when `IMGPROXY_ALLOW_ORIGIN` is set.
    static func addFields(to headers: inout HTTPFields, id: String, allowOrigin: String?) {
        headers[.requestID] = id
        if let allowOrigin {
            headers[.accessControlAllowOrigin] = allowOrigin
            headers[.accessControlAllowMethods] = "GET, OPTIONS"
        }
    }

    /// Logs the line: the message `METHOD PATH STATUS`, and as fields the method, path,
    /// status and bytes (numbers), the time taken in milliseconds, the request id, where
    /// the answer came from (`cache`) and why it failed (`error`).
    static func record(
        logger: Logger, metrics: ServiceMetrics, method: HTTPRequest.Method, path: String, id: String, status: Int,
        bytes: Int, since start: ContinuousClock.Instant, cause: String? = nil, cache: String? = nil
    ) {
        metrics.responded(status: status, bytes: bytes)
        guard logger.logLevel <= .info else { return }
        let elapsed = ContinuousClock.now - start
        let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        var metadata: Logger.Metadata = [
            "request_id": .string(id), "method": .string(method.rawValue), "path": .string(path),
            "status": .stringConvertible(status), "bytes": .stringConvertible(bytes),
            "ms": .stringConvertible((milliseconds * 10).rounded() / 10),
        ]
        if let cache { metadata["cache"] = .string(cache) }
        if let cause { metadata["error"] = .string(cause) }
        logger.info("\(method) \(path) \(status)", metadata: metadata)
    }
}
