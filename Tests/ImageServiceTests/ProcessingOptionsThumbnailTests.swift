import RasterImage
import Testing

@testable import ImageService

@Suite("Processing options as thumbnail options")
struct ProcessingOptionsTests {
    func options(_ text: String, source: (Int, Int) = (4000, 3000), limit: Int = 8192) throws -> ThumbnailOptions {
        let url = try ProcessingURL.parse(
            "/_/\(text)/aHR0cDovL2EuZXhhbXBsZS9hLmpwZw", signature: nil, allowsUnsigned: true)
        return url.options.thumbnailOptions(sourceWidth: source.0, sourceHeight: source.1, maxResultSide: limit)
    }

    func size(_ text: String, source: (Int, Int) = (4000, 3000)) throws -> (Int, Int) {
        let size = try options(text, source: source).resultSize(sourceWidth: source.0, sourceHeight: source.1)
        return (size.width, size.height)
    }

    @Test("each resizing type, a side of 0, dpr and enlarge, as URLs")
    func resizingTypes() throws {
        #expect(try size("rs:fit:300:200") == (267, 200))
        #expect(try size("rs:fill:300:200") == (300, 200))
        #expect(try size("rs:force:300:200") == (300, 200))
        // auto: fill when source and box agree (both landscape), fit otherwise.
        #expect(try size("rs:auto:300:200") == (300, 200))
        #expect(try size("rs:auto:200:300") == (200, 150))
        #expect(try size("rs:auto:200:300", source: (3000, 4000)) == (200, 300))
        // A side of 0 follows the other side's scale, fill-down included.
        #expect(try size("rs:fill:0:200") == (267, 200))
        #expect(try size("rs:fill-down:300:0", source: (1000, 500)) == (300, 150))
        #expect(try size("w:0/h:0") == (4000, 3000))
        #expect(try size("rs:fit:300:200/dpr:2/el:1") == (533, 400))
        // fill-down: a source smaller than the box is cropped to the box's aspect ratio.
        #expect(try size("rs:fill-down:200:200", source: (100, 50)) == (50, 50))
        #expect(try size("rs:fill-down:200:200", source: (1000, 500)) == (200, 200))
    }

    @Test("compass gravities map to the one-pass crop's side")
    func gravity() throws {
        let pairs: [(String, ThumbnailOptions.Gravity)] = [
            ("ce", .center), ("no", .north), ("so", .south), ("ea", .east), ("we", .west),
            ("noea", .northEast), ("nowe", .northWest), ("soea", .southEast), ("sowe", .southWest),
        ]
        for (name, expected) in pairs { #expect(try options("rs:fill:10:10/g:\(name)").gravity == expected) }
    }

    @Test("a box past the service's limit is scaled down to it, dpr included")
    func limits() throws {
        #expect(try size("w:9000/el:1") == (8192, 6144))
        #expect(try size("w:5000/dpr:2/el:1") == (8192, 6144))
        #expect(try options("w:600", limit: 512).width == 512)
        #expect(try options("w:512", limit: 512).width == 512)
    }

    @Test("the options make the thumbnail they describe")
    func endToEnd() throws {
        let bytes = try PNGEncoder().encode(
            RasterImage(width: 400, height: 200, pixels: [UInt8](repeating: 200, count: 400 * 200 * 4))!)
        for (text, size) in [
            ("rs:fill:64:32/g:we", (64, 32)), ("rs:fit:64:64", (64, 32)), ("rs:force:30:60", (30, 60)),
        ] {
            let thumbnail = try ImageDecoder().thumbnail(.bytes(bytes), options: options(text, source: (400, 200)))
            #expect((thumbnail.width, thumbnail.height) == size, "\(text)")
        }
    }
}
