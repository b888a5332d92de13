extension RasterImage {
    /// The smallest region holding every pixel that differs from the background by
    /// more than `threshold` (0 to 255) in any of red, green and blue: what a trim
    /// keeps, as libvips' `find_trim` under imgproxy judges it. Transparency is first
    /// flattened onto magenta (255, 0, 255), so transparent borders are trimmed like
    /// any flat colour. The background is `color` (its RGB), or the top-left pixel
    /// (flattened) when `nil`. `equalHorizontal` takes as much from the right as from
    /// the left (the smaller of the two), `equalVertical` as much from the bottom as
    /// from the top. An image that is all background gives the whole image. Looks at
    /// the first frame.
    ///
    /// ```swift
    /// let content = scan.contentRegion(threshold: 10)
    /// let trimmed = scan.cropped(to: content)
    /// ```
    public func contentRegion(
        threshold: Double, color: PixelColor? = nil, equalHorizontal: Bool = false, equalVertical: Bool = false
    ) -> PixelRegion {
        let image = straightAlpha()
        let whole = PixelRegion(x: 0, y: 0, width: width, height: height)
        let matte = (255, 0, 255)
        // A straight-alpha pixel flattened onto the matte, rounded as libvips' flatten.
        func flattened(_ value: UInt8, _ alpha: UInt8, _ background: Int) -> Int {
            (Int(value) * Int(alpha) + background * (255 - Int(alpha)) + 127) / 255
        }
        let first = image.pixel(x: 0, y: 0)!
        let background =
            color.map { [Int($0.red), Int($0.green), Int($0.blue)] }
            ?? [
                flattened(first.r, first.a, matte.0), flattened(first.g, first.a, matte.1),
                flattened(first.b, first.a, matte.2),
            ]
        let limit = Int(max(0, min(255, threshold)).rounded(.down))
        var (left, right, top, bottom) = (width, -1, height, -1)
        let stride = image.bytesPerRow
        image.frames[0].pixels.withUnsafeBufferPointer { pixels in
            for y in 0..<height {
                let row = pixels.baseAddress! + y * stride
                for x in 0..<width {
                    let p = row + x * 4
                    let alpha = p[3]
                    if abs(flattened(p[0], alpha, matte.0) - background[0]) > limit
                        || abs(flattened(p[1], alpha, matte.1) - background[1]) > limit
                        || abs(flattened(p[2], alpha, matte.2) - background[2]) > limit
                    {
                        left = min(left, x)
                        right = max(right, x)
                        top = min(top, y)
                        bottom = max(bottom, y)
                    }
                }
            }
        }
        guard right >= left, bottom >= top else { return whole }
        if equalHorizontal {
            let margin = min(left, width - 1 - right)
            (left, right) = (margin, width - 1 - margin)
        }
        if equalVertical {
            let margin = min(top, height - 1 - bottom)
            (top, bottom) = (margin, height - 1 - margin)
        }
        return PixelRegion(x: left, y: top, width: right - left + 1, height: bottom - top + 1)
    }

    /// Where a `width` x `height` window over this image holds the most of what draws
    /// the eye, as libvips' `attention` smart crop judges it: edges (the gradient of
    /// luminance), skin tones and saturated colour, measured on a copy reduced to at
    /// most 160 pixels a side. Among windows that hold as much, the one nearest the
    /// centre wins, so the answer is deterministic. Looks at the first frame.
    ///
    /// ```swift
    /// let window = photo.attentionRegion(width: 300, height: 300)
    /// let square = photo.cropped(to: window)
    /// ```
    public func attentionRegion(width cropWidth: Int, height cropHeight: Int) -> PixelRegion {
        let cropWidth = max(1, min(cropWidth, width))
        let cropHeight = max(1, min(cropHeight, height))
        guard cropWidth < width || cropHeight < height else {
            return PixelRegion(x: 0, y: 0, width: width, height: height)
        }
        let scale = min(1, Double(AttentionMap.side) / Double(max(width, height)))
        let smallWidth = max(1, Int((Double(width) * scale).rounded()))
        let smallHeight = max(1, Int((Double(height) * scale).rounded()))
        let small = resized(width: smallWidth, height: smallHeight, kernel: .box).straightAlpha()
        let map = AttentionMap(small)
        // The window in the reduced image's pixels, and the best place for it there.
        let windowWidth = max(1, min(smallWidth, Int((Double(cropWidth) * scale).rounded())))
        let windowHeight = max(1, min(smallHeight, Int((Double(cropHeight) * scale).rounded())))
        guard let (bestX, bestY) = map.bestWindow(width: windowWidth, height: windowHeight) else {
            // Nothing stands out: the centre.
            return PixelRegion(
                x: (width - cropWidth) / 2, y: (height - cropHeight) / 2, width: cropWidth, height: cropHeight)
        }
        // Back to full size: the window's centre keeps its place.
        let centreX = (Double(bestX) + Double(windowWidth) / 2) / scale
        let centreY = (Double(bestY) + Double(windowHeight) / 2) / scale
        let x = min(max(0, Int((centreX - Double(cropWidth) / 2).rounded())), width - cropWidth)
        let y = min(max(0, Int((centreY - Double(cropHeight) / 2).rounded())), height - cropHeight)
        return PixelRegion(x: x, y: y, width: cropWidth, height: cropHeight)
    }
}

/// How much each pixel of a small image draws the eye.
struct AttentionMap {
    static let side = 160
    let width: Int
    let height: Int
    /// Interest per pixel, row by row.
    let interest: [Double]

    init(_ image: RasterImage) {
        let (width, height, stride) = (image.width, image.height, image.bytesPerRow)
        var luma = [Double](repeating: 0, count: width * height)
        var scores = [Double](repeating: 0, count: width * height)
        image.frames[0].pixels.withUnsafeBufferPointer { pixels in
            for y in 0..<height {
                for x in 0..<width {
                    let p = pixels.baseAddress! + y * stride + x * 4
                    let alpha = Double(p[3]) / 255
                    let (r, g, b) = (Double(p[0]), Double(p[1]), Double(p[2]))
                    luma[y * width + x] = (0.2126 * r + 0.7152 * g + 0.0722 * b) * alpha
                    let high = max(r, g, b)
                    let low = min(r, g, b)
                    // Saturation, counted where it is clear (as libvips' threshold on it).
                    let saturation = high > 0 ? (high - low) / high : 0
                    var score = saturation > 0.4 ? saturation * 64 : 0
                    // Skin: red above green above blue, within the ranges skin tones take.
                    let sum = r + g + b
                    if sum > 90 {
                        let (nr, ng) = (r / sum, g / sum)
                        if nr > 0.36 && nr < 0.52 && ng > 0.28 && ng < 0.37 && r > g && g > b { score += 96 }
                    }
                    scores[y * width + x] = score * alpha
                }
            }
        }
        // Edges: the magnitude of the luminance gradient (Sobel).
        for y in 0..<height {
            for x in 0..<width {
                func l(_ dx: Int, _ dy: Int) -> Double {
                    luma[min(height - 1, max(0, y + dy)) * width + min(width - 1, max(0, x + dx))]
                }
                let gx = (l(1, -1) + 2 * l(1, 0) + l(1, 1)) - (l(-1, -1) + 2 * l(-1, 0) + l(-1, 1))
                let gy = (l(-1, 1) + 2 * l(0, 1) + l(1, 1)) - (l(-1, -1) + 2 * l(0, -1) + l(1, -1))
                scores[y * width + x] += (gx * gx + gy * gy).squareRoot() / 4
            }
        }
        (self.width, self.height, interest) = (width, height, scores)
    }

    /// The top-left corner of the `windowWidth` x `windowHeight` window holding the most
    /// interest (sums from an integral image); ties go to the window nearest the centre.
    /// `nil` when no window holds more than the centred one: nothing stands out.
    func bestWindow(width windowWidth: Int, height windowHeight: Int) -> (Int, Int)? {
        var integral = [Double](repeating: 0, count: (width + 1) * (height + 1))
        for y in 0..<height {
            var row = 0.0
            for x in 0..<width {
                row += interest[y * width + x]
                integral[(y + 1) * (width + 1) + x + 1] = integral[y * (width + 1) + x + 1] + row
            }
        }
        func sum(_ x: Int, _ y: Int) -> Double {
            integral[(y + windowHeight) * (width + 1) + x + windowWidth] - integral[y * (width + 1) + x + windowWidth]
                - integral[(y + windowHeight) * (width + 1) + x] + integral[y * (width + 1) + x]
        }
        let centre = (Double(width - windowWidth) / 2, Double(height - windowHeight) / 2)
        let centred = sum((width - windowWidth) / 2, (height - windowHeight) / 2)
        var best = (x: 0, y: 0, sum: -1.0, distance: Double.infinity)
        for y in 0...(height - windowHeight) {
            for x in 0...(width - windowWidth) {
                let sum = sum(x, y)
                let distance = abs(Double(x) - centre.0) + abs(Double(y) - centre.1)
                // Sums within a hair of each other are a tie (floating-point noise).
                if sum > best.sum + 1e-6 || (abs(sum - best.sum) <= 1e-6 && distance < best.distance) {
                    best = (x, y, sum, distance)
                }
            }
        }
        // Sums within a hair of the centred window's: nothing stands out.
        guard best.sum > centred + 1e-6 * max(1, abs(centred)) else { return nil }
        return (best.x, best.y)
    }
}
