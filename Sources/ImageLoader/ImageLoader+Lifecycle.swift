import ServiceLifecycle

/// The loader as a service of a `ServiceGroup`: it serves until the group shuts down
/// gracefully (or its task is cancelled), then finishes the loads in flight and
/// releases its resources (``ImageLoader/shutdown()``).
///
/// ```swift
/// let loader = try ImageLoader(configuration: configuration)
/// let group = ServiceGroup(
///     configuration: .init(services: [loader, app], gracefulShutdownSignals: [.sigterm], logger: logger))
/// try await group.run()
/// ```
extension ImageLoader: Service {
    /// Serves until the service group shuts down gracefully (or the task is cancelled),
    /// then calls ``shutdown()``.
    public func run() async throws {
        // Returns at graceful shutdown; throws CancellationError when the task is cancelled.
        try? await gracefulShutdown()
        try await shutdown()
    }
}
