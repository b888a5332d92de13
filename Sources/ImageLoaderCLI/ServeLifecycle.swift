import ArgumentParser
import CoreMetrics
import Foundation
import Hummingbird
import ImageLoader
import ImageLoaderSupport
import ImageService
import Logging
import Prometheus
import RasterImage
import ServiceLifecycle
import UnixSignals

/// SIGTERM or SIGINT: `/health` answers 503 (``ImageService/startDraining()``) for the
/// drain delay while requests are still served, then the group's graceful shutdown
/// closes the listeners and gives the requests in flight its time to finish. A second
/// signal skips what is left of the delay.
struct GracefulStop: Sendable {
    let service: ImageService
    let group: ServiceGroup
    /// The drain's length, as `--drain-delay` gives it (0 to 3600 seconds).
    let drainSeconds: Double
    let logger: Logger
    private let asked = Lock(false)

    init(service: ImageService, group: ServiceGroup, drainSeconds: Double, logger: Logger) {
        self.service = service
        self.group = group
        self.drainSeconds = drainSeconds
        self.logger = logger
    }

    /// Whether a signal asked the process to stop.
    var wasAsked: Bool { asked.withLock { $0 } }

    func run() async {
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        await withTaskGroup(of: Void.self) { tasks in
            for await signal in signals {
                let first = asked.withLock { asked in
                    defer { asked = true }
                    return !asked
                }
                guard first, drainSeconds > 0 else {
                    logger.notice("stopping", metadata: ["signal": "\(signal)"])
                    await group.triggerGracefulShutdown()
                    continue
                }
                service.startDraining()
                logger.notice(
                    "draining: /health answers 503 until the listener closes",
                    metadata: ["signal": "\(signal)", "seconds": .stringConvertible(drainSeconds)])
                let delay = Duration.milliseconds(Int(drainSeconds * 1000))
                tasks.addTask { [group] in
                    try? await Task.sleep(for: delay)
                    await group.triggerGracefulShutdown()
                }
            }
            tasks.cancelAll()
        }
    }
}

/// Returns freed memory to the system every `interval` while the service is idle after
/// work (``ImageService/returnFreeMemory()``): after a burst, resident memory falls
/// back towards its idle level instead of staying at its peak.
struct MemoryReturn: Sendable {
    let service: ImageService
    let interval: Duration
    let logger: Logger

    func run() async {
        var returnedAfter = 0
        while !Task.isCancelled {
            do { try await Task.sleep(for: interval) } catch { return }
            let activity = service.activity
            guard activity.idle, activity.finished != returnedAfter else { continue }
            returnedAfter = activity.finished
            let start = ContinuousClock.now
            await service.returnFreeMemory()
            logger.debug("returned free memory", metadata: ["took": "\(ContinuousClock.now - start)"])
        }
    }
}

/// A server of the command, whose failure to listen names its address and the option
/// that changes it ("cannot listen on 127.0.0.1:8080: the port is in use ...").
struct Listener: Service {
    let server: any Service
    let address: String
    let option: String

    func run() async throws {
        do {
            try await server.run()
        } catch {
            guard let code = Terminal.errno(of: error), [EADDRINUSE, EACCES, EADDRNOTAVAIL].contains(code) else {
                throw error
            }
            let why =
                switch code {
                case EADDRINUSE: "the port is in use by another program"
                case EACCES: "ports below 1024 need root (or CAP_NET_BIND_SERVICE)"
                default: "the address is not one of this machine's"
                }
            throw CommandFailure("cannot listen on \(address): \(why); choose another with \(option)")
        }
    }
}
