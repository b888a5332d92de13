import Foundation
import ImageLoaderSupport
import RasterImage
import TestSupport
import Testing

@testable import ImageLoader

@Suite("Cached thumbnails through the loader")
struct ThumbnailLoadingTests {
    static let png = ("Content-Type", "image/png")
    let options = ThumbnailOptions(maxPixelSize: 64)

    @Test("made once, then from memory, then from disk after a restart; the disk keeps the thumbnail, not the original")
    func cached() async throws {
        try await withOrigin { origin, harness in
            origin.serve(
                "/photo.png",
                .init(headers: [Self.png, ("Cache-Control", "max-age=100")], body: TestImages.bytes("png-photo.png")))
            let loader = try harness.loader()
            let url = origin.url("/photo.png")
            let first = try await loader.thumbnail(for: url, options: options)
            #expect(first.source == .networkToDisk)
            #expect((first.image.width, first.image.height) == (64, 48))
            #expect(try await loader.thumbnail(for: url, options: options).source == .memory)
            try await loader.shutdown()

            let restarted = try harness.loader()
            let fromDisk = try await restarted.thumbnail(for: url, options: options)
            #expect(fromDisk.source == .disk)
            #expect((fromDisk.image.width, fromDisk.image.height) == (64, 48))
            #expect(origin.count("/photo.png") == 1)
            let stats = try #require(restarted.diskCache?.statistics)
            #expect(stats.entries == 1)
            #expect(stats.bytes < TestImages.bytes("png-photo.png").count / 4)
            #expect(restarted.statistics.thumbnailsMade == 0)
        }
    }

    @Test("a 304 for the original keeps the thumbnail; a changed original replaces it")
    func validity() async throws {
        try await withOrigin { origin, harness in
            let version = VersionBox()
            origin.route("/v.png") { request, _ in
                let tag = "\"\(version.value)\""
                if request.header("If-None-Match") == tag {
                    return .init(status: 304, headers: [("ETag", tag), ("Cache-Control", "max-age=10")])
                }
                let body =
                    version.value == 1 ? TestImages.bytes("png-photo.png") : TestImages.bytes("png-photo-alpha.png")
                return .init(headers: [Self.png, ("ETag", tag), ("Cache-Control", "max-age=10")], body: body)
            }
            let loader = try harness.loader()
            let url = origin.url("/v.png")
            let original = try await loader.thumbnail(for: url, options: options)
            harness.clock.advance(by: 20)
            let moments = await loader.thumbnailEvents(for: url, options: options).reduce(into: [ImageLoadEvent]()) {
                $0.append($1)
            }.moments
            #expect(
                moments == [
                    .cached(.memory, .needsRevalidation), .sending(hadCache: true), .completed(.networkNotModified),
                ],
                "\(moments) requests \(origin.requests("/v.png").map { $0.headers })")
            let kept = try await loader.thumbnail(for: url, options: options)
            #expect(kept.source == .memory)
            #expect(kept.image.pixels == original.image.pixels)
            #expect(origin.requests("/v.png").dropFirst().first?.header("If-None-Match") == "\"1\"")
            #expect(loader.statistics.thumbnailsMade == 1)

            version.value = 2
            harness.clock.advance(by: 20)
            let replaced = try await loader.thumbnail(for: url, options: options)
            #expect(replaced.source == .networkToDisk)
            #expect(replaced.image.hasAlpha && !original.image.hasAlpha)
            #expect(loader.statistics.thumbnailsMade == 2)
            try await loader.shutdown()
            let restarted = try harness.loader()
            #expect(try await restarted.thumbnail(for: url, options: options).image.hasAlpha)
        }
    }

    @Test(
        "concurrent requests for the same thumbnail share one download and one resample; other options are other thumbnails"
    )
    func coalesced() async throws {
        try await withOrigin { origin, harness in
            let answer = Gate()
            origin.serve(
                "/c.png",
                .init(
                    headers: [Self.png, ("Cache-Control", "max-age=100")], body: TestImages.bytes("png-photo.png"),
                    gate: answer))
            let loader = try harness.loader()
            let url = origin.url("/c.png")
            let options = self.options
            let sizes = await withTaskGroup(of: Int?.self) { group in
                for _ in 0..<50 {
                    group.addTask { try? await loader.thumbnail(for: url, options: options).image.width }
                }
                try? await waitUntil("every caller on the load") { loader.statistics.coalesced == 49 }
                answer.open()
                var sizes: [Int?] = []
                for await size in group { sizes.append(size) }
                return sizes
            }
            #expect(sizes.allSatisfy { $0 == 64 })
            #expect(origin.count("/c.png") == 1)
            #expect(loader.statistics.thumbnailsMade == 1)
            let square = try await loader.thumbnail(for: url, options: ThumbnailOptions(maxPixelSize: 32, fit: .fill))
            #expect((square.image.width, square.image.height) == (32, 32))
            #expect(loader.statistics.thumbnailsMade == 2)
        }
    }

    @Test("file URLs: made once, then reused until the file changes")
    func files() async throws {
        let harness = LoaderHarness()
        defer { Task { await harness.cleanUp() } }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("picture")
        try Data(TestImages.bytes("png-photo.png")).write(to: file)
        let loader = try harness.loader()
        #expect(try await loader.thumbnail(for: file, options: options).source == .localFile)
        let second = try await loader.thumbnail(for: file, options: options)
        #expect(second.source == .memory, "\(second.source)")
        try await loader.shutdown()
        let restarted = try harness.loader()
        #expect(try await restarted.thumbnail(for: file, options: options).source == .disk)
        try Data(TestImages.bytes("jpeg-orientation6.jpg")).write(to: file)
        let changed = try await restarted.thumbnail(for: file, options: options)
        #expect(changed.source == .localFile)
        #expect((changed.image.width, changed.image.height) == (32, 48))  // upright
    }
}

final class VersionBox: Sendable {
    private let state = Lock(1)

    var value: Int {
        get { state.withLock { $0 } }
        set { state.withLock { $0 = newValue } }
    }
}
