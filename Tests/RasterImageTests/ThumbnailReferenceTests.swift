import RasterImage
import Testing

/// Thumbnails against Pillow's (same algorithm, independent code): kernels, alpha
/// fringes, linear light, fill, DCT-scaled JPEG, all eight orientations, animations
/// and colour profiles. Each reference states its tolerance in the manifest; pixels
/// are compared as seen (premultiplied), since a transparent pixel's colour is undefined.
@Suite("Thumbnails against independent references")
struct ThumbnailReferenceTests {
    @Test("pixels, size and metadata match the reference", arguments: Fixtures.thumbnails)
    func matchesReference(_ fixture: ThumbnailFixture) throws {
        // Given a source and the options of the reference
        let options = fixture.thumbnailOptions

        // When the thumbnail is made from the file
        let thumbnail = try ImageDecoder().thumbnail(.file(path: fixture.path), options: options)

        // Then it has the reference's size, frames and pixels, upright and in sRGB
        #expect(thumbnail.width == fixture.width && thumbnail.height == fixture.height)
        #expect(thumbnail.frames.count == fixture.frames.count)
        #expect(thumbnail.orientation == .up)
        #expect(thumbnail.alphaMode == .straight)
        if let kept = fixture.keepsProfile {
            #expect(thumbnail.iccProfile == Fixtures.bytes("profiles/" + kept))
        } else {
            #expect(thumbnail.iccProfile == nil)
        }
        if let durations = fixture.durationsMs {
            #expect(thumbnail.frames.map(\.duration) == durations.map { .milliseconds($0) })
        }
        if let loopCount = fixture.loopCount { #expect(thumbnail.loopCount == loopCount) }
        for (index, expected) in fixture.expectedFrames.enumerated() where index < thumbnail.frames.count {
            let diff = visibleDifference(thumbnail.frames[index].pixels, expected, width: thumbnail.width)
            #expect(diff.maximum <= fixture.maxDifference, "frame \(index): \(diff)")
            #expect(diff.mean <= fixture.meanDifference, "frame \(index): \(diff)")
        }
        if let limit = fixture.maxVisibleRed {
            // No colour of the transparent pixels bleeds into the visible ones.
            let pixels = thumbnail.pixels
            for i in stride(from: 0, to: pixels.count, by: 4) where pixels[i + 3] > 0 {
                #expect(Int(pixels[i]) <= limit, "pixel \(i / 4) is red \(pixels[i]) at alpha \(pixels[i + 3])")
            }
        }
    }
}
