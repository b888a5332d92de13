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
    /// | `GET /{signature}/{options}/{source}` | the processed image (imgproxy's URL format: ``ImgproxyURL`` builds them) |
    /// | `POST /info` | the body's `ImageDescription` as JSON: format, size, frames, alpha, orientation, colour profile, EXIF fields, dominant colours, BlurHash and ThumbHash |
    /// | `GET /info/{signature}/{options}/{source}` | the same for a source, signed as image URLs are; `bh:{x}:{y}` sets BlurHash's components |
    /// | `POST /upload/{options}` | the thumbnail of the body (when ``Configuration/allowsUploads``) |
    /// | `GET /health` | 200 `imgproxy is running`; 503 once ``startDraining()`` was called |
    /// | `GET /metrics` | the metrics, when `metricsText` is given (Prometheus text) |
    /// | `HEAD` of any of these | the same status and header fields as `GET`, without the body |
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
        var group = router.group(RouterPath(prefix))
        // The server span outside the access log, so that the line is written inside it.
        if configuration.tracesRequests { group = group.add(middleware: TracingMiddleware<Context>()) }
        group = group.add(
            middleware: AccessLog<Context>(
                logger: configuration.logger, metrics: metrics, allowOrigin: configuration.allowOrigin))
        // Every route a GET reaches answers HEAD as GET would, without the body.
        func readable(_ path: RouterPath, _ handler: @escaping @Sendable (Request, Context) async -> Response) {
            group.get(path) { request, context in await handler(request, context) }
            group.head(path) { request, context in await handler(request, context).createHeadResponse() }
        }
        readable("health") { _, _ in self.health }
        if let path = configuration.healthCheckPath, path != "/health" {
            readable(RouterPath(path)) { _, _ in self.health }
        }
        readable("metrics") { _, _ in
            guard let metricsText else { return Reply.failure(ServiceError(status: 404, "no metrics")).response }
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: metricsText())))
        }
        readable("favicon.ico") { _, _ in Reply.failure(ServiceError(status: 404, "not found")).response }
        group.post("info") { request, context in
            if let refused = self.refusedBySecret(request) { return refused }
            return await self.withBody(request, context) { body in
                await self.info(of: body, contentType: request.headers[.contentType])
            }.response(self.configuration)
        }
        readable("info/**") { request, context in
            if let refused = self.refusedBySecret(request) { return refused }
            return await self.info(path: request.uri.path, departure: { await ImageService.departure(context) })
                .response(self.configuration)
        }
        group.post("upload/**") { request, context in
            if let refused = self.refusedBySecret(request) { return refused }
            guard self.configuration.allowsUploads else {
                return Reply.failure(ServiceError(status: 404, "uploads are not enabled")).response
            }
            let path = request.uri.path.dropFirst(prefix.count + "/upload".count)
            return await self.withBody(request, context) { body in
                await self.upload(
                    optionsPath: path, body: body, headers: request.headers, contentType: request.headers[.contentType])
            }.response(self.configuration)
        }
        group.get("**") { request, context in
            if let refused = self.refusedBySecret(request) { return refused }
            return await self.answer(request, context).response(self.configuration, range: request.headers[.range])
        }
        // HEAD: the same status and header fields, the length of the body, no body.
        group.head("**") { request, context in
            if let refused = self.refusedBySecret(request) { return refused }
            return await self.answer(request, context).response(self.configuration).createHeadResponse()
        }
        // OPTIONS: a CORS preflight's answer (the access log adds the CORS fields).
        group.on("**", method: .options) { _, _ in
            Response(status: .ok, headers: [.contentLength: "0"])
        }
    }

    /// `GET /health`: imgproxy's answer, never cached; a 503 while draining, so that load
    /// balancers and Kubernetes' readiness probe stop sending requests before the
    /// listener closes.
    var health: Response {
        let draining = isDraining
        return Response(
            status: draining ? .serviceUnavailable : .ok,
            headers: [.contentType: "text/plain", .cacheControl: "no-cache"],
            body: .init(byteBuffer: ByteBuffer(string: draining ? "draining\n" : "imgproxy is running")))
    }

    /// A 403 when a secret is set (``Configuration/secret``) and the request does not
    /// carry it as `Authorization: Bearer {secret}` (compared in constant time).
    private func refusedBySecret(_ request: Request) -> Response? {
        guard !carriesSecret(request.headers[.authorization]) else { return nil }
        return Reply.failure(ServiceError(status: 403, "invalid secret")).response(configuration)
    }

    /// Whether an `Authorization` value is `Bearer {secret}`, or no secret is set;
    /// compared in the same time however many bytes match.
    func carriesSecret(_ authorization: String?) -> Bool {
        guard let secret = configuration.secret, !secret.isEmpty else { return true }
        let expected = Array(("Bearer " + secret).utf8)
        let given = Array((authorization ?? "").utf8)
        var difference = expected.count == given.count ? 0 : 1
        for index in expected.indices { difference |= Int(expected[index] ^ (index < given.count ? given[index] : 0)) }
        return difference == 0
    }

    /// The answer to a processing URL, with the request's header fields.
    private func answer<Context: RequestContext>(_ request: Request, _ context: Context) async -> Reply {
        await answer(
            path: request.uri.path, headers: request.headers, authority: request.head.authority,
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

    /// imgproxy's `Content-Security-Policy`, sent with every answer: an image opened
    /// as a document (an SVG passed through, an HTML page labelled as an image) runs
    /// no script and loads nothing.
    static let contentSecurityPolicy = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox"

    /// The answer, errors as plain text.
    var response: Response { response(nil) }

    /// The answer under `configuration` (errors as HTML pages in development mode), a
    /// single byte range of a source passed through when `range` asks for one.
    func response(_ configuration: ImageService.Configuration?, range: String? = nil) -> Response {
        var response: Response
        switch self {
        case .image(let result):
            RequestNote.current?.cache(result.meta.cache)
            var headers = Reply.headers(result.meta)
            headers[.contentType] = result.meta.contentType
            let status = HTTPResponse.Status(code: result.meta.status)
            if let range, result.meta.status == 200, result.meta.extra[.acceptRanges] == "bytes" {
                return Reply.ranged(result.body, range: range, headers: headers)
            }
            response = Response(status: status, headers: headers, body: .init(byteBuffer: result.body))
        case .notModified(let meta):
            RequestNote.current?.cache(meta.cache)
            response = Response(status: .notModified, headers: Reply.headers(meta, notModified: true))
        case .json(let bytes, let maxAge):
            response = Response(
                status: .ok,
                headers: [
                    .contentType: "application/json",
                    .cacheControl: maxAge > 0 ? "max-age=\(maxAge), public" : "no-store",
                ],
                body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
        case .upload(let bytes, let contentType):
            response = Response(
                status: .ok, headers: [.contentType: contentType, .cacheControl: "no-store"],
                body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
        case .failure(let error):
            // The cause goes to the request's access-log line, not to the client.
            if let cause = error.cause { RequestNote.current?.note(cause) }
            var headers: HTTPFields = [.contentType: "text/plain; charset=utf-8"]
            headers[.cacheControl] = error.cacheControl
            if error.status == 429 || error.status == 503 { headers[.retryAfter] = "1" }
            var body = error.message + "\n"
            if configuration?.developmentErrors == true {
                headers[.contentType] = "text/html; charset=utf-8"
                body = Reply.errorPage(error)
            }
            response = Response(
                status: HTTPResponse.Status(code: error.status), headers: headers,
                body: .init(byteBuffer: ByteBuffer(string: body)))
        }
        response.headers[.contentSecurityPolicy] = Reply.contentSecurityPolicy
        return response
    }

    /// The header fields of an image or its 304: imgproxy's `Cache-Control`, the
    /// validators, `Vary`, `Content-Disposition` and the extra fields.
    static func headers(_ meta: ResponseMeta, notModified: Bool = false) -> HTTPFields {
        var headers: HTTPFields = [.cacheControl: meta.caching.value(at: Date())]
        if let tag = meta.entityTag { headers[.eTag] = tag }
        if let lastModified = meta.lastModified { headers[.lastModified] = lastModified }
        if let vary = meta.vary { headers[.vary] = vary }
        if !notModified, let disposition = meta.contentDisposition { headers[.contentDisposition] = disposition }
        headers.append(contentsOf: meta.extra)
        return headers
    }

    /// A 206 with the one range `range` asks for (`bytes=a-b`, `bytes=a-`, `bytes=-n`),
    /// a 416 when it lies past the end, the whole body for anything else (several
    /// ranges, another unit), as RFC 9110 allows.
    static func ranged(_ body: ByteBuffer, range: String, headers: HTTPFields) -> Response {
        var headers = headers
        headers[.contentSecurityPolicy] = contentSecurityPolicy
        let length = body.readableBytes
        let whole = Response(status: .ok, headers: headers, body: .init(byteBuffer: body))
        let spec = range.trimmingCharacters(in: .whitespaces)
        guard spec.lowercased().hasPrefix("bytes="), !spec.contains(",") else { return whole }
        let bounds = spec.dropFirst("bytes=".count).split(separator: "-", omittingEmptySubsequences: false).map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        guard bounds.count == 2 else { return whole }
        var first: Int
        var last: Int
        if bounds[0].isEmpty {
            guard let suffix = Int(bounds[1]), suffix > 0 else { return whole }
            (first, last) = (max(0, length - suffix), length - 1)
        } else {
            guard let start = Int(bounds[0]), start >= 0 else { return whole }
            first = start
            if bounds[1].isEmpty {
                last = length - 1
            } else {
                guard let end = Int(bounds[1]), end >= start else { return whole }
                last = min(end, length - 1)
            }
        }
        guard first < length, first <= last else {
            headers[.contentRange] = "bytes */\(length)"
            headers[.contentType] = "text/plain; charset=utf-8"
            return Response(
                status: .rangeNotSatisfiable, headers: headers,
                body: .init(byteBuffer: ByteBuffer(string: "range not satisfiable\n")))
        }
        headers[.contentRange] = "bytes \(first)-\(last)/\(length)"
        let part = body.getSlice(at: body.readerIndex + first, length: last - first + 1) ?? body
        return Response(status: .partialContent, headers: headers, body: .init(byteBuffer: part))
    }

    /// imgproxy's development error page: the status, the message and the cause, escaped.
    static func errorPage(_ error: ServiceError) -> String {
        func escaped(_ text: String) -> String {
            text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
                .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
        }
        return """
            <!DOCTYPE html>
            <html><head><meta charset="utf-8"><title>\(error.status) \(escaped(error.message))</title></head>
            <body><h1>\(error.status)</h1><p>\(escaped(error.message))</p><pre>\(escaped(error.cause ?? ""))</pre></body></html>

            """
    }
}

extension ServiceError {
    /// `no-store`, except a 404 of the source, which may be cached briefly.
    var cacheControl: String {
        isMissingSource && maxAge > 0 ? "public, max-age=\(maxAge)" : "no-store"
    }
}

extension HTTPField.Name {
    static let requestID = HTTPField.Name("X-Request-Id")!
}
