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
/// requests (so ``ImageService/connectionHandlers(maxConnections:)`` says: use it only
/// when nothing in front of the routes must see every request). One per connection.
final class CachedResultHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let service: ImageService
    /// Requests passed to the router whose answers have not ended yet.
    private var withRouter = 0
    /// An answer from the cache for a request, written once the request's end arrives.
    private struct Pending {
        let answer: Reply
        let method: HTTPRequest.Method
        let path: String
        let id: String
        let start: ContinuousClock.Instant
    }
    private var pending: Pending?
    /// The `Date` field, made again when the second changes.
    private var date: (second: Int, text: String) = (-1, "")

    /// A handler for one connection of `service`.
    init(service: ImageService) {
        self.service = service
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        switch part {
        case .head(let request):
            let start = ContinuousClock.now
            // The router's path: without the query, as received.
            let path = URI(request.path ?? "").path
            if withRouter == 0, let answer = cachedAnswer(request, path: path) {
                let id = request.headerFields[.requestID].flatMap(AccessLogLine.acceptable)
                pending = Pending(
                    answer: answer, method: request.method, path: path, id: id ?? RequestID().description, start: start)
                return
            }
            withRouter += 1
        case .body:
            // A request answered here has no body: nothing comes before its end.
            if pending != nil { return }
        case .end:
            if let pending {
                self.pending = nil
                write(pending, context: context)
                return
            }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data), withRouter > 0 { withRouter -= 1 }
        context.write(data, promise: promise)
    }

    /// The cached answer to `request` for `path`, when it is one this handler may give.
    private func cachedAnswer(_ request: HTTPRequest, path: String) -> Reply? {
        guard request.method == .get || request.method == .head,
            request.headerFields[.connection].map({ !$0.lowercased().contains("close") }) ?? true,
            request.headerFields[.transferEncoding] == nil,
            request.headerFields[.contentLength].map({ $0 == "0" }) ?? true
        else { return nil }
        let configuration = service.configuration
        // Traced requests all go to the router, where each gets its server span.
        guard !configuration.tracesRequests else { return nil }
        // What the router would refuse or answer for this user alone goes to the router.
        guard service.carriesSecret(request.headerFields[.authorization]), request.headerFields[.range] == nil,
            service.resultCacheMayAnswer(cookie: request.headerFields[.cookie])
        else { return nil }
        let conditions = configuration.validators.conditions(
            ifNoneMatch: request.headerFields[.ifNoneMatch], ifModifiedSince: request.headerFields[.ifModifiedSince])
        let reply = service.cachedReply(
            ResultCacheKey(path: path, features: ClientFeatures(request.headerFields, configuration: configuration)),
            conditions: conditions)
        switch reply {
        case .image, .notModified: return reply
        default: return nil
        }
    }

    /// Writes the answer: the route's status and fields (``Reply/response``), the body's
    /// length, the request id and the date, then the bytes (none for `HEAD`).
    private func write(
        _ pending: Pending,
        context: ChannelHandlerContext
    ) {
        let response = pending.answer.response(service.configuration)
        var headers = response.headers
        let body: ByteBuffer? = if case .image(let result) = pending.answer { result.body } else { nil }
        let bytes = body?.readableBytes ?? 0
        if response.status == .ok { headers[.contentLength] = String(bytes) }
        AccessLogLine.addFields(to: &headers, id: pending.id, allowOrigin: service.configuration.allowOrigin)
        headers[.date] = currentDate()
        // The line first, as the router's middleware writes it before the answer goes out:
        // whoever reads the log after the answer finds the request there.
        AccessLogLine.record(
            logger: service.configuration.logger, metrics: service.metrics, method: pending.method, path: pending.path,
            id: pending.id, status: response.status.code, bytes: pending.method == .head ? 0 : bytes,
            since: pending.start, cache: "result")
        context.write(
            wrapOutboundOut(.head(HTTPResponse(status: response.status, headerFields: headers))), promise: nil)
        if let body, pending.method != .head { context.write(wrapOutboundOut(.body(body)), promise: nil) }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    /// The `Date` header field for now (RFC 9110's IMF-fixdate), formatted once a second.
    private func currentDate() -> String {
        let now = Date()
        let second = Int(now.timeIntervalSince1970)
        if second != date.second { date = (second, HTTPDate.format(Date(timeIntervalSince1970: Double(second)))) }
        return date.text
    }
}
