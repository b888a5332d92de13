// Copied from the documentation by scripts/sync-examples.py: edit the document, then run it.
import AsyncHTTPClient
import Foundation
import Hummingbird
import ImageLoader
import Logging
import RasterImage
import ServiceLifecycle

var configuration = ImageLoader.Configuration()
configuration.httpClient = HTTPClient.shared
configuration.cacheDirectory = NSTemporaryDirectory() + "image-cache"   // a service: /var/cache/images
let loader = try ImageLoader(configuration: configuration)
let router = Router()

router.post("/thumbnail") { request, context -> Response in
    let body = try await request.body.collect(upTo: 20 << 20)
    let thumb = try await loader.thumbnail(
        of: body.readableBytesView, options: ThumbnailOptions(maxPixelSize: 256),
        declaredContentType: request.headers[.contentType])
    return Response(
        status: .ok, headers: [.contentType: thumb.encoded?.contentType ?? "image/jpeg"],
        body: .init(byteBuffer: ByteBuffer(bytes: thumb.encoded?.bytes ?? [])))
}

router.get("/thumbnail") { request, context -> Response in
    guard let address = request.uri.queryParameters["url"], let url = URL(string: String(address)) else {
        return Response(status: .badRequest)
    }
    let token = ProcessInfo.processInfo.environment["ORIGIN_TOKEN"] ?? "none"
    let options = LoadOptions(headers: [HeaderField("Authorization", "Bearer " + token)], deadline: .now + .seconds(3))
    do {
        let thumb = try await loader.thumbnail(for: url, options: ThumbnailOptions(maxPixelSize: 256), loadOptions: options)
        return Response(
            status: .ok, headers: [.contentType: thumb.encoded?.contentType ?? "image/jpeg"],
            body: .init(byteBuffer: ByteBuffer(bytes: thumb.encoded?.bytes ?? [])))
    } catch let error as ImageLoadingError {
        return Response(status: error.reason == .timeout ? .gatewayTimeout : .badGateway)
    }
}

let port = Int(ProcessInfo.processInfo.environment["PORT"] ?? "") ?? 8080
let app = Application(
    router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)),
    onServerRunning: { channel in print("listening on http://127.0.0.1:\(channel.localAddress?.port ?? port)") })
let group = ServiceGroup(
    configuration: .init(
        services: [loader, app], gracefulShutdownSignals: [.sigterm, .sigint], logger: Logger(label: "server")))
try await group.run()
