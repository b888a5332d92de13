/// Pixel conversions shared by decoders, written as plain loops over raw rows.
enum ColorConversion {
    /// CMYK (4 bytes a pixel) to opaque RGBA in place: `R = (255 - C)(255 - K) / 255`,
    /// rounded. `inverted` data stores `255 - ink`, as Adobe applications write it.
    static func cmykToRGBA(_ row: UnsafeMutablePointer<UInt8>, count: Int, inverted: Bool) {
        var p = row
        for _ in 0..<count {
            var c = UInt32(p[0])
            var m = UInt32(p[1])
            var y = UInt32(p[2])
            var k = UInt32(p[3])
            if !inverted {
                c = 255 - c
                m = 255 - m
                y = 255 - y
                k = 255 - k
            }
            // Now c, m, y, k hold 255 - ink.
            p[0] = PixelAlpha.multiply(c, k)
            p[1] = PixelAlpha.multiply(m, k)
            p[2] = PixelAlpha.multiply(y, k)
            p[3] = 255
            p += 4
        }
    }

    /// 16-bit to 8-bit with rounding to nearest (`v / 257`), as libpng's scale_16 does.
    @inline(__always)
    static func scale16to8(_ value: UInt16) -> UInt8 {
        UInt8(truncatingIfNeeded: (UInt32(value) * 255 + 32895) >> 16)
    }
}
