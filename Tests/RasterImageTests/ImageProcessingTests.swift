import Testing

@testable import RasterImage

/// The image operations behind the service's options, on images built here whose right
/// answer is known by construction. (Their pixels against Pillow's are checked by the
/// service's ProcessingReferenceTests.)
@Suite("Image operations: crops, turns, canvases, filters, trim and attention")
struct ImageProcessingTests {
    /// An opaque image whose pixel (x, y) is (x, y, x + y) modulo 256.
    static func coordinates(_ width: Int, _ height: Int) -> RasterImage {
        var pixels: [UInt8] = []
        for y in 0..<height {
            for x in 0..<width { pixels += [UInt8(x % 256), UInt8(y % 256), UInt8((x + y) % 256), 255] }
        }
        return RasterImage(width: width, height: height, pixels: pixels, hasAlpha: false)!
    }

    /// A flat grey image with `paint` applied to each pixel it returns a colour for.
    static func canvas(_ width: Int, _ height: Int, _ paint: (Int, Int) -> (UInt8, UInt8, UInt8)?) -> RasterImage {
        var pixels: [UInt8] = []
        for y in 0..<height {
            for x in 0..<width {
                let (r, g, b) = paint(x, y) ?? (128, 128, 128)
                pixels += [r, g, b, 255]
            }
        }
        return RasterImage(width: width, height: height, pixels: pixels, hasAlpha: false)!
    }

    @Test("crop, rotate and flip move each pixel where it belongs")
    func geometry() throws {
        let image = Self.coordinates(6, 4)
        let crop = image.cropped(to: PixelRegion(x: 2, y: 1, width: 3, height: 2))
        #expect(crop.width == 3 && crop.height == 2)
        #expect(crop.pixel(x: 0, y: 0)! == (2, 1, 3, 255) && crop.pixel(x: 2, y: 1)! == (4, 2, 6, 255))
        // A region past the edges is clamped to the image.
        let clamped = image.cropped(to: PixelRegion(x: 4, y: 3, width: 10, height: 10))
        #expect(clamped.width == 2 && clamped.height == 1)

        let turned = image.rotated(quarterTurns: 1)
        #expect(turned.width == 4 && turned.height == 6)
        // Clockwise: the bottom-left corner comes to the top left.
        #expect(turned.pixel(x: 0, y: 0)! == (0, 3, 3, 255))
        #expect(turned.pixel(x: 3, y: 0)! == (0, 0, 0, 255))
        let back = turned.rotated(quarterTurns: -1)
        #expect(back.pixels == image.pixels)
        #expect(image.rotated(quarterTurns: 2).pixel(x: 0, y: 0)! == (5, 3, 8, 255))

        let mirrored = image.flipped(horizontally: true, vertically: false)
        #expect(mirrored.pixel(x: 0, y: 0)! == (5, 0, 5, 255))
        let upsideDown = image.flipped(horizontally: false, vertically: true)
        #expect(upsideDown.pixel(x: 0, y: 0)! == (0, 3, 3, 255))
    }

    @Test("a canvas holds the image at its place, the rest the background; parts off the canvas are cut")
    func embedding() throws {
        let image = Self.coordinates(4, 3)
        let red = PixelColor(red: 255, green: 0, blue: 0)
        let boxed = image.embedded(width: 8, height: 5, x: 3, y: 1, background: red)
        #expect(boxed.width == 8 && boxed.height == 5 && !boxed.hasAlpha)
        #expect(boxed.pixel(x: 0, y: 0)! == (255, 0, 0, 255))
        #expect(boxed.pixel(x: 3, y: 1)! == (0, 0, 0, 255) && boxed.pixel(x: 6, y: 3)! == (3, 2, 5, 255))
        #expect(boxed.pixel(x: 7, y: 4)! == (255, 0, 0, 255))
        let clear = image.embedded(width: 6, height: 3, x: -2, y: 0, background: .transparent)
        #expect(clear.hasAlpha && clear.pixel(x: 0, y: 0)! == (2, 0, 2, 255) && clear.pixel(x: 5, y: 2)!.a == 0)
    }

    @Test("compositing is 'over' in premultiplied alpha, scaled by the opacity")
    func compositing() throws {
        let base = RasterImage(width: 2, height: 1, pixels: [0, 0, 200, 255, 0, 0, 200, 255], hasAlpha: false)!
        let mark = RasterImage(width: 1, height: 1, pixels: [255, 255, 255, 128])!
        let once = base.composited(with: mark, at: [PixelPoint(x: 1, y: 0)], opacity: 1)
        // 255 * 128/255 + 0 * (1 - 128/255) = 128; 128 + 200 * 127/255 = 128 + 99.6
        #expect(once.pixel(x: 0, y: 0)! == (0, 0, 200, 255))
        let over = once.pixel(x: 1, y: 0)!
        #expect(over.r == 128 && over.g == 128 && abs(Int(over.b) - 228) <= 1 && over.a == 255)
        let faint = base.composited(with: mark, at: [PixelPoint(x: 1, y: 0)], opacity: 0.5)
        #expect(abs(Int(faint.pixel(x: 1, y: 0)!.r) - 64) <= 1)
        // Off the image: nothing changes.
        #expect(base.composited(with: mark, at: [PixelPoint(x: 5, y: 5)]).pixels == base.pixels)
    }

    @Test("trim finds the content inside a flat border, by the corner's colour or a given one")
    func trim() throws {
        let framed = Self.canvas(40, 30) { x, y in
            (10..<25).contains(x) && (5..<20).contains(y) ? (UInt8(x * 9), 30, UInt8(y * 11)) : (255, 255, 255)
        }
        #expect(framed.contentRegion(threshold: 10) == PixelRegion(x: 10, y: 5, width: 15, height: 15))
        // Equal margins: the smaller of left (10) and right (15), of top (5) and bottom (10).
        #expect(
            framed.contentRegion(threshold: 10, equalHorizontal: true, equalVertical: true)
                == PixelRegion(x: 10, y: 5, width: 20, height: 20))
        // A colour that is not the border's: everything differs from it.
        #expect(framed.contentRegion(threshold: 10, color: .black) == PixelRegion(x: 0, y: 0, width: 40, height: 30))
        // All background: the whole image.
        #expect(Self.canvas(5, 5) { _, _ in nil }.contentRegion(threshold: 0).width == 5)
    }

    @Test("blur keeps flat colour and spreads a point by sigma; sharpen steepens an edge; pixelate averages blocks")
    func filters() throws {
        let flat = Self.canvas(20, 20) { _, _ in nil }
        #expect(flat.blurred(sigma: 3).pixels == flat.pixels)
        // A bright line across a dark image: after the blur its spread is sigma.
        let line = Self.canvas(61, 5) { x, _ in x == 30 ? (255, 255, 255) : (0, 0, 0) }
        let spread = line.blurred(sigma: 4)
        var total = 0.0
        var moment = 0.0
        for x in 0..<61 {
            let value = Double(spread.pixel(x: x, y: 2)!.r)
            total += value
            moment += value * Double((x - 30) * (x - 30))
        }
        #expect(abs((moment / total).squareRoot() - 4) < 0.35, "spread \((moment / total).squareRoot())")
        // An edge from 64 to 192: sharpening overshoots on both sides.
        let edge = Self.canvas(20, 3) { x, _ in x < 10 ? (64, 64, 64) : (192, 192, 192) }
        let sharp = edge.sharpened(sigma: 1)
        #expect(sharp.pixel(x: 9, y: 1)!.r < 64 && sharp.pixel(x: 10, y: 1)!.r > 192)
        #expect(sharp.pixel(x: 0, y: 1)!.r == 64 && sharp.pixel(x: 19, y: 1)!.r == 192)
        let blocks = Self.coordinates(5, 4).pixelated(blockSize: 2)
        // The block of x 0-1, y 0-1 averages (0.5, 0.5, 1); the edge block x = 4 only its own column.
        #expect(blocks.pixel(x: 1, y: 1)! == (1, 1, 1, 255) && blocks.pixel(x: 4, y: 0)! == (4, 1, 5, 255))
    }

    @Test("attention: the window goes to the texture, the skin, the saturated colour; a flat image is centred")
    func attention() throws {
        // Texture (fine edges) on the right of a flat image.
        let textured = Self.canvas(400, 200) { x, y in
            x >= 300 && x < 380 && y >= 60 && y < 140
                ? ((x / 4 + y / 4) % 2 == 0 ? (20, 20, 20) : (230, 230, 230)) : nil
        }
        let right = textured.attentionRegion(width: 200, height: 200)
        #expect(right.x >= 180 && right.x + right.width >= 380, "\(right)")
        // A skin-coloured face on the left of a wide image, for a square crop.
        let face = Self.canvas(600, 200) { x, y in
            (x - 90) * (x - 90) + (y - 100) * (y - 100) < 60 * 60 ? (224, 172, 140) : (120, 130, 120)
        }
        let left = face.attentionRegion(width: 200, height: 200)
        #expect(left.x <= 30, "\(left)")
        // A saturated red patch at the bottom of a tall image, for a wide crop.
        let patch = Self.canvas(200, 600) { _, y in y > 480 ? (230, 20, 30) : (100, 100, 110) }
        let bottom = patch.attentionRegion(width: 200, height: 150)
        #expect(bottom.y >= 440, "\(bottom)")
        // Nothing stands out: the centre, every time.
        let flat = Self.canvas(300, 100) { _, _ in nil }
        #expect(flat.attentionRegion(width: 100, height: 100) == PixelRegion(x: 100, y: 0, width: 100, height: 100))
        #expect(textured.attentionRegion(width: 200, height: 200) == right)
    }
}
