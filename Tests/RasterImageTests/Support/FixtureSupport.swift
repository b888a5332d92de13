import Foundation
import RasterImage
import TestSupport
import Testing

/// One entry of Fixtures/manifest.json, written by Fixtures/generate.py with the
/// expected pixels decoded by Pillow or ImageMagick (or taken from the source pixels).
struct Fixture: Decodable, Sendable, CustomTestStringConvertible {
    let name: String
    let file: String
    let format: String
    let width: Int
    let height: Int
    let frames: [String]
    let frameCount: Int
    let reference: String
    let tolerance: Int
    let hasAlpha: Bool
    let alphaMode: String
    let orientation: Int
    let loopCount: Int
    let durationsMs: [Int]?
    let iccProfile: String?
    let page: Int?
    /// The colour is given by code points (`nclx`), which the decoder turns into a
    /// profile of its own: one must be there, its bytes are not compared.
    let synthesizedProfile: Bool?

    var testDescription: String { name }
    var path: String { Fixtures.root + "/" + file }
    var bytes: [UInt8] { Fixtures.bytes(file) }
    var expectedFrames: [[UInt8]] { frames.map(Fixtures.bytes) }
    var expectedICC: [UInt8]? { iccProfile.map(Fixtures.bytes) }
}

/// A file from a format's public conformance suite and the reference it must decode
/// to (Fixtures/modern/CONFORMANCE.md says where each came from).
struct ConformanceFixture: Decodable, Sendable, CustomTestStringConvertible {
    let file: String
    let reference: String
    /// Whether the reference is shown upright (the orientation applied) or as stored.
    let upright: Bool
    let tolerance: Int
    let source: String

    var testDescription: String { file }
}

/// One entry of the manifest's "thumbnails": a source, thumbnail options, and Pillow's
/// reference for what they should give.
struct ThumbnailFixture: Decodable, Sendable, CustomTestStringConvertible {
    struct Options: Decodable, Sendable {
        var maxPixelSize: Int?
        var width: Int?
        var height: Int?
        var fit: String?
        var kernel: String?
        var linearLight: Bool?
        var frames: String?
        var keepsColorProfile: Bool?
    }

    let name: String
    let source: String
    let options: Options
    let width: Int
    let height: Int
    let frames: [String]
    let reference: String
    let maxDifference: Int
    let meanDifference: Double
    let durationsMs: [Int]?
    let loopCount: Int?
    let keepsProfile: String?
    let maxVisibleRed: Int?

    var testDescription: String { name }
    var path: String { Fixtures.root + "/" + source }
    var expectedFrames: [[UInt8]] { frames.map(Fixtures.bytes) }

    var thumbnailOptions: ThumbnailOptions {
        var result =
            options.maxPixelSize.map { ThumbnailOptions(maxPixelSize: $0) }
            ?? ThumbnailOptions(
                width: options.width!, height: options.height!, fit: options.fit == "fill" ? .fill : .fit)
        if let kernel = options.kernel { result.kernel = ResamplingKernel(rawValue: kernel)! }
        result.linearLight = options.linearLight ?? false
        result.keepsColorProfile = options.keepsColorProfile ?? false
        if options.frames == "all" { result.frames = .all }
        return result
    }
}

enum Fixtures {
    /// The repository's Fixtures folder.
    static let root = FixturePaths.root

    private struct Manifest: Decodable {
        let fixtures: [Fixture]
        let thumbnails: [ThumbnailFixture]
        let conformance: [ConformanceFixture]?
    }

    /// Fixtures/manifest.json (Fixtures/generate.py) and Fixtures/modern/manifest.json
    /// (HEIF, AVIF and JPEG XL, Fixtures/generate-heif-avif-jxl.py).
    private static let manifests: [Manifest] = ["/manifest.json", "/modern/manifest.json"].map { path in
        let data = try! Data(contentsOf: URL(fileURLWithPath: root + path))
        return try! JSONDecoder().decode(Manifest.self, from: data)
    }

    static let all: [Fixture] = manifests.flatMap(\.fixtures)
    static let thumbnails: [ThumbnailFixture] = manifests.flatMap(\.thumbnails)
    static let conformance: [ConformanceFixture] = manifests.flatMap { $0.conformance ?? [] }

    static func named(_ name: String) -> Fixture {
        all.first { $0.name == name }!
    }

    static func bytes(_ relativePath: String) -> [UInt8] {
        [UInt8](try! Data(contentsOf: URL(fileURLWithPath: root + "/" + relativePath)))
    }

    /// One fixture of each format, for tests that run per format.
    static let onePerFormat: [Fixture] = [
        "png-rgba8", "jpeg-420", "gif-animation", "tiff-rgb-lzw", "webp-animation", "bmp-24bit", "heif-alpha",
        "avif-animation", "jxl-lossy",
    ]
    .map(named)
}

/// How far two RGBA buffers are apart.
struct PixelDifference: CustomStringConvertible {
    var maximum = 0
    var differing = 0
    var total = 0
    var channels = 0
    var mean: Double { channels == 0 ? 0 : Double(total) / Double(channels) }
    var first: (x: Int, y: Int, got: [UInt8], expected: [UInt8])?

    var description: String {
        guard let first else { return "identical" }
        return
            "max difference \(maximum) over \(differing) channels; first at (\(first.x), \(first.y)): got \(first.got), expected \(first.expected)"
    }
}

func difference(_ got: [UInt8], _ expected: [UInt8], width: Int, bytesPerRow: Int? = nil) -> PixelDifference {
    var result = PixelDifference()
    let stride = bytesPerRow ?? width * 4
    let rows = expected.count / (width * 4)
    for y in 0..<rows {
        for x in 0..<width {
            for c in 0..<4 {
                let a = Int(got[y * stride + x * 4 + c])
                let b = Int(expected[(y * width + x) * 4 + c])
                let d = abs(a - b)
                result.total += d
                result.channels += 1
                if d > 0 {
                    result.differing += 1
                    if result.first == nil {
                        let g = Array(got[(y * stride + x * 4)..<(y * stride + x * 4 + 4)])
                        let e = Array(expected[((y * width + x) * 4)..<((y * width + x) * 4 + 4)])
                        result.first = (x, y, g, e)
                    }
                }
                result.maximum = max(result.maximum, d)
            }
        }
    }
    return result
}

/// The difference of what is visible: colour premultiplied by alpha, and alpha. Where
/// alpha is 0 the straight colour is undefined, and decoders leave different values there.
func visibleDifference(_ got: [UInt8], _ expected: [UInt8], width: Int) -> PixelDifference {
    func premultiplied(_ pixels: [UInt8]) -> [UInt8] {
        var out = pixels
        for i in stride(from: 0, to: out.count, by: 4) {
            let a = Int(out[i + 3])
            for c in 0..<3 { out[i + c] = UInt8((Int(out[i + c]) * a + 127) / 255) }
        }
        return out
    }
    return difference(premultiplied(got), premultiplied(expected), width: width)
}

/// Calls `body`, expecting an ``ImageDecodingError``; returns it.
@discardableResult
func expectDecodingError(
    sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void
) -> ImageDecodingError? {
    do {
        try body()
        Issue.record("expected an ImageDecodingError, got success", sourceLocation: sourceLocation)
    } catch let error as ImageDecodingError {
        return error
    } catch {
        Issue.record("expected an ImageDecodingError, got \(type(of: error)): \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// Runs `body` on a new thread and waits for it there: synchronous work of seconds does
/// not hold one of the two threads the whole suite's async tests share.
func onThreadOfItsOwn<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}

extension Fixtures {
    /// The committed JPEG XL files, each cut in half and with bits flipped in its
    /// coded data at fixed places: damaged files that libjxl traces failures for.
    static func damagedJXLFiles() -> [(name: String, bytes: [UInt8])] {
        let folders = ["modern/images", "modern/conformance"]
        var files: [(String, [UInt8])] = []
        for folder in folders {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: root + "/" + folder)) ?? []
            for name in names.sorted() where name.hasSuffix(".jxl") {
                let bytes = Fixtures.bytes(folder + "/" + name)
                files.append((name + " cut", Array(bytes.prefix(bytes.count / 2))))
                for seed in 1...2 {
                    var flipped = bytes
                    var state = UInt64(seed) &* 0x9E37_79B9_7F4A_7C15
                    for _ in 0..<8 {
                        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                        let index = 32 + Int((state >> 33) % UInt64(max(1, bytes.count - 32)))
                        if index < flipped.count { flipped[index] ^= UInt8(1 << ((state >> 29) & 7)) }
                    }
                    files.append((name + " flipped \(seed)", flipped))
                }
            }
        }
        return files
    }
}
