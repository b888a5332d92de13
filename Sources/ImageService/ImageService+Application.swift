import Hummingbird
import Logging
import NIOCore

extension ImageService {
    /// The HTTP application that serves this service, hardened as `imageloader serve`
    /// runs it: the routes (``addRoutes(to:metricsText:)``) on an
    /// ``ImageServiceRequestContext``, and on every connection, in this order, a
    /// ``ConnectionLimitHandler`` (connections past `maxConnections` are closed when
    /// accepted), a ``RequestDeadlineHandler`` (a request must arrive in full within the
    /// service's timeout and a second), a ``ClientDepartureHandler`` (work for a client
    /// that has gone stops) and a ``CachedResultHandler`` (results in memory are answered
    /// before the router), with Hummingbird's idle timeout. Run it after the service in
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
        let limit = ConnectionLimit(maximum: max(1, maxConnections))
        // A request's body may arrive until the timeout; a second more lets a late
        // upload's 504 go out first.
        let deadline = Self.timeAmount(configuration.timeout + .seconds(1))
        return Application(
            router: router,
            server: .http1(
                configuration: .init(
                    additionalChannelHandlers: [
                        ConnectionLimitHandler(limit: limit), RequestDeadlineHandler(deadline: deadline),
                        ClientDepartureHandler(), CachedResultHandler(service: self),
                    ],
                    idleTimeout: Self.timeAmount(idleTimeout))),
            configuration: .init(address: .hostname(host, port: port), serverName: nil),
            onServerRunning: onServerRunning,
            logger: logger)
    }

    /// A `Duration` as NIO's `TimeAmount`.
    private static func timeAmount(_ duration: Duration) -> TimeAmount {
        let (seconds, attoseconds) = duration.components
        let (nanoseconds, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return .nanoseconds(
            overflow ? .max : nanoseconds.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue)
    }
}
