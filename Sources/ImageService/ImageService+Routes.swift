import Foundation
import HTTPTypes
import Hummingbird
import ImageLoader
import ImageLoaderSupport
import Logging
import NIOCore
import NIOHTTPTypes

extension ImageService {
    /// Adds the service's routes to `router`, behind an access log (one line per
    /// request, with its id, also sent back as `X-Request-Id`):
    ///
    /// | route | answer |
    /// |---|---|
    /// | `GET /{signature}/{options}/{source}` | the processed image (see ``ProcessingURL``) |
    /// | `POST /info` | the body's `ImageDescription` as JSON: format, size, frames, alpha, orientation, colour profile, EXIF fields, dominant colours, BlurHash and ThumbHash |
    /// | `GET /info/{signature}/{options}/{source}` | the same for a source, signed as image URLs are; `bh:{x}:{y}` sets BlurHash's components |
    /// | `POST /upload/{options}` | the thumbnail of the body (when ``Configuration/allowsUploads``) |
    /// | `HEAD /{signature}/...` | the same status and header fields, without the body |
    /// | `GET /health` | `ok` |
    /// | `GET /metrics` | the metrics, when `metricsText` is given (Prometheus text) |
    ///
    /// When `Context` is a ``ChannelRequestContext`` and the connection has the handlers
    /// of ``connectionHandlers(maxConnections:)``, a request whose client closes the connection stops
    /// and is logged as 499.
    ///
    /// ```swift
    /// let registry = PrometheusCollectorRegistry()
    /// configuration.metricsFactory = PrometheusMetricsFactory(registry: registry)
    /// let service = try ImageService(configuration: configuration)
    /// service.addRoutes(to: router, metricsText: { registry.emitToString() })
    /// ```
    public func addRoutes<Context: RequestContext>(
        to router: Router<Context>, metricsText: (@Sendable () -> String)? = nil
    ) {
        let prefix = configuration.pathPrefix
        let group = router.group(RouterPath(prefix)).add(
            middleware: AccessLog<Context>(logger: configuration.logger, metrics: metrics))
        group.get("health") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/plain"], body: .init(byteBuffer: ByteBuffer(string: "ok\n")))
        }
        group.get("metrics") { _, _ in
            guard let metricsText else { return Reply.failure(ServiceError(status: 404, "no metrics")).response }
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: metricsText())))
        }
        group.post("info") { request, context in
            await self.withBody(request, context) { body in
                await self.info(of: body, contentType: request.headers[.contentType])
            }.response
        }
        group.get("info/**") { request, context in
            await self.info(path: request.uri.path, departure: { await ImageService.departure(context) }).response
        }
        group.post("upload/**") { request, context in
            guard self.configuration.allowsUploads else {
                return Reply.failure(ServiceError(status: 404, "uploads are not enabled")).response
            }
            let path = request.uri.path.dropFirst(prefix.count + "/upload".count)
            return await self.withBody(request, context) { body in
                await self.upload(
                    optionsPath: path, body: body, accept: request.headers[.accept],
                    contentType: request.headers[.contentType])
            }.response
        }
        group.get("**") { request, context in await self.process(request, context).response }
        // HEAD: the same status and header fields, the length of the body, no body.
        group.head("**") { request, context in await self.process(request, context).response.createHeadResponse() }
    }

    /// The answer to a processing URL, with the request's `Accept` and conditional fields.
    private func process<Context: RequestContext>(_ request: Request, _ context: Context) async -> Reply {
        let conditions = Conditions(
            ifNoneMatch: request.headers[.ifNoneMatch], ifModifiedSince: request.headers[.ifModifiedSince])
        return await process(
            path: request.uri.path, accept: request.headers[.accept], conditions: conditions,
            departure: { await ImageService.departure(context) })
    }

    /// The request's connection, when the context carries it (a ``ChannelRequestContext``).
    private static func channel<Context: RequestContext>(of context: Context) -> (any Channel)? {
        (context as? any ChannelRequestContext)?.channel
    }

    /// The departure of the request's client, when the context carries its channel and
    /// the channel has a ``ClientDepartureHandler``.
    private static func departure<Context: RequestContext>(_ context: Context) async -> ClientDeparture? {
        guard let channel = channel(of: context) else { return nil }
        return await ClientDepartureHandler.departure(on: channel)
    }

    /// Answers `100 Continue` to a request that expects it (`Expect: 100-continue`),
    /// once its body is about to be read, as clients such as curl wait for that (a
    /// second, for curl) before they send the body. Needs a ``ChannelRequestContext``.
    private static func invitingBody<Context: RequestContext>(_ request: Request, _ context: Context) async {
        guard request.headers[.expect]?.lowercased() == "100-continue",
            let channel = channel(of: context)
        else { return }
        try? await channel.writeAndFlush(HTTPResponsePart.head(HTTPResponse(status: .continue)))
    }

    /// Collects the request's body (at most the source limit, else 413) within the
    /// timeout, and answers with `body` on a worker.
    ///
    /// The body is read in a place of its own (``ImageService/withBodyPlace(_:)``), kept
    /// until the answer, and only then waits for a worker: a client that sends its body
    /// slowly holds no place of the image requests, while the bodies held at once stay
    /// bounded. A `Content-Length` over the limit is a 413 before anything is read; a
    /// body the HTTP parser rejects (bad chunking) is a 400.
    private func withBody<Context: RequestContext>(
        _ request: Request, _ context: Context, _ body: @escaping @Sendable ([UInt8]) async -> Reply
    ) async -> Reply {
        let maxBytes = configuration.maxSourceBytes
        let tooLarge = ServiceError(status: 413, "body larger than \(maxBytes) bytes")
        if let declared = request.headers[.contentLength].flatMap(Int.init), declared > maxBytes {
            return .failure(tooLarge)
        }
        do {
            return try await withTimeout(leavingWith: await ImageService.departure(context)) {
                try await self.withBodyPlace {
                    await ImageService.invitingBody(request, context)
                    let buffer: ByteBuffer
                    do {
                        buffer = try await request.body.collect(upTo: maxBytes)
                    } catch is NIOTooManyBytesError {
                        throw tooLarge
                    } catch let error as CancellationError {
                        throw error
                    } catch {
                        throw ServiceError(status: 400, "unreadable request body")
                    }
                    return try await self.admitted(PriorityHandle(.normal)) {
                        await body(Array(buffer.readableBytesView))
                    }
                }
            }
        } catch {
            return .failure(ServiceError.from(error))
        }
    }
}

/// An answer, before it becomes a Hummingbird `Response`.
enum Reply: Sendable {
    case image(ProcessedResult)
    case notModified(ResponseMeta)
    /// JSON; cacheable for `maxAge` seconds when above 0, else `no-store`.
    case json([UInt8], maxAge: Int = 0)
    case upload([UInt8], contentType: String)
    case failure(ServiceError)

    var response: Response {
        switch self {
        case .image(let result):
            var headers = Reply.headers(result.meta)
            headers[.contentType] = result.meta.contentType
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: result.body))
        case .notModified(let meta):
            return Response(status: .notModified, headers: Reply.headers(meta))
        case .json(let bytes, let maxAge):
            return Response(
                status: .ok,
                headers: [
                    .contentType: "application/json",
                    .cacheControl: maxAge > 0 ? "public, max-age=\(maxAge)" : "no-store",
                ],
                body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
        case .upload(let bytes, let contentType):
            return Response(
                status: .ok, headers: [.contentType: contentType, .cacheControl: "no-store"],
                body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
        case .failure(let error):
            // The cause goes to the request's access-log line, not to the client.
            if let cause = error.cause { FailureCause.current?.note(cause) }
            var headers: HTTPFields = [.contentType: "text/plain; charset=utf-8"]
            headers[.cacheControl] = error.cacheControl
            if error.status == 429 || error.status == 503 { headers[.retryAfter] = "1" }
            return Response(
                status: HTTPResponse.Status(code: error.status), headers: headers,
                body: .init(byteBuffer: ByteBuffer(string: error.message + "\n")))
        }
    }

    /// The caching headers of an image or its 304.
    static func headers(_ meta: ResponseMeta) -> HTTPFields {
        let maxAge = max(0, Int(meta.freshUntil.timeIntervalSinceNow.rounded(.down)))
        var headers: HTTPFields = [.cacheControl: "public, max-age=\(maxAge)", .eTag: meta.entityTag]
        if let lastModified = meta.lastModified { headers[.lastModified] = lastModified }
        if meta.variesByAccept { headers[.vary] = "Accept" }
        if let disposition = meta.contentDisposition { headers[.contentDisposition] = disposition }
        return headers
    }
}

extension ServiceError {
    /// `no-store`, except a 404 of the source, which may be cached briefly.
    var cacheControl: String {
        isMissingSource && maxAge > 0 ? "public, max-age=\(maxAge)" : "no-store"
    }
}

/// One line per request: its id (the proxy's `X-Request-Id` when it sends a plain one,
/// else a new one), method, path, status, bytes sent and time taken; the id also goes
/// back as `X-Request-Id`. Feeds the request and byte metrics.
struct AccessLog<Context: RequestContext>: RouterMiddleware {
    let logger: Logger
    let metrics: ServiceMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response)
        async throws -> Response
    {
        let start = ContinuousClock.now
        // Hummingbird's own id, from its logger's metadata (not `context.id`, which traps
        // when the application's log handler keeps no metadata: a no-op one), else a new one.
        let id =
            request.headers[.requestID].flatMap(AccessLogLine.acceptable)
            ?? context.logger[metadataKey: "hb.request.id"]?.description ?? RequestID().description
        let cause = FailureCause()
        do {
            var response = try await FailureCause.$current.withValue(cause) { try await next(request, context) }
            response.headers[.requestID] = id
            log(
                request, id: id, status: response.status.code, bytes: response.body.contentLength ?? 0, since: start,
                cause: cause.text)
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            log(request, id: id, status: status, bytes: 0, since: start, cause: "\(error)")
            throw error
        }
    }

    private func log(
        _ request: Request, id: String, status: Int, bytes: Int, since start: ContinuousClock.Instant, cause: String?
    ) {
        AccessLogLine.record(
            logger: logger, metrics: metrics, method: request.method, path: request.uri.path, id: id, status: status,
            bytes: bytes, since: start, cause: cause)
    }
}

/// Why a request failed, in more words than its answer gives (the source's URL, the
/// system's reason), for its access-log line: set where the failure becomes an answer,
/// read by ``AccessLog`` once the answer is made.
final class FailureCause: Sendable {
    @TaskLocal static var current: FailureCause?
    private let value = Lock<String?>(nil)

    func note(_ cause: String) { value.withLock { $0 = cause } }
    var text: String? { value.withLock { $0 } }
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

    static func record(
        logger: Logger, metrics: ServiceMetrics, method: HTTPRequest.Method, path: String, id: String, status: Int,
        bytes: Int, since start: ContinuousClock.Instant, cause: String? = nil
    ) {
        metrics.responded(status: status, bytes: bytes)
        let elapsed = ContinuousClock.now - start
        let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        var metadata: Logger.Metadata = [
            "request_id": "\(id)", "bytes": "\(bytes)", "ms": "\(String(format: "%.1f", milliseconds))",
        ]
        if let cause { metadata["error"] = "\(cause)" }
        logger.info("\(method) \(path) \(status)", metadata: metadata)
    }
}

extension HTTPField.Name {
    static let requestID = HTTPField.Name("X-Request-Id")!
}
