import Hummingbird
import ImageLoaderSupport
import NIOCore
import RasterImage

/// Notices a client that leaves before its answer: the work for it stops, and the
/// request is logged and counted with status 499, as nginx does. A request waiting in
/// the queue leaves it; a download or a thumbnail that no other request waits for is
/// cancelled (a decode already running on a worker finishes, and its result is dropped).
///
/// A client that closes its connection sends end-of-input (or a reset). Hummingbird
/// keeps a half-closed connection open, so nothing else tells a running request that
/// its client has gone; without this handler the service finishes every abandoned
/// request and learns only when it writes the answer.
///
/// One per connection, from ``ImageService/connectionHandlers(maxConnections:)``; the
/// router's context must conform to ``ChannelRequestContext`` for requests to find it.
///
/// A client that half-closes its side after sending a request, and still reads the
/// answer, counts as gone: nginx treats it so too (`proxy_ignore_client_abort off`).
final class ClientDepartureHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    let departure = ClientDeparture()

    /// A handler for one connection (the `additionalChannelHandlers` closure makes one per connection).
    init() {}

    /// End-of-input from the client: it has gone.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed { departure.depart() }
        context.fireUserInboundEventTriggered(event)
    }

    /// The connection closed (a reset included): the client has gone.
    func channelInactive(context: ChannelHandlerContext) {
        departure.depart()
        context.fireChannelInactive()
    }

    /// The departure of the client on `channel`, when the channel has the handler.
    static func departure(on channel: any Channel) async -> ClientDeparture? {
        try? await channel.eventLoop.submit {
            try channel.pipeline.syncOperations.handler(type: ClientDepartureHandler.self).departure
        }.get()
    }
}

/// A request context that carries the channel its request came on, so the service can
/// stop working for a client that has gone (see
/// ``ImageService/connectionHandlers(maxConnections:)``).
public protocol ChannelRequestContext: RequestContext {
    /// The connection the request arrived on.
    var channel: any Channel { get }
}

/// Hummingbird's basic request context plus the request's channel: the context
/// `imageloader serve` uses.
///
/// ```swift
/// let router = Router(context: ImageServiceRequestContext.self)
/// ```
public struct ImageServiceRequestContext: ChannelRequestContext {
    /// Hummingbird's per-request storage (logger, parameters, id).
    public var coreContext: CoreRequestContextStorage
    /// The connection the request arrived on.
    public let channel: any Channel

    /// The context of a request from `source`, the application's connection.
    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}

/// One connection's client leaving: requests wait on it beside their work.
final class ClientDeparture: Sendable {
    private struct State {
        var departed = false
        var waiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
    }

    private let state = Lock(State())

    var hasDeparted: Bool { state.withLock { $0.departed } }

    /// The client has gone: every waiter returns, and so will any later one.
    func depart() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            state.departed = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Throws ``ServiceError`` 499 once the client has gone, or `CancellationError` once
    /// the calling task is cancelled.
    func left() async throws -> Never {
        let id = Identity.next()
        try await state.suspend { state, continuation in
            if state.departed { return .success(()) }
            state.waiters[id] = continuation
            return nil
        } onCancel: { state in
            state.waiters.removeValue(forKey: id)
        }
        throw ServiceError.clientClosed
    }
}
