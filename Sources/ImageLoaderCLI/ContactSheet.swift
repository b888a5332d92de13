import RasterImage

/// A grid of thumbnails with their names under them, for a person to look at.
struct ContactSheet {
    let cellSize: Int
    var padding = 10
    var labelHeight = 12
    var background: (UInt8, UInt8, UInt8) = (236, 236, 236)

    /// The sheet, `columns` wide (chosen from the count when `nil`).
    func render(_ entries: [(name: String, image: RasterImage)], columns: Int? = nil) -> RasterImage? {
        guard !entries.isEmpty else { return nil }
        let columns = max(
            1, min(entries.count, columns ?? Int((Double(entries.count) * 1.4).squareRoot().rounded(.up))))
        let rows = (entries.count + columns - 1) / columns
        let cellWidth = cellSize + padding
        let cellHeight = cellSize + labelHeight + padding
        let width = columns * cellWidth + padding
        let height = rows * cellHeight + padding
        var canvas = Canvas(width: width, height: height, color: background)
        for (index, entry) in entries.enumerated() {
            let x = padding + (index % columns) * cellWidth
            let y = padding + (index / columns) * cellHeight
            let image = entry.image.straightAlpha()
            // Centred in its square, over a checkerboard where it is transparent.
            let left = x + (cellSize - min(image.width, cellSize)) / 2
            let top = y + (cellSize - min(image.height, cellSize)) / 2
            canvas.draw(image, x: left, y: top, maxWidth: cellSize, maxHeight: cellSize)
            canvas.text(label(entry.name, fitting: cellSize), x: x, y: y + cellSize + 3, color: (40, 40, 40))
        }
        return RasterImage(width: width, height: height, pixels: canvas.pixels, hasAlpha: false)
    }

    private func label(_ name: String, fitting width: Int) -> String {
        let characters = max(1, width / BitmapFont.advance)
        return name.count <= characters ? name : String(name.prefix(characters - 1)) + "~"
    }
}

/// An opaque RGBA drawing surface.
struct Canvas {
    let width: Int
    let height: Int
    var pixels: [UInt8]

    init(width: Int, height: Int, color: (UInt8, UInt8, UInt8)) {
        self.width = width
        self.height = height
        pixels = [UInt8](repeating: 255, count: width * height * 4)
        for i in stride(from: 0, to: pixels.count, by: 4) {
            (pixels[i], pixels[i + 1], pixels[i + 2]) = color
        }
    }

    /// Composites an image (straight alpha) at (x, y), over a checkerboard where it is
    /// not opaque, clipped to `maxWidth` x `maxHeight` and to the canvas.
    mutating func draw(_ image: RasterImage, x: Int, y: Int, maxWidth: Int, maxHeight: Int) {
        let source = image.pixels
        for row in 0..<min(image.height, maxHeight) where y + row >= 0 && y + row < height {
            for column in 0..<min(image.width, maxWidth) where x + column >= 0 && x + column < width {
                let s = row * image.bytesPerRow + column * 4
                let d = ((y + row) * width + x + column) * 4
                let alpha = UInt32(source[s + 3])
                let check: UInt32 = ((row / 6) + (column / 6)) % 2 == 0 ? 255 : 204
                for c in 0..<3 {
                    let under = alpha == 255 ? 0 : check
                    pixels[d + c] = UInt8((UInt32(source[s + c]) * alpha + under * (255 - alpha) + 127) / 255)
                }
            }
        }
    }

    /// Draws text in the bitmap font, its top left at (x, y).
    mutating func text(_ text: String, x: Int, y: Int, color: (UInt8, UInt8, UInt8)) {
        for (index, character) in text.enumerated() {
            let left = x + index * BitmapFont.advance
            for gy in 0..<BitmapFont.glyphHeight {
                for gx in 0..<BitmapFont.glyphWidth where BitmapFont.isSet(character, x: gx, y: gy) {
                    let (px, py) = (left + gx, y + gy)
                    guard px >= 0, px < width, py >= 0, py < height else { continue }
                    let d = (py * width + px) * 4
                    (pixels[d], pixels[d + 1], pixels[d + 2]) = color
                }
            }
        }
    }
}
