import RasterImage
import Testing

@Suite("Formats and content types")
struct ContentTypeTests {
    @Test("the format is sniffed from the bytes", arguments: Fixtures.all)
    func sniffs(_ fixture: Fixture) throws {
        #expect(ImageFormat.sniff(fixture.bytes)?.rawValue == fixture.format)
        #expect(try ImageDecoder().format(of: .file(path: fixture.path))?.rawValue == fixture.format)
    }

    @Test("a file name does not decide the format")
    func ignoresNames() throws {
        // A PNG fixture read through a path ending in .jpg is still a PNG.
        let png = Fixtures.named("png-rgb8").bytes
        let path = FileManagerHelper.temporaryFile(named: "really-a-png.jpg", contents: png)
        defer { FileManagerHelper.remove(path) }
        #expect(try ImageDecoder().decode(.file(path: path)).format == .png)
    }

    @Test("BMP needs more than the letters BM")
    func weakBMPSignature() {
        #expect(ImageFormat.sniff(Array("BM is not enough of a signature".utf8)) == nil)
        #expect(ImageFormat.sniff([]) == nil)
    }

    @Test("declared types are accepted when they name the sniffed format")
    func acceptsMatchingTypes() throws {
        let accepted = AcceptedContentTypes.default
        #expect(try accepted.validate(Fixtures.named("png-rgb8").bytes, declaredContentType: "image/png") == .png)
        #expect(
            try accepted.validate(Fixtures.named("png-rgb8").bytes, declaredContentType: " Image/PNG ; charset=binary")
                == .png)
        #expect(try accepted.validate(Fixtures.named("jpeg-420").bytes, declaredContentType: "image/jpg") == .jpeg)
        #expect(try accepted.validate(Fixtures.named("webp-lossy").bytes, declaredContentType: "image/webp") == .webp)
        #expect(try accepted.validate(Fixtures.named("bmp-24bit").bytes, declaredContentType: nil) == .bmp)
        for format in ImageFormat.allCases { #expect(accepted.accepts(format)) }
    }

    @Test("a declared type that names another format is a mismatch")
    func rejectsMismatch() {
        #expect(throws: ContentTypeError.mismatch(declared: "image/jpeg", detected: .png)) {
            try AcceptedContentTypes.default.validate(
                Fixtures.named("png-rgb8").bytes, declaredContentType: "image/jpeg")
        }
    }

    @Test("types off the list are not accepted")
    func rejectsUnaccepted() {
        #expect(throws: ContentTypeError.notAccepted(contentType: "text/html")) {
            try AcceptedContentTypes.default.validate(
                Fixtures.named("png-rgb8").bytes, declaredContentType: "text/html")
        }
        #expect(throws: ContentTypeError.notAccepted(contentType: "image/gif")) {
            try AcceptedContentTypes(["image/png"]).validate(
                Fixtures.named("gif-still").bytes, declaredContentType: nil)
        }
        #expect(throws: ContentTypeError.notAccepted(contentType: "image/svg+xml")) {
            try AcceptedContentTypes(["image/png"]).validate(
                Fixtures.named("png-rgb8").bytes, declaredContentType: "image/svg+xml")
        }
    }

    @Test("bytes that are no image are refused whatever they claim")
    func rejectsUnrecognized() {
        #expect(throws: ContentTypeError.unrecognizedFormat) {
            try AcceptedContentTypes.default.validate(Array("<html></html>".utf8), declaredContentType: "image/png")
        }
    }

    @Test("media types map to formats")
    func mediaTypes() {
        #expect(ImageFormat(contentType: "image/jpg") == .jpeg)
        #expect(ImageFormat(contentType: "IMAGE/X-MS-BMP") == .bmp)
        #expect(ImageFormat(contentType: "application/octet-stream") == nil)
        for format in ImageFormat.allCases { #expect(ImageFormat(contentType: format.contentType) == format) }
    }
}
