import Foundation
import RasterImage
import Testing

@testable import ImageService

@Suite("EXIF in results: stripped, copyright kept, or all")
struct ResultMetadataTests {
    typealias References = ProcessingReferenceTests

    @Test("by default only Copyright and Artist stay; kcr:0 strips all; sm:0 keeps all with the orientation made 1")
    func metadata() async throws {
        var configuration = References.configuration()
        configuration.sources = SourcePolicy(localRoot: ImageInfoTests.placeholders.path)
        try await References.withService(configuration) {
            service in
            for format in ["jpg", "png", "webp"] {
                func result(_ options: String) async throws -> [UInt8] {
                    let reply = await References.get(
                        service, "/_/w:20\(options)/plain/local:///exif-copyright.jpg@\(format)")
                    return try #require(ProcessingHandlingTests.bytes(reply, "\(options)@\(format)"))
                }
                // Default: a block with the copyright and the artist, nothing else.
                let plain = try await result("")
                let kept = try #require(
                    PhotoMetadata.outputBlock(from: plain, keeping: .all, upright: false), "\(format)")
                #expect(String(decoding: kept, as: UTF8.self).contains("(c) 2026 A. Photographer"), "\(format)")
                #expect(String(decoding: kept, as: UTF8.self).contains("A. Photographer"))
                #expect(PhotoMetadata(fileBytes: plain)?.make == nil, "\(format)")
                // kcr:0: nothing.
                #expect(
                    PhotoMetadata.outputBlock(from: try await result("/kcr:0"), keeping: .all, upright: false) == nil)
                // sm:0: all of it, the orientation 1 as the pixels are turned already.
                let all = try await result("/sm:0")
                #expect(PhotoMetadata(fileBytes: all)?.make == "ImageLoader Camera Co.", "\(format)")
                let info = try ImageDecoder().info(.bytes(all))
                #expect(info.orientation == .up && info.width == 20, "\(format): \(info)")
                // ar:0 keeps the pixels as stored: the orientation stays 6.
                let stored = try await result("/sm:0/ar:0")
                #expect(try ImageDecoder().info(.bytes(stored)).orientation == .right, "\(format)")
            }
        }
    }
}
