// Copied from the documentation by scripts/sync-examples.py: edit the document, then run it.
import Foundation
import Hummingbird
import ImageService
import Logging
import ServiceLifecycle

let environment = ProcessInfo.processInfo.environment
var configuration = ImageService.Configuration()
configuration.signature = try URLSignature(
    hexPairs: [(key: environment["IMGPROXY_KEY"] ?? "", salt: environment["IMGPROXY_SALT"] ?? "")])
configuration.sources = SourcePolicy(allowedPrefixes: ["https://images.example.com/"])
let service = try ImageService(configuration: configuration)
let port = Int(environment["PORT"] ?? "") ?? 8080
let app = service.application(
    host: "127.0.0.1", port: port,
    onServerRunning: { channel in print("listening on http://127.0.0.1:\(channel.localAddress?.port ?? port)") })

let router = Router(context: ImageServiceRequestContext.self)
router.get("/hello") { _, _ in "hello" }   // a route of your own beside the service's
service.addRoutes(to: router)
let handlers = service.connectionHandlers(maxConnections: 4096)
let ownPort = Int(environment["OWN_PORT"] ?? "") ?? 8081
let own = Application(
    router: router,
    server: .http1(configuration: .init(additionalChannelHandlers: handlers(), idleTimeout: .seconds(60))),
    configuration: .init(address: .hostname("127.0.0.1", port: ownPort)),
    onServerRunning: { channel in print("own router on http://127.0.0.1:\(channel.localAddress?.port ?? ownPort)") })

try await ServiceGroup(
    configuration: .init(
        services: [service, app, own], gracefulShutdownSignals: [.sigterm, .sigint], logger: Logger(label: "images"))
).run()
