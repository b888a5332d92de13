import RasterImage
import Testing

/// Files from the formats' public conformance suites (JPEG XL's, with its official
/// reference images; Microsoft's AVIF test files, with Pillow's), decoded and compared
/// with their references. scripts/conformance.py runs the whole suites, HEIF's too.
@Suite("Conformance suites")
struct ConformanceTests {
    @Test("each file decodes like its reference", arguments: Fixtures.conformance)
    func decodesLikeTheReference(_ fixture: ConformanceFixture) throws {
        let decoded = try ImageDecoder().decode(.file(path: Fixtures.root + "/" + fixture.file))
        let reference = try ImageDecoder().decode(.file(path: Fixtures.root + "/" + fixture.reference))
        var image = fixture.upright ? decoded.oriented() : decoded
        if decoded.iccProfile != nil && reference.iccProfile == nil {
            // A reference written in sRGB: the decode converted the same way, at its own size.
            var options = ThumbnailOptions(width: image.width, height: image.height)
            options.kernel = .box
            image = try image.thumbnail(options: options)
        }
        #expect(image.width == reference.width && image.height == reference.height, "\(decoded)")
        guard image.width == reference.width && image.height == reference.height else { return }
        let diff = difference(
            image.pixels, reference.straightAlpha().pixels, width: image.width, bytesPerRow: image.bytesPerRow)
        #expect(diff.maximum <= fixture.tolerance, "\(diff)")
    }

    @Test("an orientation and a clean aperture in the suites are reported and applied")
    func placement() throws {
        let oriented = try ImageDecoder().info(
            .file(path: Fixtures.root + "/modern/conformance/jxl-bench_oriented_brg.jxl"))
        #expect(oriented.orientation != .up)
        let cropped = try ImageDecoder().decode(
            .file(path: Fixtures.root + "/modern/conformance/avif-Chimera_8bit_cropped_480x256.avif"))
        #expect(cropped.width == 480 && cropped.height == 256)
    }
}
