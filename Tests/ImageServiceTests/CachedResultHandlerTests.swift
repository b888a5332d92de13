import Foundation
import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOHTTPTypes
import RasterImage
import Testing

@testable import ImageService

@Suite("Answers from the result cache before the router")
struct CachedResultHandlerTests {
    /// A service reading local sources from a fresh folder holding `a.png` and `b.png`.
    private static func service(timeout: Duration) throws -> (ImageService, URL) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("cached-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for (name, red) in [("a.png", UInt8(200)), ("b.png", UInt8(30))] {
            let pixels: [UInt8] = (0..<(64 * 48)).flatMap { i -> [UInt8] in [red, UInt8(i % 256), 90, 255] }
            let png = try PNGEncoder().encode(RasterImage(width: 64, height: 48, pixels: pixels, hasAlpha: false)!)
            try Data(png).write(to: folder.appendingPathComponent(name))
        }
        var configuration = ImageService.Configuration()
        configuration.allowsUnsigned = true
        configuration.sources = SourcePolicy(localRoot: folder.path)
        configuration.loader.cacheDirectory = nil
        // (The whole suite runs at once on two cores, under the sanitizers several times
        // slower: no test here is about the timeout, which is long.)
        configuration.timeout = timeout
        return (try ImageService(configuration: configuration), folder)
    }

    /// Runs `body` with a service from ``service(timeout:)``, then shuts the service down
    /// and removes its folder, also when `body` throws: a loader dropped without a shutdown
    /// stops the whole test process (AsyncHTTPClient traps in its deinit).
    static func withService(
        timeout: Duration = .seconds(600), _ body: (ImageService) async throws -> Void
    ) async throws {
        let (service, folder) = try service(timeout: timeout)
        defer { try? FileManager.default.removeItem(at: folder) }
        do {
            try await body(service)
        } catch {
            try? await service.shutdown()
            throw error
        }
        try await service.shutdown()
    }

    static func request(_ path: String, method: HTTPRequest.Method = .get, _ fields: HTTPFields = [:]) -> HTTPRequest {
        HTTPRequest(method: method, scheme: nil, authority: nil, path: path, headerFields: fields)
    }

    /// Sends a request's head and end into the channel.
    static func send(_ request: HTTPRequest, to channel: EmbeddedChannel) throws {
        try channel.writeInbound(HTTPRequestPart.head(request))
        try channel.writeInbound(HTTPRequestPart.end(nil))
    }

    /// The parts written back, in order.
    static func answer(_ channel: EmbeddedChannel) throws -> [HTTPResponsePart] {
        var parts: [HTTPResponsePart] = []
        while let part = try channel.readOutbound(as: HTTPResponsePart.self) { parts.append(part) }
        return parts
    }

    /// The parts passed on toward the router, in order.
    static func forwarded(_ channel: EmbeddedChannel) throws -> [HTTPRequestPart] {
        var parts: [HTTPRequestPart] = []
        while let part = try channel.readInbound(as: HTTPRequestPart.self) { parts.append(part) }
        return parts
    }

    @Test("a cached result is answered on the connection with the route's status, fields and body; the rest go on")
    func answersHits() async throws {
        try await Self.withService { service in try await answersHits(service) }
    }

    private func answersHits(_ service: ImageService) async throws {
        let (hit, miss) = ("/insecure/w:20/plain/local:///a.png", "/insecure/w:20/plain/local:///b.png")
        // Given a result the service has made (through the route's code)
        let reply = await service.answer(path: hit, accept: nil, conditions: Conditions())
        guard case .image(let made) = reply else {
            Issue.record("no image: \(reply)")
            return
        }
        let channel = EmbeddedChannel(handler: CachedResultHandler(service: service))
        // When it is asked for again
        try Self.send(Self.request(hit), to: channel)
        // Then the handler answers: 200 with the route's caching fields, an id and a date, then the bytes
        #expect(try Self.forwarded(channel).isEmpty)
        let parts = try Self.answer(channel)
        try #require(parts.count == 3)
        guard case .head(let head) = parts[0], case .body(let body) = parts[1], case .end = parts[2] else {
            Issue.record("\(parts)")
            return
        }
        #expect(head.status == .ok)
        #expect(head.headerFields[.eTag] == made.meta.entityTag)
        #expect(head.headerFields[.contentType] == made.meta.contentType)
        #expect(head.headerFields[.cacheControl] == "max-age=31536000, public")
        #expect(head.headerFields[.contentSecurityPolicy] == Reply.contentSecurityPolicy)
        #expect(head.headerFields[.contentLength] == String(made.body.readableBytes))
        // (Hummingbird's request ids: hex, 17 to 32 digits)
        let id = try #require(head.headerFields[.requestID])
        #expect(id.count > 16 && id.allSatisfy(\.isHexDigit) && head.headerFields[.date] != nil)
        #expect(body == made.body)
        // And HEAD gets the same head without the bytes; a matching If-None-Match a 304;
        // a proxy's request id comes back
        try Self.send(Self.request(hit, method: .head), to: channel)
        let headParts = try Self.answer(channel)
        #expect(headParts.count == 2)
        if case .head(let h) = headParts.first {
            #expect(h.headerFields[.contentLength] == head.headerFields[.contentLength])
        }
        try Self.send(
            Self.request(hit, [.ifNoneMatch: made.meta.entityTag ?? "", .requestID: "from-nginx-1"]), to: channel)
        let notModified = try Self.answer(channel)
        #expect(notModified.count == 2)
        if case .head(let h) = notModified.first {
            #expect(h.status == .notModified && h.headerFields[.requestID] == "from-nginx-1")
        }
        // And a miss, a POST and a request that asks to close go on to the router, whole
        for request in [
            Self.request(miss), Self.request(hit, method: .post), Self.request(hit, [.connection: "close"]),
        ] {
            try Self.send(request, to: channel)
            let passed = try Self.forwarded(channel)
            #expect(passed.count == 2, "\(request)")
            if case .head(let h) = passed.first { #expect(h == request) }
            #expect(try Self.answer(channel).isEmpty)
            // (the router's answer)
            try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .ok)))
            try channel.writeOutbound(HTTPResponsePart.end(nil))
            _ = try Self.answer(channel)
        }
        _ = try channel.finish()
    }

    @Test("while an earlier request is with the router, a hit waits its turn there: answers keep their order")
    func keepsOrder() async throws {
        try await Self.withService { service in try await keepsOrder(service) }
    }

    private func keepsOrder(_ service: ImageService) async throws {
        let (hit, miss) = ("/insecure/w:20/plain/local:///a.png", "/insecure/w:20/plain/local:///b.png")
        let reply = await service.answer(path: hit, accept: nil, conditions: Conditions())
        guard case .image = reply else {
            Issue.record("no image: \(reply)")
            return
        }
        let channel = EmbeddedChannel(handler: CachedResultHandler(service: service))
        // Given a miss with the router, and a hit pipelined behind it
        try Self.send(Self.request(miss), to: channel)
        try Self.send(Self.request(hit), to: channel)
        // Then both go to the router, and nothing is answered ahead of the miss
        let passed = try Self.forwarded(channel)
        #expect(passed.count == 4)
        #expect(try Self.answer(channel).isEmpty)
        // When the router has answered both
        for _ in 0..<2 {
            try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .ok)))
            try channel.writeOutbound(HTTPResponsePart.end(nil))
        }
        _ = try Self.answer(channel)
        // Then the next hit is answered here again
        try Self.send(Self.request(hit), to: channel)
        #expect(try Self.forwarded(channel).isEmpty)
        #expect(try Self.answer(channel).count == 3)
        _ = try channel.finish()
    }
}
