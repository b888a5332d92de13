import RasterImage
import Testing

@Suite("The RasterImage type")
struct RasterImageTests {
    @Test("sizes that do not add up are refused")
    func validation() {
        #expect(RasterImage(width: 2, height: 2, pixels: [UInt8](repeating: 0, count: 16)) != nil)
        #expect(RasterImage(width: 2, height: 2, pixels: [UInt8](repeating: 0, count: 15)) == nil)
        #expect(RasterImage(width: 0, height: 2, pixels: []) == nil)
        #expect(
            RasterImage(width: 2, height: 2, bytesPerRow: 7, frames: [.init(pixels: [UInt8](repeating: 0, count: 16))])
                == nil)
        #expect(RasterImage(width: 1, height: 1, frames: []) == nil)
    }

    @Test("cost counts every frame's decoded bytes")
    func cost() throws {
        let image = try ImageDecoder().decode(.bytes(Fixtures.named("gif-animation").bytes))
        #expect(image.cost == 5 * 48 * 32 * 4)
        #expect(image.isAnimated)
        let first = try ImageDecoder(options: DecodingOptions(frames: .first)).decode(
            .bytes(Fixtures.named("gif-animation").bytes))
        #expect(first.cost == 48 * 32 * 4)
    }

    @Test("premultiplying rounds c * a / 255 to nearest, and straightening undoes it where it can")
    func alphaConversions() throws {
        // Every (colour, alpha) pair, one pixel each.
        var pixels: [UInt8] = []
        for a in 0...255 { for c in 0...255 { pixels += [UInt8(c), UInt8(255 - c), UInt8(c / 2), UInt8(a)] } }
        let image = RasterImage(width: 256, height: 256, pixels: pixels)!
        let premultiplied = image.premultiplied()
        #expect(premultiplied.alphaMode == .premultiplied)
        for a in stride(from: 0, through: 255, by: 17) {
            for c in stride(from: 0, through: 255, by: 5) {
                let (r, g, _, alpha) = try #require(premultiplied.pixel(x: c, y: a))
                #expect(Int(r) == (c * a + 127) / 255)
                #expect(Int(g) == ((255 - c) * a + 127) / 255)
                #expect(Int(alpha) == a)
            }
        }
        let back = premultiplied.straightAlpha()
        #expect(back.alphaMode == .straight)
        // Outside the image, or a frame it does not have: nil, never a trap.
        #expect(
            back.pixel(x: 256, y: 0) == nil && back.pixel(x: 0, y: -1) == nil && back.pixel(x: 0, y: 0, frame: 1) == nil
        )
        // Opaque pixels come back exactly; translucent ones within the rounding of a / 255.
        for c in 0...255 {
            #expect(back.pixel(x: c, y: 255)?.r == UInt8(c))
            let (r, _, _, _) = try #require(back.pixel(x: c, y: 128))
            #expect(abs(Int(r) - c) <= 1)
        }
        #expect(premultiplied.premultiplied() == premultiplied)
        #expect(image.straightAlpha() == image)
    }

    @Test("an orientation that turns the image swaps its shown size")
    func orientedSize() throws {
        let image = try ImageDecoder().decode(.bytes(Fixtures.named("jpeg-orientation6").bytes))
        #expect(image.orientation == .right)
        #expect(image.orientedSize == (image.height, image.width))
        #expect(Orientation(tagValue: 0) == .up && Orientation(tagValue: 9) == .up)
    }

    @Test("the description leaves the pixels out")
    func description() throws {
        let image = try ImageDecoder().decode(.bytes(Fixtures.named("webp-exif-icc").bytes))
        #expect(
            image.description
                == "RasterImage(48x32 webp, straight alpha (opaque), orientation 8, ICC \(image.iccProfile!.count) bytes, 6144 bytes)"
        )
    }
}
