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
        let whole = Int(radius)
        let box = Box(whole: whole, fraction: Float(radius - Double(whole)), scale: Float(1 / (2 * radius + 1)))
        let longest = max(width, height) + 2 * (whole + 1)
        var padded = [SIMD4<Float>](repeating: .zero, count: longest)
        var prefix = [SIMD4<Float>](repeating: .zero, count: longest + 1)
        pixels.withUnsafeMutableBufferPointer { pixels in
            for _ in 0..<passes {
                for y in 0..<height {
                    box.blur(pixels, start: y * width * 4, step: 4, count: width, &padded, &prefix)
                }
            }
            for _ in 0..<passes {
                for x in 0..<width {
                    box.blur(pixels, start: x * 4, step: width * 4, count: height, &padded, &prefix)
                }
            }
        }
    }

    /// One box of a fractional radius: `whole` pixels either side at full weight, one more
    /// either side at `fraction`, all times `scale`.
    struct Box {
        let whole: Int
        let fraction: Float
        let scale: Float

        /// One pass along a row or column of `count` pixels. The line is copied with its
        /// end pixels repeated past both ends, so every box is a difference of two prefix
        /// sums: the same few operations whatever the radius. (Sums of 8-bit values are
        /// exact in `Float` while the padded line is under 65,000 pixels; past that, for a
        /// sigma of thousands, they are off by parts in ten million.)
        func blur(
            _ pixels: UnsafeMutableBufferPointer<UInt8>, start: Int, step: Int, count: Int,
            _ padded: inout [SIMD4<Float>], _ prefix: inout [SIMD4<Float>]
        ) {
            let pad = whole + 1
            func load(_ i: Int) -> SIMD4<Float> {
                let p = start + i * step
                return SIMD4(Float(pixels[p]), Float(pixels[p + 1]), Float(pixels[p + 2]), Float(pixels[p + 3]))
            }
            let (first, last) = (load(0), load(count - 1))
            for i in 0..<pad { padded[i] = first }
            for i in 0..<count { padded[pad + i] = load(i) }
            for i in 0..<pad { padded[pad + count + i] = last }
            prefix[0] = .zero
            for i in 0..<(count + 2 * pad) { prefix[i + 1] = prefix[i] + padded[i] }
            for i in 0..<count {
                let centre = pad + i
                var total = prefix[centre + whole + 1] - prefix[centre - whole]
                total += fraction * (padded[centre - whole - 1] + padded[centre + whole + 1])
                let value = (total * scale).rounded(.toNearestOrAwayFromZero)
                let clamped = value.clamped(lowerBound: .zero, upperBound: SIMD4(repeating: 255))
                let p = start + i * step
                pixels[p] = UInt8(clamped[0])
                pixels[p + 1] = UInt8(clamped[1])
                pixels[p + 2] = UInt8(clamped[2])
                pixels[p + 3] = UInt8(clamped[3])
            }
        }
    }
}
