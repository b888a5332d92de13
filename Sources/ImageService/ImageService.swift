import CoreMetrics
import Crypto
import Foundation
import HTTPTypes
import ImageLoader
import ImageLoaderSupport
import Logging
import ObjectStorage
import RasterImage
import ServiceLifecycle

/// A thumbnail service that speaks imgproxy's URLs: parse and check the URL, fetch the
/// source through an `ImageLoader` (its RFC 9111 disk cache, one download per URL),
/// make the thumbnail on a bounded number of workers, and answer with the caching
/// headers a CDN needs. ``application(host:port:maxConnections:idleTimeout:metricsText:onServerRunning:logger:)``
/// makes the hardened HTTP application in one call (what `imageloader serve` runs);
/// ``addRoutes(to:metricsText:)`` mounts the routes in a router of your own.
///
/// ```swift
/// var configuration = ImageService.Configuration()
/// configuration.signature = try URLSignature(hexPairs: [(key: key, salt: salt)])
/// let service = try ImageService(configuration: configuration)
/// let app = service.application(host: "0.0.0.0", port: 8080)
/// try await ServiceGroup(services: [service, app], gracefulShutdownSignals: [.sigterm], logger: logger).run()
/// ```
///
/// Every request is bounded: at most ``Configuration/workers`` images are processed at
/// once, ``Configuration/fetchesAhead`` more requests fetch their sources meanwhile, and
/// ``Configuration/queue`` wait (no limit by default, as imgproxy's: the connection limit
/// and the timeout bound them); beyond that the answer is an immediate 429 with
/// `Retry-After`, and past the timeout a 503, so memory and latency stay bounded under
/// any load. Request bodies
/// (`POST /info`, `/upload`) are read in places of their own, as many as workers, with a
/// queue as long: a slow sender holds no place of image requests. Identical
/// requests in flight share one result; results are kept in memory while their source
/// is fresh. With ``ImageServiceRequestContext`` (or any ``ChannelRequestContext``) and
/// the handlers of ``connectionHandlers(maxConnections:)`` on each connection (as
/// ``application(host:port:maxConnections:idleTimeout:metricsText:onServerRunning:logger:)``
/// puts them), a request whose client has gone stops.
public final class ImageService: Service, Sendable {
    /// ``Configuration/resultStorage`` names a bucket of a store the loader does not have.
    public struct ResultStorageUnavailable: Error, CustomStringConvertible {
        /// The location asked for.
        public let location: URL
        public var description: String {
            "result storage \(location.absoluteString): its store is not configured (objectStorage)"
        }
    }

    /// The settings the service was made with.
    public let configuration: Configuration
    let loader: ImageLoader
    let results: ResultCache?
    /// The bucket results are shared through, when configured.
    let storage: ResultStorage?
    let admission: WorkScheduler
    /// Request bodies (`POST /info`, `/upload`) being read, and held until answered: apart
    /// from `admission`, so clients that send a body slowly hold no place of image
    /// requests; as many as workers, each at most `maxSourceBytes`.
    let bodies: WorkScheduler
    let shared = SharedWork<SharedRunKey, Reply, Never, Never>()
    let metrics: ServiceMetrics
    /// Where `local:///` sources are read: one thread per request that may be fetching,
    /// apart from NIO's shared pool (where name lookups wait) and from the workers.
    let fileReads: WaitingThreads
    /// The watermark, with its resized copies.
    let watermark: WatermarkImage?
    /// The encoders for each result format, with the configured qualities.
    let encoders: ResultEncoders
    /// Requests that have held a worker's place and ended (``activity``).
    let finishedWork = Lock(0)
    /// Set by ``startDraining()``: `/health` answers 503.
    private let draining = Lock(false)

    /// A service with its own loader, made from `configuration.loader` and the limits.
    public init(configuration: Configuration) throws {
        self.configuration = configuration
        var loaderConfiguration = configuration.loader
        loaderConfiguration.cacheImagesInMemory = false
        // What a source is, is judged from its bytes, as other image services do: origins
        // often label images application/octet-stream or by the wrong extension.
        loaderConfiguration.checksDeclaredContentType = false
        loaderConfiguration.decodingThreads = max(1, configuration.workers)
        loaderConfiguration.workerNiceness = configuration.workerNiceness
        loaderConfiguration.concurrentLoads = max(loaderConfiguration.concurrentLoads, configuration.inFlightLimit)
        loaderConfiguration.http.maxResponseBytes = configuration.maxSourceBytes
        loaderConfiguration.http.timeout = configuration.downloadTimeout
        if loaderConfiguration.defaultCacheControlMaxAge == nil {
            loaderConfiguration.defaultCacheControlMaxAge = TimeInterval(max(0, configuration.sourceTTL))
        }
        if !configuration.network.allowsPrivateNetworks {
            let policy = configuration.network
            loaderConfiguration.http.addressFilter = { text in IPAddress(text).map(policy.allows) ?? false }
        }
        var limits = loaderConfiguration.decodingOptions.limits
        limits.maxInputBytes = configuration.maxSourceBytes
        limits.maxPixelsPerFrame = configuration.maxSourcePixels
        loaderConfiguration.decodingOptions.limits = limits
        if let location = configuration.resultStorage {
            guard let scheme = location.scheme?.lowercased(),
                configuration.objectStorage.schemes.contains(scheme),
                location.host?.isEmpty == false
            else {
                throw ResultStorageUnavailable(location: location)
            }
        }
        // The stores read sources through the loader (its cache above them) and keep
        // results directly; the loader shuts them down with itself.
        let stores =
            configuration.objectStorage.schemes.isEmpty
            ? nil : try ObjectStorageDataLoader(configuration.objectStorage, wrapping: loaderConfiguration)
        if let stores { loaderConfiguration.dataLoader = stores }
        loader = try ImageLoader(configuration: loaderConfiguration)
        if let location = configuration.resultStorage, let stores {
            storage = ResultStorage(location: location, stores: stores, logger: configuration.logger)
        } else {
            storage = nil
        }
        results = configuration.resultCacheBytes > 0 ? ResultCache(maxBytes: configuration.resultCacheBytes) : nil
        admission = WorkScheduler(
            limit: configuration.inFlightLimit, order: .fifo, maxWaiting: configuration.queue)
        // As many bodies as workers: more would only wait for a worker, holding memory.
        bodies = WorkScheduler(limit: max(1, configuration.workers), order: .fifo, maxWaiting: configuration.queue)
        metrics = ServiceMetrics(
            factory: configuration.metricsFactory ?? MetricsSystem.factory, workers: configuration.workers)
        fileReads = WaitingThreads(threads: min(configuration.inFlightLimit, 64))
        watermark = configuration.watermark.map { WatermarkImage(image: $0, opacity: configuration.watermarkOpacity) }
        encoders = ResultEncoders(configuration)
    }

    /// Waits for graceful shutdown (the HTTP server, started after this service in a
    /// `ServiceGroup`, stops first and finishes what is in flight), then shuts the
    /// loader down.
    public func run() async throws {
        try await runEvery([{ try await self.loader.run() }, { await self.fileReads.shutdown() }])
    }

    /// From now on `GET /health` answers 503 `draining`, while every other route is served
    /// as before: call it when the process is asked to stop, and close the listener a
    /// few seconds later, once load balancers (Kubernetes' readiness probe, an upstream's
    /// health check) have stopped sending requests here. `imageloader serve` calls it on
    /// SIGTERM and waits `--drain-delay`.
    ///
    /// ```swift
    /// service.startDraining()
    /// try await Task.sleep(for: .seconds(5))
    /// await serviceGroup.triggerGracefulShutdown()
    /// ```
    public func startDraining() {
        draining.withLock { $0 = true }
    }

    /// Whether ``startDraining()`` was called.
    public var isDraining: Bool { draining.withLock { $0 } }

    /// Shuts the loader down (for use without a `ServiceGroup`).
    public func shutdown() async throws {
        try await runEvery([{ await self.fileReads.shutdown() }, { try await self.loader.shutdown() }])
    }
}
