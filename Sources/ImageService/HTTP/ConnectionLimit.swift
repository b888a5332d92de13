import CoreMetrics
import ImageLoaderSupport
import NIOCore
import RasterImage

/// A bound on the client connections open at once, shared by every connection's
/// ``ConnectionLimitHandler``.
///
/// Every open connection holds a file descriptor and some memory, whether or not it
/// ever sends a request. Without a bound, clients that open connections and send
/// nothing (or a header a byte at a time) use up the process's descriptors. Then
/// new clients cannot connect, and the service cannot open sources, disk-cache files
/// or connections to origins either. With the bound, connections past it are closed
/// as soon as they are accepted. The process keeps the descriptors it needs, and nginx
/// in front fails over to another instance. Pair it with the HTTP server's idle timeout
/// (`HTTP1Channel.Configuration.idleTimeout`), which closes the connections that hold a
/// place without using it. ``ImageService/connectionHandlers(maxConnections:)`` makes
/// one limit and gives every connection its handler (the one place they are assembled).
///
/// Metrics: `imageservice_connections_open` (a gauge) and
/// `imageservice_connections_refused_total`.
final class ConnectionLimit: Sendable {
    /// The most connections open at once.
    let maximum: Int
    private let count = Lock(0)
    private let openGauge: Gauge
    private let refusedCounter: Counter

    /// A limit of `maximum` connections (at least 1); `metricsFactory` `nil`: the process's `MetricsSystem`.
    init(maximum: Int, metricsFactory: (any MetricsFactory)? = nil) {
        self.maximum = max(1, maximum)
        let factory = metricsFactory ?? MetricsSystem.factory
        openGauge = Gauge(label: "imageservice_connections_open", factory: factory)
        refusedCounter = Counter(label: "imageservice_connections_refused_total", factory: factory)
    }

    /// The connections open now.
    var open: Int { count.withLock { $0 } }

    /// Takes a place; `false` (and counted as refused) when none is left.
    func enter() -> Bool {
        let now = count.withLock { count -> Int? in
            guard count < maximum else { return nil }
            count += 1
            return count
        }
        guard let now else {
            refusedCounter.increment()
            return false
        }
        openGauge.record(now)
        return true
    }

    /// Gives back a place taken by ``enter()``.
    func leave() {
        openGauge.record(
            count.withLock { count in
                count -= 1
                return count
            })
    }
}

/// Closes its connection at once when the ``ConnectionLimit`` has no place left, and
/// gives the place back when the connection closes. Put one first in each
/// connection's `additionalChannelHandlers` (the closure makes one per connection).
final class ConnectionLimitHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private let limit: ConnectionLimit
    /// Whether the connection was counted yet (it is counted once, active or refused).
    private var admitted: Bool?

    /// A handler for one connection, counted against `limit`.
    init(limit: ConnectionLimit) {
        self.limit = limit
    }

    /// Added to a connection that is already open: it is counted now.
    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { admit(context) }
    }

    /// The connection opened: it takes a place, or is closed.
    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        admit(context)
    }

    /// The connection closed: its place is free again.
    func channelInactive(context: ChannelHandlerContext) {
        release()
        context.fireChannelInactive()
    }

    /// Removed from the pipeline while the connection stays: its place is free again.
    func handlerRemoved(context: ChannelHandlerContext) {
        release()
    }

    private func admit(_ context: ChannelHandlerContext) {
        guard admitted == nil else { return }
        admitted = limit.enter()
        if admitted == false { context.close(promise: nil) }
    }

    private func release() {
        if admitted == true { limit.leave() }
        admitted = false
    }
}

@available(*, unavailable)
extension ConnectionLimitHandler: Sendable {}
