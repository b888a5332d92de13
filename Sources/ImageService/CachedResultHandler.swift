import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import ImageLoader
import NIOCore
import NIOHTTPTypes

/// Answers requests for results the service already holds straight from the
/// connection's event loop, before Hummingbird's router: a hit of the result cache
/// costs no task, no hop between threads and no routing. Everything else goes on to
/// the router unchanged.
///
/// The answer is the one the route gives: the same status (200, or 304 for a matching
/// `If-None-Match` or `If-Modified-Since`), caching header fields, `X-Request-Id` (the
/// proxy's, or a new one) and `Date`, and the same access-log line and metrics.
///
/// Only `GET` and `HEAD` without a body or `Connection: close` are answered here, and
/// only while no earlier request of the connection is still with the router, so answers
/// keep the order of their requests. The router's middleware does not see these
/// requests: add the handler only when nothing in front of ``ImageService/addRoutes(to:metricsText:)``
/// must (authentication, rate limits). One handler per connection:
///
/// ```swift
/// let app = Application(
///     router: router,
///     server: .http1(configuration: .init(additionalChannelHandlers: [
///         ClientDepartureHandler(), CachedResultHandler(service: service),
///     ])))
/// ```
public final class CachedResultHandler: ChannelDuplexHandler, RemovableChannelHandler {
    public typealias InboundIn = HTTPRequestPart
    public typealias InboundOut = HTTPRequestPart
    public typealias OutboundIn = HTTPResponsePart
    public typealias OutboundOut = HTTPResponsePart

    private let service: ImageService
    /// Requests passed to the router whose answers have not ended yet.
    private var withRouter = 0
    /// An answer from the cache, written once its request's end arrives.
    private var pending: (answer: Reply, head: HTTPRequest, id: String, start: ContinuousClock.Instant)?
    /// The `Date` field, made again when the second changes.
    private var date: (second: Int, text: String) = (-1, "")

    /// A handler for one connection of `service`.
    public init(service: ImageService) {
        self.service = service
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        switch part {
        case .head(let request):
            let start = ContinuousClock.now
            if withRouter == 0, let answer = cachedAnswer(request) {
                let id = request.headerFields[.requestID].flatMap(AccessLogLine.acceptable)
                pending = (answer, request, id ?? RequestID().description, start)
                return
            }
            withRouter += 1
        case .body:
            // A request answered here has no body: nothing comes before its end.
            if pending != nil { return }
        case .end:
            if let pending {
                self.pending = nil
                write(pending.answer, for: pending.head, id: pending.id, since: pending.start, context: context)
                return
            }
        }
        context.fireChannelRead(data)
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data), withRouter > 0 { withRouter -= 1 }
        context.write(data, promise: promise)
    }

    /// The cached answer to `request`, when it is one this handler may give.
    private func cachedAnswer(_ request: HTTPRequest) -> Reply? {
        guard request.method == .get || request.method == .head,
            request.headerFields[.connection].map({ !$0.lowercased().contains("close") }) ?? true,
            request.headerFields[.transferEncoding] == nil,
            request.headerFields[.contentLength].map({ $0 == "0" }) ?? true
        else { return nil }
        let conditions = Conditions(
            ifNoneMatch: request.headerFields[.ifNoneMatch], ifModifiedSince: request.headerFields[.ifModifiedSince])
        let reply = service.cachedReply(
            path: URI(request.path ?? "").path, accept: request.headerFields[.accept], conditions: conditions)
        switch reply {
        case .image, .notModified: return reply
        default: return nil
        }
    }

    private func write(
        _ answer: Reply, for request: HTTPRequest, id: String, since start: ContinuousClock.Instant,
        context: ChannelHandlerContext
    ) {
        var status = HTTPResponse.Status.ok
        var headers: HTTPFields
        var body: ByteBuffer?
        switch answer {
        case .image(let result):
            headers = Reply.headers(result.meta)
            headers[.contentType] = result.meta.contentType
            body = result.body
        case .notModified(let meta):
            status = .notModified
            headers = Reply.headers(meta)
        default:
            // cachedAnswer takes only the two above.
            headers = [:]
        }
        let bytes = body?.readableBytes ?? 0
        if status == .ok { headers[.contentLength] = String(bytes) }
        headers[.requestID] = id
        headers[.date] = currentDate()
        context.write(wrapOutboundOut(.head(HTTPResponse(status: status, headerFields: headers))), promise: nil)
        if let body, request.method != .head { context.write(wrapOutboundOut(.body(body)), promise: nil) }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        AccessLogLine.record(
            logger: service.configuration.logger, metrics: service.metrics, method: request.method,
            path: URI(request.path ?? "").path, id: id, status: status.code,
            bytes: request.method == .head ? 0 : bytes, since: start)
    }

    /// The `Date` header field for now (RFC 9110's IMF-fixdate), formatted once a second.
    private func currentDate() -> String {
        let now = Date()
        let second = Int(now.timeIntervalSince1970)
        if second != date.second { date = (second, HTTPDate.format(Date(timeIntervalSince1970: Double(second)))) }
        return date.text
    }
}
