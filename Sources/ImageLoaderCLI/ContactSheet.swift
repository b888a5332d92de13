import RasterImage

/// One picture of a contact sheet: the thumbnail, its name, and lines about it.
struct SheetEntry {
    var title: String
    var details: [String] = []
    var image: RasterImage
}

/// A grid of thumbnails with labels under them, for a person to look at: each in a card,
/// centred in a square of `cellSize`, its name in bold and its details below, in a real
/// font where one is installed (``LabelFont``).
struct ContactSheet {
    let cellSize: Int
    var heading: String?
    var gap = 16
    var background: (UInt8, UInt8, UInt8) = (238, 238, 236)

    /// The sheet, `columns` wide (chosen from the count when `nil`).
    func render(_ entries: [SheetEntry], columns: Int? = nil) -> RasterImage? {
        guard !entries.isEmpty else { return nil }
        let titleFont = LabelFont(pixels: max(12, min(16, cellSize / 12)), bold: true)
        let detailFont = LabelFont(pixels: max(11, min(13, cellSize / 15)))
        let headingFont = LabelFont(pixels: 22, bold: true)
        let columns = max(
            1, min(entries.count, columns ?? Int((Double(entries.count) * 1.4).squareRoot().rounded(.up))))
        let rows = (entries.count + columns - 1) / columns
        let inset = 8
        let lines = entries.map(\.details.count).max() ?? 0
        let labelHeight = inset + titleFont.lineHeight + lines * detailFont.lineHeight + inset
        let cardWidth = cellSize + 2 * inset
        let cardHeight = inset + cellSize + labelHeight
        let top = gap + (heading == nil ? 0 : headingFont.lineHeight + gap / 2)
        let width = columns * (cardWidth + gap) + gap
        let height = top + rows * (cardHeight + gap)
        var canvas = Canvas(width: width, height: height, color: background)
        if let heading {
            canvas.text(
                headingFont.fitting(heading, width: width - 2 * gap), x: gap, baseline: gap + headingFont.ascender,
                font: headingFont, color: (30, 30, 30))
        }
        for (index, entry) in entries.enumerated() {
            let x = gap + (index % columns) * (cardWidth + gap)
            let y = top + (index / columns) * (cardHeight + gap)
            canvas.fill(x: x, y: y, width: cardWidth, height: cardHeight, color: (255, 255, 255))
            let image = entry.image.straightAlpha()
            // Centred in its square, over a checkerboard where it is transparent.
            let left = x + inset + (cellSize - min(image.width, cellSize)) / 2
            let imageTop = y + inset + (cellSize - min(image.height, cellSize)) / 2
            canvas.draw(image, x: left, y: imageTop, maxWidth: cellSize, maxHeight: cellSize)
            var baseline = y + inset + cellSize + inset + titleFont.ascender
            canvas.text(
                titleFont.fitting(entry.title, width: cellSize), x: x + inset, baseline: baseline, font: titleFont,
                color: (25, 25, 25))
            baseline += titleFont.lineHeight - titleFont.ascender + detailFont.ascender
            for line in entry.details {
                canvas.text(
                    detailFont.fitting(line, width: cellSize), x: x + inset, baseline: baseline, font: detailFont,
                    color: (90, 90, 90))
                baseline += detailFont.lineHeight
            }
        }
        return RasterImage(width: width, height: height, pixels: canvas.pixels, hasAlpha: false)
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

    /// Fills a rectangle, clipped to the canvas.
    mutating func fill(x: Int, y: Int, width w: Int, height h: Int, color: (UInt8, UInt8, UInt8)) {
        for row in max(0, y)..<min(height, y + h) {
            for column in max(0, x)..<min(width, x + w) {
                let d = (row * width + column) * 4
                (pixels[d], pixels[d + 1], pixels[d + 2]) = color
            }
        }
    }

    /// Draws `text` in `font`, its baseline at `baseline`, starting at `x`: each glyph's
    /// coverage blends `color` over what is there.
    mutating func text(_ text: String, x: Int, baseline: Int, font: LabelFont, color: (UInt8, UInt8, UInt8)) {
        var pen = x
        let ink = [UInt32(color.0), UInt32(color.1), UInt32(color.2)]
        for scalar in text.unicodeScalars {
            let glyph = font.glyph(scalar)
            for row in 0..<glyph.rows {
                let py = baseline - glyph.top + row
                guard py >= 0, py < height else { continue }
                for column in 0..<glyph.width {
                    let px = pen + glyph.left + column
                    let alpha = UInt32(glyph.coverage[row * glyph.width + column])
                    guard px >= 0, px < width, alpha > 0 else { continue }
                    let d = (py * width + px) * 4
                    for c in 0..<3 {
                        pixels[d + c] = UInt8((ink[c] * alpha + UInt32(pixels[d + c]) * (255 - alpha) + 127) / 255)
                    }
                }
            }
            pen += glyph.advance
        }
    }
}
