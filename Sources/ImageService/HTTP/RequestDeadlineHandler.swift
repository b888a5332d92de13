import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Closes a connection whose request has not arrived in full (head and body) within a
/// deadline after its head.
///
/// Hummingbird's idle timeout restarts with every part of a request that arrives, and
/// a route that answers without reading the body leaves the rest of it to be read
/// after the answer. So a client that sends a `GET` with a large `Content-Length` and
/// then one byte of body every few seconds holds its connection for days. This bounds
/// that: the whole request must arrive within `deadline` of its head. The time an
/// answer takes to make is not counted. One handler per connection, made with the
/// others by ``ImageService/connectionHandlers(maxConnections:)`` (the one place they
/// are assembled), with the service's timeout plus a second as its deadline.
///
/// `imageloader serve` uses `--timeout`: the body of `POST /info` and `POST /upload` is
/// read within that too, and answered with 504 when it is late.
final class RequestDeadlineHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    private let deadline: TimeAmount
    /// When the head of the request still arriving came; `nil` between requests.
    private var started: NIODeadline?
    private var timer: Scheduled<Void>?

    /// A handler for one connection: each request's head and body must arrive within `deadline`.
    init(deadline: TimeAmount) {
        self.deadline = deadline
    }

    /// Starts the clock at a request's head and stops it at its end.
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            stopClock()
            started = .now()
        case .end:
            stopClock()
        case .body:
            break
        }
        context.fireChannelRead(data)
    }

    /// A request still arriving when the bytes read so far run out gets its timer; one
    /// that came whole (a `GET`, as a rule) never needs one.
    func channelReadComplete(context: ChannelHandlerContext) {
        if let started, timer == nil {
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            timer = context.eventLoop.scheduleTask(deadline: started + deadline) {
                loopBound.value.close(promise: nil)
            }
        }
        context.fireChannelReadComplete()
    }

    private func stopClock() {
        started = nil
        timer?.cancel()
        timer = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        stopClock()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stopClock()
    }
}

@available(*, unavailable)
extension RequestDeadlineHandler: Sendable {}
