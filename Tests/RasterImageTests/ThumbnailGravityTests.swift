import Testing

@testable import RasterImage

/// `.force` and the crop's gravity, checked against the same thumbnail made from the
/// image already turned upright by `oriented()` (the reference for every orientation).
@Suite("Thumbnail gravity and forced sizes")
struct ThumbnailGravityTests {
    /// A `width` x `height` image in three vertical bands, red, green and blue (left to
    /// right), with a white top row band and a black bottom one, so every crop position differs.
    static func bands(width: Int, height: Int, orientation: Orientation = .up) -> RasterImage {
        var pixels = [UInt8](repeating: 255, count: width * height * 4)
        for y in 0..<height {
            for x in 0..<width {
                let offset = (y * width + x) * 4
                var color: (UInt8, UInt8, UInt8) =
                    x < width / 3 ? (220, 20, 20) : x < 2 * width / 3 ? (20, 220, 20) : (20, 20, 220)
                if y < height / 4 { color = (250, 250, 250) }
                if y >= height - height / 4 { color = (5, 5, 5) }
                (pixels[offset], pixels[offset + 1], pixels[offset + 2]) = color
            }
        }
        return RasterImage(
            width: width, height: height, frames: [.init(pixels: pixels)], orientation: orientation, hasAlpha: false)!
    }

    static func meanDifference(_ a: RasterImage, _ b: RasterImage) -> Double {
        guard a.width == b.width, a.height == b.height else { return .infinity }
        var total = 0
        for index in a.pixels.indices { total += abs(Int(a.pixels[index]) - Int(b.pixels[index])) }
        return Double(total) / Double(a.pixels.count)
    }

    @Test("a crop keeps the side its gravity names, in every orientation", arguments: Orientation.allCases)
    func gravityFollowsOrientation(orientation: Orientation) throws {
        // Stored so that, once upright, the image is always 300x120 with the same bands.
        let upright = Self.bands(width: 300, height: 120)
        let stored = Self.stored(upright, as: orientation)
        #expect(stored.oriented().pixels == upright.pixels)
        for gravity in ThumbnailOptions.Gravity.allCases {
            var options = ThumbnailOptions(width: 60, height: 60, fit: .fill)
            options.gravity = gravity
            let made = try stored.thumbnail(options: options)
            let reference = try upright.thumbnail(options: options)
            #expect((made.width, made.height) == (60, 60))
            #expect(Self.meanDifference(made, reference) < 1, "\(orientation) \(gravity)")
        }
    }

    @Test("the streaming decoders crop by gravity too: an EXIF-turned JPEG and a PNG, against decode, orient, crop")
    func streamingPaths() throws {
        for name in ["images/jpeg-orientation6.jpg", "images/png-photo.png", "images/jpeg-800x600.jpg"] {
            let bytes = Fixtures.bytes(name)
            let upright = try ImageDecoder().decode(.bytes(bytes)).oriented()
            for gravity in [ThumbnailOptions.Gravity.northWest, .south, .east] {
                var options = ThumbnailOptions(width: 24, height: 24, fit: .fill)
                options.gravity = gravity
                options.shrinkOnLoad = .fastest
                let streamed = try ImageDecoder().thumbnail(.bytes(bytes), options: options)
                let reference = try upright.thumbnail(options: options)
                // The JPEG path scales in the DCT first: close, not identical.
                #expect(Self.meanDifference(streamed, reference) < 12, "\(name) \(gravity)")
                // Where the gravity moves the crop along the side that overflows, the
                // result differs from the centred one.
                let moves = upright.width > upright.height ? gravity.halves.x != 1 : gravity.halves.y != 1
                if upright.width != upright.height && moves {
                    var centre = options
                    centre.gravity = .center
                    let centred = try ImageDecoder().thumbnail(.bytes(bytes), options: centre)
                    #expect(centred.pixels != streamed.pixels, "\(name) \(gravity) cropped at the centre")
                }
            }
        }
    }

    @Test("west keeps red, east blue, the centre green; north keeps the white band")
    func gravityKeepsItsSide() throws {
        let image = Self.bands(width: 300, height: 120)
        func centre(_ gravity: ThumbnailOptions.Gravity, fit: ThumbnailOptions.Fit = .fill) throws -> [UInt8] {
            var options = ThumbnailOptions(width: 40, height: 40, fit: fit)
            options.gravity = gravity
            let thumb = try image.thumbnail(options: options)
            let pixel = try #require(thumb.pixel(x: thumb.width / 2, y: thumb.height / 2))
            return [pixel.r, pixel.g, pixel.b]
        }
        #expect(try centre(.west)[0] > 200)
        #expect(try centre(.east)[2] > 200)
        #expect(try centre(.center)[1] > 200)
        var tall = ThumbnailOptions(width: 100, height: 20, fit: .fill)
        tall.gravity = .north
        let top = try image.thumbnail(options: tall)
        #expect(try #require(top.pixel(x: 50, y: 2)).r > 240)
        tall.gravity = .south
        let bottom = try image.thumbnail(options: tall)
        #expect(try #require(bottom.pixel(x: 50, y: 17)).r < 20)
    }

    @Test(".force gives exactly the box, each side scaled on its own; not enlarged unless allowed")
    func force() throws {
        let image = Self.bands(width: 300, height: 120)
        let forced = try image.thumbnail(options: ThumbnailOptions(width: 50, height: 50, fit: .force))
        #expect((forced.width, forced.height) == (50, 50))
        // The same as resizing to 50x50 directly.
        #expect(Self.meanDifference(forced, image.resized(width: 50, height: 50)) < 1)
        let wide = try image.thumbnail(options: ThumbnailOptions(width: 600, height: 60, fit: .force))
        #expect((wide.width, wide.height) == (300, 60))
        var enlarged = ThumbnailOptions(width: 600, height: 60, fit: .force)
        enlarged.allowsUpscaling = true
        #expect(try image.thumbnail(options: enlarged).width == 600)
        // Turned: the box is in upright terms.
        let turned = Self.stored(image, as: .right)
        let upright = try turned.thumbnail(options: ThumbnailOptions(width: 50, height: 20, fit: .force))
        #expect((upright.width, upright.height) == (50, 20))
    }

    /// The stored image that `orientation` shows as `upright`.
    static func stored(_ upright: RasterImage, as orientation: Orientation) -> RasterImage {
        let inverse: Orientation =
            switch orientation {
            case .right: .left
            case .left: .right
            default: orientation
            }
        let turned = RasterImage(
            width: upright.width, height: upright.height, frames: upright.frames, orientation: inverse,
            hasAlpha: false)!.oriented()
        return RasterImage(
            width: turned.width, height: turned.height, frames: turned.frames, orientation: orientation,
            hasAlpha: false)!
    }
}
