import Foundation
import RasterImage
import Testing

@testable import ImageService

@Suite("Image information by URL and by upload")
struct ImageInfoTests {
    typealias References = ProcessingReferenceTests
    static let placeholders = References.root.deletingLastPathComponent().appendingPathComponent("placeholders")

    static func json(_ reply: Reply) throws -> [String: Any] {
        guard case .json(let bytes, _) = reply else {
            Issue.record("\(reply)")
            throw CancellationError()
        }
        return try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    }

    @Test(
        "GET /info: header, profile, EXIF (GPS only when allowed), colours and placeholders, as RasterImage makes them")
    func info() async throws {
        let bytes = try #require(
            FileManager.default.contents(atPath: Self.placeholders.appendingPathComponent("exif.jpg").path))
        let expected = try ImageDecoder().describe(Array(bytes))
        var configuration = References.configuration()
        configuration.sources = SourcePolicy(localRoot: Self.placeholders.path)
        try await References.withService(configuration) { service in
            let reply = await service.info(path: "/info/_/plain/local:///exif.jpg")
            let json = try Self.json(reply)
            #expect(json["format"] as? String == "jpeg" && json["width"] as? Int == 40 && json["height"] as? Int == 30)
            #expect(json["bytes"] as? Int == bytes.count && json["contentType"] as? String == "image/jpeg")
            #expect(
                json["blurhash"] as? String == expected.blurhash && json["thumbhash"] as? String == expected.thumbhash)
            #expect(json["dominantColors"] as? [String] == expected.dominantColors)
            let exif = try #require(json["exif"] as? [String: Any])
            #expect(
                exif["make"] as? String == "ImageLoader Camera Co."
                    && exif["dateTaken"] as? String == "2024-05-17T08:15:42")
            #expect(exif["latitude"] == nil && exif["longitude"] == nil)
            if case .json(_, let maxAge) = reply { #expect(maxAge > 0) }
            // bh sets BlurHash's components: 5x5 is 2 + 4 + 2 x 24 characters.
            let five = try Self.json(await service.info(path: "/info/_/bh:5:5/plain/local:///exif.jpg"))
            #expect((five["blurhash"] as? String)?.count == 54)
            // bh belongs to /info only: elsewhere it is an unknown option, a 404 as imgproxy answers it.
            #expect(
                ProcessingHandlingTests.failure(await References.get(service, "/_/bh:5:5/plain/local:///exif.jpg"))?
                    .status == 404)
            // POST /info: the same fields, never cached.
            let posted = await service.info(of: Array(bytes), contentType: "image/jpeg")
            #expect(try Self.json(posted)["blurhash"] as? String == expected.blurhash)
            if case .json(_, let maxAge) = posted { #expect(maxAge == 0) }
            // Missing sources are 404s; what is no image a 422, as imgproxy answers it.
            #expect(
                ProcessingHandlingTests.failure(await service.info(path: "/info/_/plain/local:///none.jpg"))?.status
                    == 404)
            #expect(
                ProcessingHandlingTests.failure(await service.info(of: Array("text".utf8), contentType: nil))?.status
                    == 422)
        }
        configuration = References.configuration()
        configuration.sources = SourcePolicy(localRoot: Self.placeholders.path)
        configuration.infoIncludesLocation = true
        configuration.signature = try? URLSignature(hexPairs: [(key: "0a", salt: "0b")])
        configuration.allowsUnsigned = false
        try await References.withService(configuration) { service in
            #expect(
                ProcessingHandlingTests.failure(await service.info(path: "/info/_/plain/local:///exif.jpg"))?.status
                    == 403)
            let path = "/plain/local:///exif.jpg"
            let signed = try URLSignature(hexPairs: [(key: "0a", salt: "0b")]).sign(path)
            let exif = try #require(
                try Self.json(await service.info(path: "/info/\(signed)\(path)"))["exif"] as? [String: Any])
            #expect(abs((exif["latitude"] as? Double ?? 0) + 33.8651) < 1e-6)
            #expect(abs((exif["longitude"] as? Double ?? 0) - 151.21) < 1e-6)
        }
    }
}
