extension RasterImage {
    /// This image blurred by a Gaussian of standard deviation `sigma` pixels (every
    /// frame), in premultiplied alpha so transparent pixels do not bleed their colour.
    ///
    /// The Gaussian is approximated by three passes of a box of fractional width each
    /// way (Gwosdek et al., "Theoretical foundations of Gaussian convolution by extended
    /// box filtering", as Pillow's `GaussianBlur`): the cost is a few operations per pixel
    /// whatever `sigma` is. Edges repeat the outermost pixels. A `sigma` of 0 or less
    /// returns the image unchanged.
    ///
    /// ```swift
    /// let soft = image.blurred(sigma: 4)
    /// ```
    public func blurred(sigma: Double) -> RasterImage {
        guard sigma > 0 else { return self }
        return mappingPremultiplied { pixels, width, height in
            BoxBlur.gaussian(&pixels, width: width, height: height, sigma: sigma)
        }
    }

    /// This image sharpened by an unsharp mask: each pixel moves away from its
    /// Gaussian-blurred surroundings (`sigma` as in ``blurred(sigma:)``) by the
    /// difference times `amount` (1: the difference added once, as Pillow's
    /// `UnsharpMask(radius: sigma, percent: 100, threshold: 0)`).
    ///
    /// ```swift
    /// let crisp = thumbnail.sharpened(sigma: 0.5)
    /// ```
    public func sharpened(sigma: Double, amount: Double = 1) -> RasterImage {
        guard sigma > 0, amount != 0 else { return self }
        return mappingPremultiplied { pixels, width, height in
            var blurred = pixels
            BoxBlur.gaussian(&blurred, width: width, height: height, sigma: sigma)
            let gain = Float(amount)
            for index in pixels.indices where index % 4 != 3 {
                let value = Float(pixels[index]) + (Float(pixels[index]) - Float(blurred[index])) * gain
                pixels[index] = UInt8(max(0, min(255, value.rounded())))
            }
        }
    }

    /// This image in blocks of `blockSize` x `blockSize` pixels, each the average of the
    /// pixels it covers (counted from the top left; blocks at the right and bottom edges
    /// average what they hold). A size of 1 or less returns the image unchanged.
    ///
    /// ```swift
    /// let hidden = face.pixelated(blockSize: 12)
    /// ```
    public func pixelated(blockSize: Int) -> RasterImage {
        guard blockSize > 1 else { return self }
        let size = blockSize
        return mappingPremultiplied { pixels, width, height in
            for top in Swift.stride(from: 0, to: height, by: size) {
                for left in Swift.stride(from: 0, to: width, by: size) {
                    let rows = top..<min(height, top + size)
                    let columns = left..<min(width, left + size)
                    var sums = [0, 0, 0, 0]
                    for y in rows {
                        for x in columns {
                            for c in 0..<4 { sums[c] += Int(pixels[(y * width + x) * 4 + c]) }
                        }
                    }
                    let count = rows.count * columns.count
                    let mean = sums.map { UInt8((($0 * 2 + count) / (2 * count))) }
                    for y in rows {
                        for x in columns {
                            for c in 0..<4 { pixels[(y * width + x) * 4 + c] = mean[c] }
                        }
                    }
                }
            }
        }
    }

    /// Every frame premultiplied, in rows of `width * 4` bytes, changed by `body`, and
    /// returned in straight alpha. Works in place: no more memory than a frame's copy.
    private func mappingPremultiplied(_ body: (inout [UInt8], Int, Int) -> Void) -> RasterImage {
        let source = premultiplied()
        let (width, height, rowStride) = (self.width, self.height, source.bytesPerRow)
        let frames = source.frames.map { frame in
            var pixels: [UInt8]
            if rowStride == width * 4 {
                pixels = Array(frame.pixels.prefix(width * height * 4))
            } else {
                pixels = []
                pixels.reserveCapacity(width * height * 4)
                for y in 0..<height { pixels += frame.pixels[(y * rowStride)..<(y * rowStride + width * 4)] }
            }
            body(&pixels, width, height)
            if source.hasAlpha {
                // Colour may not exceed alpha in premultiplied pixels.
                for index in Swift.stride(from: 0, to: pixels.count, by: 4) {
                    let alpha = pixels[index + 3]
                    for c in 0..<3 where pixels[index + c] > alpha { pixels[index + c] = alpha }
                }
            }
            return Frame(pixels: pixels, duration: frame.duration)
        }
        return source.with(frames: frames, bytesPerRow: width * 4).straightAlpha()
    }
}

/// Extended box filtering: three passes each way approximate a Gaussian in constant
/// time per pixel (window sums from prefix sums, so a wide box costs no more).
enum BoxBlur {
    static let passes = 3

    /// The fractional box radius whose `passes` repeats have variance `sigma`²
    /// (Gwosdek et al., equations 7, 11 and 14).
    static func radius(sigma: Double) -> Double {
        let variance = sigma * sigma / Double(passes)
        let length = (12 * variance + 1).squareRoot()
        let whole = ((length - 1) / 2).rounded(.down)
        let fraction =
            (2 * whole + 1) * (whole * (whole + 1) - 3 * variance) / (6 * (variance - (whole + 1) * (whole + 1)))
        return whole + fraction
    }

    /// Three passes each way, each rounded back to 8 bits (as Pillow does).
    static func gaussian(_ pixels: inout [UInt8], width: Int, height: Int, sigma: Double) {
        // Past a few times the image's size a wider box changes nothing visible; the
        // bound keeps the integer box radius far from overflow.
        let radius = radius(sigma: min(sigma, Double(max(width, height)) * 4 + 4))
        var line = [Float](repeating: 0, count: max(width, height) * 4)
        var prefix = [Double](repeating: 0, count: (max(width, height) + 1) * 4)
        for _ in 0..<passes {
            for y in 0..<height {
                blurLine(&pixels, start: y * width * 4, step: 4, count: width, radius, &line, &prefix)
            }
        }
        for _ in 0..<passes {
            for x in 0..<width {
                blurLine(&pixels, start: x * 4, step: width * 4, count: height, radius, &line, &prefix)
            }
        }
    }

    /// One pass along a row or column of `count` pixels: each becomes the mean of the
    /// box `radius` either side, the box's end pixels weighted by its fractional part.
    private static func blurLine(
        _ pixels: inout [UInt8], start: Int, step: Int, count: Int, _ radius: Double, _ line: inout [Float],
        _ prefix: inout [Double]
    ) {
        let whole = Int(radius)
        let fraction = radius - Double(whole)
        let scale = 1 / (2 * radius + 1)
        for i in 0..<count {
            for c in 0..<4 { line[i * 4 + c] = Float(pixels[start + i * step + c]) }
        }
        for c in 0..<4 { prefix[c] = 0 }
        for i in 0..<count {
            for c in 0..<4 { prefix[(i + 1) * 4 + c] = prefix[i * 4 + c] + Double(line[i * 4 + c]) }
        }
        // The sum of pixels lo...hi, positions outside the line repeating its ends.
        func sum(_ lo: Int, _ hi: Int, _ c: Int) -> Double {
            var total = 0.0
            if lo < 0 { total += Double(min(hi, -1) - lo + 1) * Double(line[c]) }
            if hi >= count { total += Double(hi - max(lo, count) + 1) * Double(line[(count - 1) * 4 + c]) }
            let (from, to) = (max(lo, 0), min(hi, count - 1))
            if from <= to { total += prefix[(to + 1) * 4 + c] - prefix[from * 4 + c] }
            return total
        }
        for i in 0..<count {
            for c in 0..<4 {
                var total = sum(i - whole, i + whole, c)
                if fraction > 0 {
                    total += fraction * (sum(i - whole - 1, i - whole - 1, c) + sum(i + whole + 1, i + whole + 1, c))
                }
                pixels[start + i * step + c] = UInt8(max(0, min(255, (total * scale).rounded())))
            }
        }
    }
}
