import Hummingbird
import Logging
import NIOCore

extension ImageService {
    /// The HTTP application that serves this service, hardened as `imageloader serve`
    /// runs it: the routes (``addRoutes(to:metricsText:)``) on an
    /// ``ImageServiceRequestContext``, the handlers of ``connectionHandlers(maxConnections:)``
    /// on every connection, and Hummingbird's idle timeout. Run it after the service in
    /// a `ServiceGroup`, so it stops first and finishes what is in flight:
    ///
    /// ```swift
    /// let service = try ImageService(configuration: configuration)
    /// let app = service.application(host: "0.0.0.0", port: 8080)
    /// try await ServiceGroup(
    ///     configuration: .init(services: [service, app], gracefulShutdownSignals: [.sigterm], logger: logger)
    /// ).run()
    /// ```
    ///
    /// - Parameters:
    ///   - host: The address to listen on.
    ///   - port: The port (0: any free port; `onServerRunning` is told which).
    ///   - maxConnections: Client connections open at once.
    ///   - idleTimeout: How long a client may take to send a request's head, or the next
    ///     request after an answer.
    ///   - metricsText: The text of `GET /metrics`, when this application serves it.
    ///   - onServerRunning: Called once the server listens, with its channel.
    ///   - logger: The server's logger.
    public func application(
        host: String, port: Int, maxConnections: Int = 4096, idleTimeout: Duration = .seconds(60),
        metricsText: (@Sendable () -> String)? = nil,
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in },
        logger: Logger = Logger(label: "ImageService.http")
    ) -> Application<RouterResponder<ImageServiceRequestContext>> {
        let router = Router(context: ImageServiceRequestContext.self)
        addRoutes(to: router, metricsText: metricsText)
        let handlers = connectionHandlers(maxConnections: maxConnections)
        return Application(
            router: router,
            server: .http1(
                configuration: .init(
                    additionalChannelHandlers: handlers(), idleTimeout: Self.timeAmount(idleTimeout))),
            configuration: .init(address: .hostname(host, port: port), serverName: nil),
            onServerRunning: onServerRunning,
            logger: logger)
    }

    /// What each connection of an application serving this service needs, in order,
    /// for those who mount ``addRoutes(to:metricsText:)`` in an application of their own
    /// (beside routes of theirs) rather than use ``application(host:port:maxConnections:idleTimeout:metricsText:onServerRunning:logger:)``:
    ///
    /// 1. a connection limit: connections past `maxConnections` (counted over every
    ///    connection the returned closure's handlers see) are closed when accepted;
    /// 2. a request deadline: a request must arrive in full, body included, within the
    ///    service's timeout and a second, or its connection is closed;
    /// 3. client departures: the work for a client that has gone stops (the router's
    ///    context must conform to ``ChannelRequestContext``);
    /// 4. answers from the result cache on the event loop, before the router. The
    ///    router's middleware does not see those requests: leave this application's
    ///    routes to ``application(host:port:maxConnections:idleTimeout:metricsText:onServerRunning:logger:)``
    ///    when a middleware must see every request (authentication, rate limits).
    ///
    /// Without the first two, clients that open connections and send nothing, a head a
    /// byte at a time, or a body that never ends, use up the process's descriptors.
    /// Set Hummingbird's idle timeout beside them.
    ///
    /// ```swift
    /// let router = Router(context: ImageServiceRequestContext.self)
    /// service.addRoutes(to: router)
    /// router.get("/hello") { _, _ in "hello" }
    /// let handlers = service.connectionHandlers(maxConnections: 4096)
    /// let app = Application(
    ///     router: router,
    ///     server: .http1(configuration: .init(additionalChannelHandlers: handlers(), idleTimeout: .seconds(60))))
    /// ```
    ///
    /// - Returns: A closure that makes one connection's handlers each time it is called
    ///   (Hummingbird calls it for every connection it accepts).
    public func connectionHandlers(maxConnections: Int = 4096) -> @Sendable () -> [any RemovableChannelHandler] {
        let limit = ConnectionLimit(maximum: max(1, maxConnections))
        // A request's body may arrive until the timeout; a second more lets a late
        // upload's 504 go out first.
        let deadline = Self.timeAmount(configuration.timeout + .seconds(1))
        return { [self] in
            [
                ConnectionLimitHandler(limit: limit), RequestDeadlineHandler(deadline: deadline),
                ClientDepartureHandler(), CachedResultHandler(service: self),
            ]
        }
    }

    /// A `Duration` as NIO's `TimeAmount`.
    private static func timeAmount(_ duration: Duration) -> TimeAmount {
        let (seconds, attoseconds) = duration.components
        let (nanoseconds, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return .nanoseconds(
            overflow ? .max : nanoseconds.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue)
    }
}
