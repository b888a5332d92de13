import AsyncHTTPClient
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import RasterImage
import ServiceLifecycle
import Testing

@testable import ImageService

/// The routes in process: the application `imageloader serve` runs, through
/// HummingbirdTesting's router client (no sockets, so no name resolution: its live
/// client resolves "localhost" on NIO's shared blocking pool, which other tests of this
/// target hold on purpose, and then waited a minute); and the routes mounted with the
/// connection handlers in an application of one's own, on a real socket at 127.0.0.1.
@Suite("The routes, in process")
struct RouteTests {
    static let photo = "/insecure/rs:fit:64:64/plain/local:///photo.png"

    @Test(
        "serve's application: an image with its caching fields, a 304, a repeat from the result cache, /info, /health, /metrics, a 404"
    )
    func application() async throws {
        try await ProcessingReferenceTests.withService { service in
            let app = service.application(host: "127.0.0.1", port: 0, metricsText: { "imageservice_test 1\n" })
            try await app.test(.router) { client in
                let first = try await client.execute(uri: Self.photo, method: .get, headers: [.accept: "image/png"])
                #expect(first.status == .ok)
                // A PNG source stays PNG (imgproxy's preferred formats), whatever Accept lists.
                #expect(first.headers[.contentType] == "image/png")
                #expect(first.headers[.cacheControl] == "max-age=31536000, public")
                #expect(first.headers[.contentSecurityPolicy] == Reply.contentSecurityPolicy)
                let tag = try #require(first.headers[.eTag])
                let image = try ImageDecoder().decode(.bytes(Array(first.body.readableBytesView)))
                #expect(max(image.width, image.height) == 64)

                // The repeat is answered from the result cache: the same bytes and tag.
                let again = try await client.execute(uri: Self.photo, method: .get, headers: [.accept: "image/png"])
                #expect(again.status == .ok && again.body == first.body && again.headers[.eTag] == tag)
                let notModified = try await client.execute(
                    uri: Self.photo, method: .get, headers: [.accept: "image/png", .ifNoneMatch: tag])
                #expect(notModified.status == .notModified && notModified.body.readableBytes == 0)

                let source = try Data(
                    contentsOf: ProcessingReferenceTests.root.appendingPathComponent("sources/photo.png"))
                let info = try await client.execute(
                    uri: "/info", method: .post, headers: [.contentType: "image/png"], body: ByteBuffer(bytes: source))
                #expect(info.status == .ok)
                let description =
                    try JSONSerialization.jsonObject(with: Data(info.body.readableBytesView)) as? [String: Any]
                let decoded = try ImageDecoder().info(.bytes(Array(source)))
                #expect(description?["width"] as? Int == decoded.width)
                #expect(description?["format"] as? String == "png")

                let health = try await client.execute(uri: "/health", method: .get)
                #expect(health.status == .ok && String(buffer: health.body) == "imgproxy is running")
                #expect(health.headers[.cacheControl] == "no-cache" && health.headers[.contentType] == "text/plain")
                let metrics = try await client.execute(uri: "/metrics", method: .get)
                #expect(String(buffer: metrics.body) == "imageservice_test 1\n")
                let bad = try await client.execute(uri: "/insecure/nonsense:1/plain/local:///photo.png", method: .get)
                #expect(bad.status == .notFound)  // imgproxy's status for a URL naming nothing
                #expect(String(buffer: bad.body).contains("nonsense"))
            }
        }
    }

    @Test("the routes in an application of one's own, beside its own routes, with connectionHandlers, on a socket")
    func ownApplication() async throws {
        var configuration = ProcessingReferenceTests.configuration()
        configuration.autoWebP = true
        try await ProcessingReferenceTests.withService(configuration) { service in
            let router = Router(context: ImageServiceRequestContext.self)
            service.addRoutes(to: router)
            router.get("/hello") { _, _ in "hello" }
            let handlers = service.connectionHandlers(maxConnections: 16)
            let (ports, port) = AsyncStream<Int>.makeStream()
            let app = Application(
                router: router,
                server: .http1(configuration: .init(additionalChannelHandlers: handlers(), idleTimeout: .seconds(60))),
                configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { channel in
                    port.yield(channel.localAddress?.port ?? 0)
                    port.finish()
                },
                logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
            let group = ServiceGroup(
                configuration: .init(
                    services: [app], logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })))
            let running = Task { try await group.run() }
            defer { running.cancel() }
            var listening = 0
            for await value in ports { listening = value }
            let base = "http://127.0.0.1:\(listening)"
            let hello = try await HTTPClient.shared.execute(
                HTTPClientRequest(url: base + "/hello"), timeout: .seconds(60))
            #expect(String(buffer: try await hello.body.collect(upTo: 1 << 20)) == "hello")
            for _ in 0..<2 {
                var request = HTTPClientRequest(url: base + Self.photo)
                request.headers.add(name: "Accept", value: "image/webp")
                let image = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
                #expect(image.status == .ok && image.headers.first(name: "Content-Type") == "image/webp")
                #expect(image.headers.first(name: "Vary") == "Accept")
                let body = try await image.body.collect(upTo: 1 << 24)
                #expect(try ImageDecoder().info(.bytes(Array(body.readableBytesView))).format == .webp)
            }
            await group.triggerGracefulShutdown()
            try await running.value
        }
    }
}
