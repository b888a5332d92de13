// Copied from the documentation by scripts/sync-examples.py: edit the document, then run it.
import Foundation
import ImageService
import Logging
import ServiceLifecycle

let environment = ProcessInfo.processInfo.environment
var configuration = ImageService.Configuration()
configuration.signature = try URLSignature(
    hexPairs: [(key: environment["IMGPROXY_KEY"] ?? "", salt: environment["IMGPROXY_SALT"] ?? "")])
// local:/// sources from the current folder, and one web origin.
configuration.sources = SourcePolicy(
    allowedPrefixes: ["local:///", "https://images.example.com/"], localRoot: FileManager.default.currentDirectoryPath)
let service = try ImageService(configuration: configuration)
let port = Int(environment["PORT"] ?? "") ?? 8080
let app = service.application(
    host: "127.0.0.1", port: port,
    onServerRunning: { channel in print("listening on http://127.0.0.1:\(channel.localAddress?.port ?? port)") })
// Shut down in reverse order: the server finishes its requests, then the service's loader stops.
try await ServiceGroup(
    configuration: .init(
        services: [service, app], gracefulShutdownSignals: [.sigterm, .sigint], logger: Logger(label: "app"))
).run()
