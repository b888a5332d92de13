import Foundation
import RasterImage
import TestSupport
import Testing

@testable import ImageService

/// Every processing option through ``ImageService``, against results made independently
/// by `Fixtures/generate-processing.py` (Pillow and numpy, from imgproxy's documented
/// meanings). Results are asked for as PNG, so only the processing can differ.
@Suite("Processing options against independent references")
struct ProcessingReferenceTests {
    struct Case: Decodable, Sendable, CustomStringConvertible {
        let name: String
        let source: String
        let options: String
        let expected: String
        let width: Int
        let height: Int
        let maxDifference: Int
        let meanDifference: Double
        var description: String { "\(name): \(options)" }
    }

    struct Animation: Decodable, Sendable {
        let source: String
        let durationsMs: [Int]
        let loopCount: Int
        let frames: [String]
    }

    struct Manifest: Decodable, Sendable {
        let cases: [Case]
        let animation: Animation
    }

    static let root = URL(fileURLWithPath: FixturePaths.path("processing"))
    static let manifest: Manifest = {
        // A missing or broken manifest fails every test below with the decoding error.
        let data = (try? Data(contentsOf: root.appendingPathComponent("cases.json"))) ?? Data()
        return (try? JSONDecoder().decode(Manifest.self, from: data))
            ?? Manifest(
                cases: [], animation: Animation(source: "", durationsMs: [], loopCount: 0, frames: []))
    }()

    /// The settings of the tests' services: the fixture sources unsigned, the fixture
    /// watermark, animations up to 10 frames, no disk cache.
    static func configuration() -> ImageService.Configuration {
        var configuration = ImageService.Configuration()
        configuration.allowsUnsigned = true
        configuration.sources = SourcePolicy(localRoot: root.appendingPathComponent("sources").path)
        configuration.loader.cacheDirectory = nil
        configuration.timeout = .seconds(600)
        configuration.maxAnimationFrames = 10
        configuration.watermark = try? ImageDecoder().decode(
            .file(path: root.appendingPathComponent("sources/watermark.png").path))
        return configuration
    }

    /// Runs `body` with a service made from `configuration`, shut down after it, also when it throws.
    static func withService(
        _ configuration: ImageService.Configuration = configuration(), _ body: (ImageService) async throws -> Void
    ) async throws {
        let service = try ImageService(configuration: configuration)
        do {
            try await body(service)
        } catch {
            try? await service.shutdown()
            throw error
        }
        try await service.shutdown()
    }

    /// The answer to `path`: its bytes and headers, or the failure.
    static func get(_ service: ImageService, _ path: String, accept: String? = nil) async -> Reply {
        await service.answer(path: path, accept: accept, conditions: Conditions())
    }

    static func image(_ reply: Reply, _ label: String) throws -> (RasterImage, ProcessedResult) {
        guard case .image(let result) = reply else {
            Issue.record("\(label): \(reply)")
            throw CancellationError()
        }
        let bytes = Array(result.body.readableBytesView)
        return (try ImageDecoder().decode(.bytes(bytes)), result)
    }

    @Test("the manifest lists every option's cases")
    func manifestIsThere() {
        #expect(Self.manifest.cases.count >= 32)
        #expect(Self.manifest.animation.frames.count == 4)
    }

    @Test("each option gives the reference's size and pixels", arguments: manifest.cases)
    func matchesReference(_ fixture: Case) async throws {
        try await Self.withService { service in
            // Given the URL of the case, asking for PNG
            let path = "/_/\(fixture.options)/plain/local:///\(fixture.source)@png"

            // When the service answers it
            let (image, _) = try Self.image(await Self.get(service, path), fixture.description)

            // Then the size is the reference's, and the pixels within the case's tolerance
            #expect(image.width == fixture.width && image.height == fixture.height, "\(fixture)")
            let expected = try ImageDecoder().decode(
                .file(path: Self.root.appendingPathComponent(fixture.expected).path))
            guard image.width == expected.width, image.height == expected.height else { return }
            let difference = PixelDifference(image, expected)
            #expect(difference.maximum <= fixture.maxDifference, "\(fixture): \(difference)")
            #expect(difference.mean <= fixture.meanDifference, "\(fixture): \(difference)")
        }
    }

    @Test("an animated GIF becomes an animated WebP and GIF: frames, durations, loops and pixels")
    func animation() async throws {
        let animation = Self.manifest.animation
        try await Self.withService { service in
            for format in ["webp", "gif"] {
                // Given an animated source, frames allowed up to 10
                let path = "/_/rs:fit:80:80/q:100/plain/local:///\(animation.source)@\(format)"

                // When it is resized
                let (image, result) = try Self.image(await Self.get(service, path), format)

                // Then every frame is there, resized alike, with its duration and the loop count
                #expect(result.meta.contentType == "image/\(format)")
                #expect(image.frames.count == animation.frames.count, "\(format)")
                #expect(image.frames.map(\.duration) == animation.durationsMs.map { .milliseconds($0) }, "\(format)")
                #expect(image.loopCount == animation.loopCount, "\(format)")
                #expect(image.width == 80 && image.height == 60)
                for (index, file) in animation.frames.enumerated() where index < image.frames.count {
                    let expected = try ImageDecoder().decode(.file(path: Self.root.appendingPathComponent(file).path))
                    let frame = RasterImage(width: 80, height: 60, pixels: image.frames[index].pixels)!
                    let difference = PixelDifference(frame, expected)
                    // Lossy WebP at quality 100, or GIF's 255-colour palette, on flat colours.
                    #expect(difference.mean <= 3, "\(format) frame \(index): \(difference)")
                }
            }
        }
    }

    @Test(
        "animations stay still at the default of one frame and in formats without frames; past the limit, the first frames"
    )
    func stillAnimations() async throws {
        let source = Self.manifest.animation.source
        var configuration = Self.configuration()
        configuration.maxAnimationFrames = 1
        try await Self.withService(configuration) { service in
            let (image, _) = try Self.image(await Self.get(service, "/_/w:80/plain/local:///\(source)@webp"), "default")
            #expect(image.frames.count == 1)
        }
        configuration = Self.configuration()
        configuration.maxAnimationFrames = 3
        try await Self.withService(configuration) { service in
            // Four frames, three allowed: the first three, as imgproxy's
            // `min(pages, maxAnimationFrames)`.
            let (image, _) = try Self.image(await Self.get(service, "/_/w:80/plain/local:///\(source)@gif"), "over")
            #expect(image.frames.count == 3)
            for (index, file) in Self.manifest.animation.frames.prefix(3).enumerated() {
                let expected = try ImageDecoder().decode(.file(path: Self.root.appendingPathComponent(file).path))
                let frame = RasterImage(width: 80, height: 60, pixels: image.frames[index].pixels)!
                #expect(PixelDifference(frame, expected).mean <= 3, "frame \(index)")
            }
        }
        try await Self.withService { service in
            let (image, _) = try Self.image(await Self.get(service, "/_/w:80/plain/local:///\(source)@png"), "png")
            #expect(image.frames.count == 1)
        }
        // Four frames of 160x120 are 76,800 pixels: over a smaller budget, the first frame only,
        // and nothing past the budget is decoded.
        configuration = Self.configuration()
        configuration.loader.decodingOptions.limits.maxTotalPixels = 60_000
        try await Self.withService(configuration) { service in
            let (image, _) = try Self.image(await Self.get(service, "/_/w:80/plain/local:///\(source)@webp"), "budget")
            #expect(image.frames.count == 1)
        }
    }
}

/// How far two images' visible colours are apart (premultiplied, per channel).
struct PixelDifference: CustomStringConvertible {
    let maximum: Int
    let mean: Double

    init(_ a: RasterImage, _ b: RasterImage) {
        let (first, second) = (a.premultiplied(), b.premultiplied())
        var maximum = 0
        var total = 0
        let (p, q) = (first.frames[0].pixels, second.frames[0].pixels)
        for y in 0..<first.height {
            for x in 0..<first.width {
                let i = y * first.bytesPerRow + x * 4
                let j = y * second.bytesPerRow + x * 4
                for c in 0..<4 {
                    let d = abs(Int(p[i + c]) - Int(q[j + c]))
                    maximum = max(maximum, d)
                    total += d
                }
            }
        }
        self.maximum = maximum
        mean = Double(total) / Double(max(1, first.width * first.height * 4))
    }

    var description: String { "max \(maximum), mean \(String(format: "%.3f", mean))" }
}
