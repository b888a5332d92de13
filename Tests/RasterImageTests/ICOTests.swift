import Foundation
import RasterImage
import Testing

/// Windows icons in (Pillow's files and bitmap icons assembled entry by entry, against
/// Pillow's decodes in Fixtures/formats) and out (read back by the decoder and checked
/// entry by entry).
@Suite("ICO")
struct ICOTests {
    static let folder = Fixtures.root + "/formats"

    static func icons() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".ico") }.sorted()
    }

    @Test("every icon's largest entry decodes as Pillow decodes it: PNG and 1, 4, 8, 24 and 32-bit bitmaps with masks")
    func largestEntry() throws {
        let names = try Self.icons()
        #expect(names.count >= 8)
        for name in names {
            let source = ImageSource.file(path: Self.folder + "/" + name)
            #expect(try ImageDecoder().format(of: source) == .ico, "\(name)")
            let image = try ImageDecoder().decode(source).straightAlpha()
            let reference = try ImageDecoder().decode(.file(path: Self.folder + "/" + name.dropLast(4) + ".ref.png"))
            #expect(image.width == reference.width && image.height == reference.height, "\(name)")
            #expect(image.pixels == reference.straightAlpha().pixels, "\(name)")
            let info = try ImageDecoder().info(source)
            #expect(info.width == image.width && info.format == .ico && info.hasAlpha)
        }
    }

    @Test("a thumbnail decodes the smallest entry that covers it: a 16-pixel icon is the 16x16 entry")
    func entryForThumbnail() throws {
        for name in try Self.icons() {
            let smallReference = Self.folder + "/" + name.dropLast(4) + ".16.ref.png"
            guard FileManager.default.fileExists(atPath: smallReference) else { continue }
            let thumbnail = try ImageDecoder().thumbnail(
                .file(path: Self.folder + "/" + name), options: ThumbnailOptions(maxPixelSize: 16))
            let reference = try ImageDecoder().decode(.file(path: smallReference))
            #expect(thumbnail.width == 16 && thumbnail.height == 16)
            let diff = difference(thumbnail.straightAlpha().pixels, reference.straightAlpha().pixels, width: 16)
            #expect(diff.maximum <= 2, "\(name): \(diff)")
        }
    }

    @Test("damaged directories and entries are typed errors")
    func damaged() throws {
        let bytes = Fixtures.bytes("formats/ico-dib-sizes.ico")
        #expect(expectDecodingError { _ = try ImageDecoder().decode(.bytes(Array(bytes.prefix(40)))) }?.format == .ico)
        // The largest entry claims another width than its bitmap has.
        var lying = bytes
        lying[6 + 16] = 20
        #expect(expectDecodingError { _ = try ImageDecoder().decode(.bytes(lying)) } != nil)
        // A PNG entry whose header says another size than its directory entry (the
        // largest of Pillow's icon, 256x256, now claimed as 200 wide).
        var png = Fixtures.bytes("formats/ico-png-sizes.ico")
        let count = Int(png[4]) | Int(png[5]) << 8
        let largest = try #require((0..<count).first { png[6 + 16 * $0] == 0 })
        png[6 + 16 * largest] = 200
        #expect(expectDecodingError { _ = try ImageDecoder().decode(.bytes(png)) }?.reason == .corrupt)
        // Every entry pointing past the end: nothing to decode.
        var outside = bytes
        for entry in 0..<2 {
            outside.replaceSubrange(6 + 16 * entry + 12..<6 + 16 * entry + 16, with: [0, 0, 0, 0x7F])
        }
        #expect(expectDecodingError { _ = try ImageDecoder().decode(.bytes(outside)) }?.reason == .truncated)
    }

    @Test("ICO out: one PNG entry with the image's pixels; larger than 256 is refused")
    func encoding() throws {
        let source = try ImageDecoder().decode(.file(path: Fixtures.root + "/images/png-rgba8.png"))
        let icon = try ICOEncoder().encode(source)
        #expect(Array(icon.prefix(6)) == [0, 0, 1, 0, 1, 0])
        #expect(Array(icon[22..<26]) == [0x89, 0x50, 0x4E, 0x47])
        let back = try ImageDecoder().decode(.bytes(icon))
        #expect(back.format == .ico && back.width == source.width && back.height == source.height)
        #expect(back.straightAlpha().pixels == source.straightAlpha().pixels)
        let large = try #require(
            RasterImage(width: 300, height: 10, pixels: [UInt8](repeating: 9, count: 300 * 10 * 4)))
        #expect(throws: ImageEncodingError.self) { try ICOEncoder().encode(large) }
    }
}
