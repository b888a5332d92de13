import Foundation
import Testing

@testable import RasterImage

/// BlurHash and ThumbHash against their reference encoders' output on the same pixels
/// (`Fixtures/generate-placeholders.py`: Wolt's reference C encoder, with which its PyPI port agrees, and
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

    struct ExifFields: Decodable, Sendable {
        let dateTaken: String
        let make: String
        let model: String
        let lens: String
        let latitude: Double
        let longitude: Double
    }

    struct Exif: Decodable, Sendable {
        let images: [String]
        let fields: ExifFields
    }

    struct Vectors: Decodable, Sendable {
        let vectors: [Vector]
        let dominant: Dominant
        let exif: Exif
        let profiles: [String: String]
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

    @Test("EXIF fields from a JPEG, a PNG and a WebP written by Pillow; none from files without them")
    func exif() throws {
        let expected = try #require(Self.loaded).exif
        for name in expected.images {
            let bytes = try #require(FileManager.default.contents(atPath: Self.folder + name))
            let photo = try #require(PhotoMetadata(fileBytes: bytes), "\(name)")
            #expect(photo.dateTaken == expected.fields.dateTaken, "\(name)")
            #expect(photo.make == expected.fields.make && photo.model == expected.fields.model, "\(name)")
            #expect(photo.lens == expected.fields.lens, "\(name)")
            #expect(abs((photo.latitude ?? 0) - expected.fields.latitude) < 1e-9, "\(name)")
            #expect(abs((photo.longitude ?? 0) - expected.fields.longitude) < 1e-9, "\(name)")
        }
        let plain = try #require(FileManager.default.contents(atPath: Self.folder + "photo-32x24.png"))
        #expect(PhotoMetadata(fileBytes: plain) == nil)
        #expect(PhotoMetadata.isoDate("2024:13:01") == nil && PhotoMetadata.isoDate("0000:00:00 00:00:00") == nil)
        // Truncated and garbled blocks: no trap, no fields.
        let jpeg = try #require(FileManager.default.contents(atPath: Self.folder + "exif.jpg"))
        for cut in stride(from: 0, to: min(jpeg.count, 400), by: 7) {
            _ = PhotoMetadata(fileBytes: jpeg.prefix(cut))
        }
    }

    @Test("colour profile names as Pillow's ImageCms reads them")
    func profileNames() throws {
        for (file, name) in try #require(Self.loaded).profiles {
            let bytes = try #require(FileManager.default.contents(atPath: Fixtures.root + "/profiles/" + file))
            #expect(ICCDescription.name(of: bytes) == name, "\(file)")
        }
        #expect(ICCDescription.name(of: [UInt8](repeating: 0, count: 200)) == nil)
    }
}
