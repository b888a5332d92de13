import Foundation
import Testing

@testable import RasterImage

/// BlurHash and ThumbHash against their reference encoders' output on the same pixels
/// (`Fixtures/generate-placeholders.py`: the PyPI port of Wolt's BlurHash encoder, and
/// Evan Wallace's js/thumbhash.js run under Node.js), and dominant colours on an image
/// whose colours are known by construction.
@Suite("Placeholders: BlurHash, ThumbHash, dominant colours")
struct PlaceholderTests {
    struct Vector: Decodable, Sendable, CustomStringConvertible {
        let image: String
        let blurhash: [String: String]
        let thumbhash: String
        var description: String { image }
    }

    struct Dominant: Decodable, Sendable {
        let image: String
        let colours: [String]
    }

    struct Vectors: Decodable, Sendable {
        let vectors: [Vector]
        let dominant: Dominant
    }

    static let folder = Fixtures.root + "/placeholders/"
    static let loaded: Vectors? = {
        guard let data = FileManager.default.contents(atPath: folder + "vectors.json") else { return nil }
        return try? JSONDecoder().decode(Vectors.self, from: data)
    }()

    @Test("the vectors are there")
    func vectorsExist() throws {
        #expect(try #require(Self.loaded).vectors.count == 4)
    }

    @Test("BlurHash and ThumbHash equal the reference encoders'", arguments: loaded?.vectors ?? [])
    func matchesReference(_ vector: Vector) throws {
        let image = try ImageDecoder().decode(.file(path: Self.folder + vector.image))
        for (components, expected) in vector.blurhash {
            let sizes = components.split(separator: "x").compactMap { Int($0) }
            #expect(image.blurHash(xComponents: sizes[0], yComponents: sizes[1]) == expected, "\(components)")
        }
        #expect(Data(image.thumbHash()).base64EncodedString() == vector.thumbhash)
    }

    @Test("dominant colours: the areas' colours, the largest first; never more than asked")
    func dominantColours() throws {
        let expected = try #require(Self.loaded).dominant
        let image = try ImageDecoder().decode(.file(path: Self.folder + expected.image))
        #expect(image.dominantColors(count: 3).map(\.description) == expected.colours)
        #expect(image.dominantColors(count: 1).count == 1)
        // Three flat colours cannot make five boxes: three come back.
        #expect(image.dominantColors(count: 5).map(\.description) == expected.colours)
        // A fully transparent image has none.
        let clear = RasterImage(width: 2, height: 2, pixels: [UInt8](repeating: 0, count: 16))!
        #expect(clear.dominantColors().isEmpty)
    }

    @Test("a large image is reduced to 100 pixels a side for ThumbHash")
    func thumbHashOfLargeImage() throws {
        let large = RasterImage(width: 400, height: 100, pixels: [UInt8](repeating: 200, count: 400 * 100 * 4))!
        let hash = large.thumbHash()
        // Landscape bit set, and the same hash as for the reduced image.
        #expect(hash.count >= 5 && hash[4] & 0x80 != 0)
        #expect(hash == large.resized(width: 100, height: 25).thumbHash())
    }
}
