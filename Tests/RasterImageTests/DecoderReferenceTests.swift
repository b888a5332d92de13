import RasterImage
import Testing

/// Every fixture, decoded from memory and from its file, against pixels that Pillow or
/// ImageMagick decoded (or the source pixels the file was built from). Exact for
/// lossless formats; JPEG and lossy WebP within the tolerance the manifest states.
@Suite("Decoding against independent references")
struct DecoderReferenceTests {
    @Test("pixels, size and metadata match the reference", arguments: Fixtures.all)
    func decodesLikeTheReference(_ fixture: Fixture) throws {
        // Given the fixture's bytes
        let options = DecodingOptions(frames: fixture.page.map { .index($0) } ?? .all)
        let decoder = ImageDecoder(options: options)

        // When it is decoded from memory and from the file
        for image in [try decoder.decode(.bytes(fixture.bytes)), try decoder.decode(.file(path: fixture.path))] {
            // Then every frame matches the reference
            #expect(image.format?.rawValue == fixture.format)
            #expect(image.width == fixture.width)
            #expect(image.height == fixture.height)
            #expect(image.frames.count == fixture.frames.count)
            #expect(image.alphaMode.rawValue == fixture.alphaMode)
            #expect(image.hasAlpha == fixture.hasAlpha)
            #expect(image.orientation.rawValue == fixture.orientation)
            #expect(image.loopCount == fixture.loopCount)
            if fixture.synthesizedProfile == true {
                #expect(image.iccProfile != nil)
            } else {
                #expect(image.iccProfile == fixture.expectedICC)
            }
            #expect(image.cost == image.frames.count * image.bytesPerRow * image.height)
            if let durations = fixture.durationsMs {
                #expect(image.frames.map(\.duration) == durations.map { .milliseconds($0) })
            }
            for (index, expected) in fixture.expectedFrames.enumerated() where index < image.frames.count {
                let diff = difference(
                    image.frames[index].pixels, expected, width: image.width, bytesPerRow: image.bytesPerRow)
                #expect(diff.maximum <= fixture.tolerance, "frame \(index): \(diff)")
            }
        }
    }

    @Test("the header reader agrees with the decoder", arguments: Fixtures.all)
    func infoMatches(_ fixture: Fixture) throws {
        let info = try ImageDecoder().info(.bytes(fixture.bytes))
        #expect(info.format.rawValue == fixture.format)
        #expect(info.contentType == "image/" + fixture.format)
        #expect(info.frameCount == fixture.frameCount)
        #expect(info.orientation.rawValue == fixture.orientation)
        if fixture.page == nil || fixture.page == 0 {
            #expect(info.width == fixture.width)
            #expect(info.height == fixture.height)
        }
        if fixture.frames.count > 1 {
            #expect(info.loopCount == fixture.loopCount)
        }
        // A header can only promise that transparency is possible.
        if fixture.hasAlpha { #expect(info.hasAlpha) }
    }

    @Test("a single frame of an animation is the composited canvas of that frame")
    func selectsOneFrame() throws {
        let fixture = Fixtures.named("gif-animation")
        for index in 0..<fixture.frames.count {
            let image = try ImageDecoder(options: DecodingOptions(frames: .index(index))).decode(.bytes(fixture.bytes))
            #expect(image.frames.count == 1)
            #expect(difference(image.pixels, fixture.expectedFrames[index], width: image.width).maximum == 0)
        }
        let first = try ImageDecoder(options: DecodingOptions(frames: .first)).decode(.bytes(fixture.bytes))
        #expect(first.frames.count == 1)
        #expect(first.pixels == fixture.expectedFrames[0])
    }

    @Test("WebP frames can be picked one by one")
    func selectsWebPFrame() throws {
        let fixture = Fixtures.named("webp-animation")
        let image = try ImageDecoder(options: DecodingOptions(frames: .index(2))).decode(.bytes(fixture.bytes))
        #expect(image.frames.count == 1)
        #expect(difference(image.pixels, fixture.expectedFrames[2], width: image.width).maximum == 0)
    }

    @Test("TIFF pages of different sizes come back one image each")
    func decodesPages() throws {
        let fixtures = Fixtures.all.filter { $0.name.hasPrefix("tiff-pages-sizes-") }
        let pages = try ImageDecoder().decodePages(.file(path: fixtures[0].path))
        #expect(pages.count == fixtures.count)
        for (page, fixture) in zip(pages, fixtures) {
            #expect(page.width == fixture.width && page.height == fixture.height)
            #expect(difference(page.pixels, fixture.expectedFrames[0], width: page.width).maximum == 0)
        }
        // All pages as frames needs one size.
        let error = expectDecodingError { _ = try ImageDecoder().decode(.file(path: fixtures[0].path)) }
        #expect(error?.reason == .unsupported)
    }
}
