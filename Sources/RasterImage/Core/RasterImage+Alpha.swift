extension RasterImage {
    /// This image with its colour channels multiplied by alpha; `self` when it already is.
    ///
    /// Resampling and compositing need premultiplied pixels, or transparent pixels
    /// bleed their (invisible) colour into their neighbours.
    ///
    /// ```swift
    /// let ready = image.premultiplied()
    /// assert(ready.alphaMode == .premultiplied)
    /// ```
    public func premultiplied() -> RasterImage {
        guard alphaMode == .straight else { return self }
        guard hasAlpha else { return with(frames: frames, alphaMode: .premultiplied) }
        return with(frames: frames.map { convertFrame($0, PixelAlpha.premultiply) }, alphaMode: .premultiplied)
    }

    /// This image with alpha divided back out of its colour channels; `self` when it already is.
    ///
    /// Dividing is exact only where alpha is 255: where it is small, the colour was
    /// already rounded when it was multiplied.
    public func straightAlpha() -> RasterImage {
        guard alphaMode == .premultiplied else { return self }
        guard hasAlpha else { return with(frames: frames, alphaMode: .straight) }
        return with(frames: frames.map { convertFrame($0, PixelAlpha.unpremultiply) }, alphaMode: .straight)
    }

    private func convertFrame(
        _ frame: Frame, _ convert: (UnsafeMutablePointer<UInt8>, Int) -> Void
    ) -> Frame {
        var pixels = frame.pixels
        let (width, height, bytesPerRow) = (self.width, self.height, self.bytesPerRow)
        pixels.withUnsafeMutableBufferPointer { buffer in
            for y in 0..<height {
                convert(buffer.baseAddress! + y * bytesPerRow, width)
            }
        }
        return Frame(pixels: pixels, duration: frame.duration)
    }
}

/// Row-level alpha conversions shared by the decoders and ``RasterImage``.
enum PixelAlpha {
    /// Multiplies R, G and B by A/255, rounding to nearest, for `count` RGBA pixels.
    static func premultiply(_ row: UnsafeMutablePointer<UInt8>, _ count: Int) {
        var p = row
        for _ in 0..<count {
            let a = UInt32(p[3])
            if a != 255 {
                p[0] = multiply(UInt32(p[0]), a)
                p[1] = multiply(UInt32(p[1]), a)
                p[2] = multiply(UInt32(p[2]), a)
            }
            p += 4
        }
    }

    /// Divides R, G and B by A/255, rounding to nearest, for `count` RGBA pixels.
    static func unpremultiply(_ row: UnsafeMutablePointer<UInt8>, _ count: Int) {
        var p = row
        for _ in 0..<count {
            let a = UInt32(p[3])
            if a == 0 {
                p[0] = 0
                p[1] = 0
                p[2] = 0
            } else if a != 255 {
                p[0] = UInt8(min(255, (UInt32(p[0]) * 255 + a / 2) / a))
                p[1] = UInt8(min(255, (UInt32(p[1]) * 255 + a / 2) / a))
                p[2] = UInt8(min(255, (UInt32(p[2]) * 255 + a / 2) / a))
            }
            p += 4
        }
    }

    /// `value * alpha / 255`, rounded to nearest, without a division.
    @inline(__always)
    static func multiply(_ value: UInt32, _ alpha: UInt32) -> UInt8 {
        let t = value * alpha + 128
        return UInt8(truncatingIfNeeded: (t + (t >> 8)) >> 8)
    }
}

extension RasterImage {
    /// Whether every pixel of frame `frame` is grey: red, green and blue equal (what an
    /// encoder's `grayscale` option checks before it writes one channel).
    ///
    /// ```swift
    /// if thumbnail.isGray() { print("can be written as grey") }
    /// ```
    public func isGray(frame: Int = 0) -> Bool {
        guard frames.indices.contains(frame) else { return false }
        let (width, height, stride) = (width, height, bytesPerRow)
        return frames[frame].pixels.withUnsafeBufferPointer { pixels in
            for y in 0..<height {
                let row = y * stride
                guard row + width * 4 <= pixels.count else { return false }
                var x = row
                let end = row + width * 4
                while x < end {
                    if pixels[x] != pixels[x + 1] || pixels[x] != pixels[x + 2] { return false }
                    x += 4
                }
            }
            return true
        }
    }
}
