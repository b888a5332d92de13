/// An RGBA colour, straight (not premultiplied) alpha.
///
/// ```swift
/// let paper = PixelColor(hex: "f5f0e1")!      // opaque
/// let clear = PixelColor.transparent
/// ```
public struct PixelColor: Sendable, Hashable, CustomStringConvertible {
    /// The channels, 0 to 255; alpha 255 is opaque.
    public var red: UInt8
    public var green: UInt8
    public var blue: UInt8
    public var alpha: UInt8

    /// A colour from its channels; opaque unless `alpha` says otherwise.
    public init(red: UInt8, green: UInt8, blue: UInt8, alpha: UInt8 = 255) {
        (self.red, self.green, self.blue, self.alpha) = (red, green, blue, alpha)
    }

    /// `RRGGBB` or `RGB` in hexadecimal (no `#`), as imgproxy's `bg` and `t` take it; `nil` otherwise.
    public init?(hex: some StringProtocol) {
        let digits = hex.utf8.map { byte -> UInt8? in
            switch byte {
            case 48...57: byte - 48
            case 65...70: byte - 55
            case 97...102: byte - 87
            default: nil
            }
        }
        guard digits.allSatisfy({ $0 != nil }) else { return nil }
        let values = digits.map { $0! }
        switch values.count {
        case 6:
            self.init(
                red: values[0] << 4 | values[1], green: values[2] << 4 | values[3], blue: values[4] << 4 | values[5])
        case 3: self.init(red: values[0] * 17, green: values[1] * 17, blue: values[2] * 17)
        default: return nil
        }
    }

    /// Opaque white.
    public static let white = PixelColor(red: 255, green: 255, blue: 255)
    /// Opaque black.
    public static let black = PixelColor(red: 0, green: 0, blue: 0)
    /// Fully transparent.
    public static let transparent = PixelColor(red: 0, green: 0, blue: 0, alpha: 0)

    /// `rrggbb`, with `aa` after it when not opaque.
    public var description: String {
        let channels = alpha == 255 ? [red, green, blue] : [red, green, blue, alpha]
        return channels.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }
}

/// A rectangle of an image's pixels.
public struct PixelRegion: Sendable, Hashable, CustomStringConvertible {
    /// The top-left corner and the size, in pixels.
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int

    /// A region at (`x`, `y`) of `width` x `height`.
    public init(x: Int, y: Int, width: Int, height: Int) {
        (self.x, self.y, self.width, self.height) = (x, y, width, height)
    }

    /// `WxH+X+Y`, as ImageMagick writes geometry.
    public var description: String { "\(width)x\(height)+\(x)+\(y)" }
}

extension RasterImage {
    /// The part of this image inside `region` (every frame), clamped to the image: at
    /// least one pixel is kept. The result is upright when this image is.
    ///
    /// ```swift
    /// let face = image.cropped(to: PixelRegion(x: 40, y: 20, width: 64, height: 64))
    /// ```
    public func cropped(to region: PixelRegion) -> RasterImage {
        let x = min(max(0, region.x), width - 1)
        let y = min(max(0, region.y), height - 1)
        let cropWidth = max(1, min(region.width, width - x))
        let cropHeight = max(1, min(region.height, height - y))
        if (x, y, cropWidth, cropHeight) == (0, 0, width, height) { return self }
        let (stride, rowBytes) = (bytesPerRow, cropWidth * 4)
        let frames = self.frames.map { frame in
            Frame(
                pixels: [UInt8](unsafeUninitializedCapacity: rowBytes * cropHeight) { buffer, count in
                    frame.pixels.withUnsafeBufferPointer { source in
                        for row in 0..<cropHeight {
                            let from = source.baseAddress! + (y + row) * stride + x * 4
                            (buffer.baseAddress! + row * rowBytes).update(from: from, count: rowBytes)
                        }
                    }
                    count = rowBytes * cropHeight
                }, duration: frame.duration)
        }
        return with(width: cropWidth, height: cropHeight, frames: frames, bytesPerRow: rowBytes)
    }

    /// This image turned clockwise by `quarterTurns` x 90 degrees (negative: anticlockwise).
    ///
    /// ```swift
    /// let portrait = landscape.rotated(quarterTurns: 1)
    /// ```
    public func rotated(quarterTurns: Int) -> RasterImage {
        let turns = ((quarterTurns % 4) + 4) % 4
        let orientation: Orientation =
            switch turns {
            case 1: .right
            case 2: .down
            case 3: .left
            default: .up
            }
        return reoriented(orientation)
    }

    /// This image mirrored left to right and/or top to bottom.
    public func flipped(horizontally: Bool, vertically: Bool) -> RasterImage {
        switch (horizontally, vertically) {
        case (true, true): reoriented(.down)
        case (true, false): reoriented(.upMirrored)
        case (false, true): reoriented(.downMirrored)
        case (false, false): self
        }
    }

    /// The upright image moved as `orientation` says, the way it would be shown.
    private func reoriented(_ orientation: Orientation) -> RasterImage {
        let upright = oriented()
        guard orientation != .up else { return upright }
        return upright.with(frames: upright.frames, orientation: orientation).oriented()
    }

    /// This image placed at (`x`, `y`) on a `width` x `height` canvas of `background`
    /// (every frame); the parts outside the canvas are cut off. Straight alpha.
    ///
    /// ```swift
    /// let boxed = image.embedded(width: 300, height: 300, x: 50, y: 0, background: .white)
    /// ```
    public func embedded(width: Int, height: Int, x: Int, y: Int, background: PixelColor) -> RasterImage {
        let (canvasWidth, canvasHeight) = (max(1, width), max(1, height))
        let source = straightAlpha()
        let (stride, rowBytes) = (source.bytesPerRow, canvasWidth * 4)
        let fill = [background.red, background.green, background.blue, background.alpha]
        // The part of the image that lands on the canvas.
        let left = max(0, x)
        let right = min(canvasWidth, x + source.width)
        let top = max(0, y)
        let bottom = min(canvasHeight, y + source.height)
        let frames = source.frames.map { frame in
            Frame(
                pixels: [UInt8](unsafeUninitializedCapacity: rowBytes * canvasHeight) { buffer, count in
                    let out = buffer.baseAddress!
                    for index in 0..<(canvasWidth * canvasHeight) {
                        (out + index * 4).initialize(from: fill, count: 4)
                    }
                    if left < right && top < bottom {
                        frame.pixels.withUnsafeBufferPointer { pixels in
                            for row in top..<bottom {
                                let from = pixels.baseAddress! + (row - y) * stride + (left - x) * 4
                                (out + row * rowBytes + left * 4).update(from: from, count: (right - left) * 4)
                            }
                        }
                    }
                    count = rowBytes * canvasHeight
                }, duration: frame.duration)
        }
        let covered = left == 0 && top == 0 && right == canvasWidth && bottom == canvasHeight
        return source.with(
            width: canvasWidth, height: canvasHeight, frames: frames, bytesPerRow: rowBytes,
            hasAlpha: source.hasAlpha || (background.alpha != 255 && !covered))
    }

    /// Every frame composited onto an opaque `background`; the result is opaque.
    ///
    /// ```swift
    /// let onWhite = logo.flattened(onto: .white)
    /// ```
    public func flattened(onto background: PixelColor) -> RasterImage {
        guard hasAlpha else { return straightAlpha() }
        return flattened(onto: [background.red, background.green, background.blue])
    }
}

/// A position in an image's pixels; may lie outside it.
public struct PixelPoint: Sendable, Hashable {
    /// The position across and down.
    public var x: Int
    public var y: Int
    /// A point at (`x`, `y`).
    public init(x: Int, y: Int) { (self.x, self.y) = (x, y) }
}

extension RasterImage {
    /// This image with `overlay`'s first frame drawn over every frame at each of
    /// `places` (its top-left corner; parts off the image are left out), its alpha
    /// multiplied by `opacity` (0 to 1). Porter–Duff "over" in premultiplied alpha, on
    /// the stored (sRGB) values. Straight alpha out.
    ///
    /// ```swift
    /// let marked = photo.composited(with: logo, at: [PixelPoint(x: 10, y: 10)], opacity: 0.5)
    /// ```
    public func composited(with overlay: RasterImage, at places: [PixelPoint], opacity: Double = 1) -> RasterImage {
        let base = premultiplied()
        let mark = overlay.premultiplied()
        let (width, height, stride, markStride) = (base.width, base.height, base.bytesPerRow, mark.bytesPerRow)
        let weight = UInt32(max(0, min(255, (opacity * 255).rounded())))
        guard weight > 0 else { return straightAlpha() }
        let frames = base.frames.map { frame in
            var pixels = frame.pixels
            pixels.withUnsafeMutableBufferPointer { out in
                mark.frames[0].pixels.withUnsafeBufferPointer { source in
                    for place in places {
                        let (top, bottom) = (max(0, place.y), min(height, place.y + mark.height))
                        let (left, right) = (max(0, place.x), min(width, place.x + mark.width))
                        guard top < bottom, left < right else { continue }
                        let (rows, columns) = (top..<bottom, left..<right)
                        for y in rows {
                            for x in columns {
                                let s = source.baseAddress! + (y - place.y) * markStride + (x - place.x) * 4
                                let d = out.baseAddress! + y * stride + x * 4
                                let a = UInt32(PixelAlpha.multiply(UInt32(s[3]), weight))
                                guard a > 0 else { continue }
                                for c in 0..<4 {
                                    let top = UInt32(PixelAlpha.multiply(UInt32(s[c]), weight))
                                    d[c] = UInt8(min(255, top + UInt32(PixelAlpha.multiply(UInt32(d[c]), 255 - a))))
                                }
                            }
                        }
                    }
                }
            }
            return Frame(pixels: pixels, duration: frame.duration)
        }
        return base.with(frames: frames, hasAlpha: base.hasAlpha).straightAlpha()
    }
}
