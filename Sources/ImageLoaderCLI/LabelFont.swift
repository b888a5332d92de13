import CFreeType
import Foundation

/// Text for the contact sheet's labels: a real font (DejaVu Sans, or the font named by
/// `IMAGELOADER_FONT`) rendered by FreeType, which is opened only when a label is drawn;
/// where neither is installed, the 5x7 bitmap font.
final class LabelFont {
    private enum Face {
        case freeType(OpaquePointer)
        case bitmap
    }

    private let face: Face
    /// Rendered glyphs by code point: coverage rows and metrics.
    private var glyphs: [UInt32: Glyph] = [:]

    struct Glyph {
        let width: Int
        let rows: Int
        let left: Int
        let top: Int
        let advance: Int
        let coverage: [UInt8]
    }

    /// Pixels from one baseline to the next, and from a line's top to its baseline.
    let lineHeight: Int
    let ascender: Int

    /// The font files looked for, regular and bold, in the places Debian, Fedora and Arch
    /// put DejaVu (Debian: `fonts-dejavu-core`).
    static func candidates(bold: Bool) -> [String] {
        let name = bold ? "DejaVuSans-Bold.ttf" : "DejaVuSans.ttf"
        var paths = ["/usr/share/fonts/truetype/dejavu/", "/usr/share/fonts/dejavu/", "/usr/share/fonts/TTF/"]
            .map { $0 + name }
        if let chosen = ProcessInfo.processInfo.environment["IMAGELOADER_FONT"], !chosen.isEmpty {
            paths.insert(chosen, at: 0)
        }
        return paths
    }

    /// A font `pixels` high, bold or not: FreeType's rendering of the first font file
    /// found, else the bitmap font.
    init(pixels: Int, bold: Bool = false) {
        for path in LabelFont.candidates(bold: bold) where FileManager.default.fileExists(atPath: path) {
            if let font = il_font_open(path, Int32(pixels)) {
                face = .freeType(font)
                lineHeight = Int(il_font_line_height(font))
                ascender = Int(il_font_ascender(font))
                return
            }
        }
        face = .bitmap
        lineHeight = BitmapFont.glyphHeight + 3
        ascender = BitmapFont.glyphHeight
    }

    deinit {
        if case .freeType(let font) = face { il_font_close(font) }
    }

    /// Whether the labels come from a real font (not the bitmap fallback).
    var isScalable: Bool {
        if case .freeType = face { return true }
        return false
    }

    func glyph(_ scalar: Unicode.Scalar) -> Glyph {
        if let cached = glyphs[scalar.value] { return cached }
        let made: Glyph
        switch face {
        case .freeType(let font):
            var rendered = il_glyph()
            if il_font_render(font, scalar.value, &rendered) == 0 {
                var coverage = [UInt8](repeating: 0, count: Int(rendered.width) * Int(rendered.rows))
                if let buffer = rendered.buffer {
                    for row in 0..<Int(rendered.rows) {
                        for column in 0..<Int(rendered.width) {
                            coverage[row * Int(rendered.width) + column] = buffer[row * Int(rendered.pitch) + column]
                        }
                    }
                }
                made = Glyph(
                    width: Int(rendered.width), rows: Int(rendered.rows), left: Int(rendered.left),
                    top: Int(rendered.top), advance: Int(rendered.advance), coverage: coverage)
            } else {
                made = Glyph(width: 0, rows: 0, left: 0, top: 0, advance: lineHeight / 3, coverage: [])
            }
        case .bitmap:
            let character = Character(scalar)
            var coverage = [UInt8](repeating: 0, count: BitmapFont.glyphWidth * BitmapFont.glyphHeight)
            for y in 0..<BitmapFont.glyphHeight {
                for x in 0..<BitmapFont.glyphWidth where BitmapFont.isSet(character, x: x, y: y) {
                    coverage[y * BitmapFont.glyphWidth + x] = 255
                }
            }
            made = Glyph(
                width: BitmapFont.glyphWidth, rows: BitmapFont.glyphHeight, left: 0, top: BitmapFont.glyphHeight,
                advance: BitmapFont.advance, coverage: coverage)
        }
        glyphs[scalar.value] = made
        return made
    }

    /// The width `text` takes, in pixels.
    func width(of text: String) -> Int {
        text.unicodeScalars.reduce(0) { $0 + glyph($1).advance }
    }

    /// `text` cut to `width` pixels, with an ellipsis where it was cut.
    func fitting(_ text: String, width: Int) -> String {
        guard self.width(of: text) > width else { return text }
        let ellipsis = isScalable ? "…" : "~"
        var kept = ""
        for scalar in text.unicodeScalars {
            if self.width(of: kept + String(scalar) + ellipsis) > width { break }
            kept.unicodeScalars.append(scalar)
        }
        return kept + ellipsis
    }
}
