import Foundation

extension RasterImage {
    /// The BlurHash of this image (Wolt's algorithm, as its reference C encoder computes
    /// it): `xComponents` x `yComponents` cosine components (1 to 9 each) of the colour
    /// in linear light, as 6 + 2 x (components - 1) characters of base 83. Transparent
    /// pixels count as they are composited over white. Look at a small thumbnail (32 to
    /// 100 pixels a side): the hash has no more detail, and the cost grows with the pixels.
    ///
    /// ```swift
    /// let hash = try ImageDecoder().thumbnail(.file(path: "cat.jpg"), options: ThumbnailOptions(maxPixelSize: 64))
    ///     .blurHash()          // "LEHV6nWB2yk8pyo0adR*.7kCMdnj"
    /// ```
    public func blurHash(xComponents: Int = 4, yComponents: Int = 3) -> String {
        let (cx, cy) = (max(1, min(9, xComponents)), max(1, min(9, yComponents)))
        let image = flattened(onto: .white)
        let (w, h, stride) = (image.width, image.height, image.bytesPerRow)
        // Linear values of each channel, once.
        var linear = [Double](repeating: 0, count: w * h * 3)
        image.frames[0].pixels.withUnsafeBufferPointer { pixels in
            for y in 0..<h {
                for x in 0..<w {
                    for c in 0..<3 { linear[(y * w + x) * 3 + c] = BlurHash.linear(pixels[y * stride + x * 4 + c]) }
                }
            }
        }
        var factors: [(Double, Double, Double)] = []
        for j in 0..<cy {
            for i in 0..<cx {
                let normalisation = i == 0 && j == 0 ? 1.0 : 2.0
                var (r, g, b) = (0.0, 0.0, 0.0)
                for y in 0..<h {
                    let basisY = cos(Double.pi * Double(j) * Double(y) / Double(h))
                    for x in 0..<w {
                        let basis = cos(Double.pi * Double(i) * Double(x) / Double(w)) * basisY
                        let p = (y * w + x) * 3
                        r += basis * linear[p]
                        g += basis * linear[p + 1]
                        b += basis * linear[p + 2]
                    }
                }
                let scale = normalisation / Double(w * h)
                factors.append((r * scale, g * scale, b * scale))
            }
        }
        var hash = BlurHash.base83((cx - 1) + (cy - 1) * 9, length: 1)
        let ac = factors.dropFirst()
        var maximum = 1.0
        if ac.isEmpty {
            hash += BlurHash.base83(0, length: 1)
        } else {
            let actual = ac.map { max(abs($0.0), abs($0.1), abs($0.2)) }.max() ?? 0
            let quantised = Int(max(0, min(82, (actual * 166 - 0.5).rounded(.down))))
            maximum = Double(quantised + 1) / 166
            hash += BlurHash.base83(quantised, length: 1)
        }
        let dc = factors[0]
        hash += BlurHash.base83(
            (BlurHash.srgb(dc.0) << 16) + (BlurHash.srgb(dc.1) << 8) + BlurHash.srgb(dc.2), length: 4)
        for factor in ac {
            func quantise(_ value: Double) -> Int {
                Int(max(0, min(18, (BlurHash.signedPower(value / maximum, 0.5) * 9 + 9.5).rounded(.down))))
            }
            hash += BlurHash.base83(quantise(factor.0) * 361 + quantise(factor.1) * 19 + quantise(factor.2), length: 2)
        }
        return hash
    }

    /// The ThumbHash of this image (Evan Wallace's algorithm, as its reference encoder
    /// computes it): a placeholder of about 25 bytes that keeps the aspect ratio and the
    /// alpha. An image larger than 100 pixels a side is first reduced to fit (the
    /// algorithm's limit); give it a thumbnail of about that size.
    ///
    /// ```swift
    /// let placeholder = thumbnail.thumbHash()      // 25 bytes; base64 them for a page
    /// ```
    public func thumbHash() -> [UInt8] {
        var image = straightAlpha()
        if width > 100 || height > 100 {
            let scale = 100 / Double(max(width, height))
            image = image.resized(
                width: max(1, Int((Double(width) * scale).rounded())),
                height: max(1, Int((Double(height) * scale).rounded()))
            ).straightAlpha()
        }
        return ThumbHash.encode(image)
    }

    /// Up to `count` colours that cover most of the image, the most common first: the
    /// means of the boxes of a median cut (the box whose widest channel range times its
    /// pixels is largest is split at that channel's mean, until there are `count` boxes
    /// or none can be split), over the first frame's pixels that are at least half
    /// opaque. Deterministic. Give it a thumbnail.
    ///
    /// ```swift
    /// let colors = thumbnail.dominantColors(count: 3).map(\.description)   // ["2b4a7c", "e8d5b0", ...]
    /// ```
    public func dominantColors(count: Int = 5) -> [PixelColor] {
        let image = straightAlpha()
        var samples: [(UInt8, UInt8, UInt8)] = []
        image.frames[0].pixels.withUnsafeBufferPointer { pixels in
            for y in 0..<image.height {
                for x in 0..<image.width {
                    let p = y * image.bytesPerRow + x * 4
                    if pixels[p + 3] >= 128 { samples.append((pixels[p], pixels[p + 1], pixels[p + 2])) }
                }
            }
        }
        guard !samples.isEmpty, count > 0 else { return [] }
        var boxes: [ArraySlice<(UInt8, UInt8, UInt8)>] = [samples[...]]
        func range(_ box: ArraySlice<(UInt8, UInt8, UInt8)>) -> (Int, Int) {
            var low = [255, 255, 255]
            var high = [0, 0, 0]
            for s in box {
                for (c, v) in [Int(s.0), Int(s.1), Int(s.2)].enumerated() {
                    low[c] = min(low[c], v)
                    high[c] = max(high[c], v)
                }
            }
            let spans = (0..<3).map { high[$0] - low[$0] }
            let channel = spans.firstIndex(of: spans.max()!)!
            return (spans[channel], channel)
        }
        while boxes.count < count {
            // The box whose widest channel range, weighted by its pixels, is largest.
            let scored = boxes.enumerated().map { index, box in (index, range(box), box.count) }
            guard
                let pick = scored.filter({ $0.1.0 > 0 && $0.2 > 1 }).max(by: {
                    ($0.1.0 * $0.2, -$0.0) < ($1.1.0 * $1.2, -$1.0)
                })
            else { break }
            // Split at the mean of the widest channel: equal colours stay together, and
            // both sides hold pixels since the range is not empty.
            let channel = pick.1.1
            func value(_ s: (UInt8, UInt8, UInt8)) -> Int { Int(channel == 0 ? s.0 : channel == 1 ? s.1 : s.2) }
            let box = boxes[pick.0]
            let mean = Double(box.reduce(0) { $0 + value($1) }) / Double(box.count)
            boxes[pick.0] = ArraySlice(box.filter { Double(value($0)) < mean })
            boxes.append(ArraySlice(box.filter { Double(value($0)) >= mean }))
        }
        return boxes.sorted { $0.count > $1.count }.map { box in
            var sums = (0, 0, 0)
            for s in box { sums = (sums.0 + Int(s.0), sums.1 + Int(s.1), sums.2 + Int(s.2)) }
            let n = box.count
            return PixelColor(
                red: UInt8((sums.0 + n / 2) / n), green: UInt8((sums.1 + n / 2) / n), blue: UInt8((sums.2 + n / 2) / n))
        }
    }
}

/// BlurHash's colour conversions and base 83.
enum BlurHash {
    static let characters = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz#$%*+,-.:;=?@[]^_{|}~")

    static func base83(_ value: Int, length: Int) -> String {
        var text = ""
        var divisor = 1
        for _ in 1..<max(1, length) { divisor *= 83 }
        for _ in 0..<length {
            text.append(characters[(value / divisor) % 83])
            divisor = max(1, divisor / 83)
        }
        return text
    }

    static func linear(_ value: UInt8) -> Double {
        let v = Double(value) / 255
        return v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4)
    }

    static func srgb(_ value: Double) -> Int {
        let v = max(0, min(1, value))
        return v <= 0.0031308 ? Int(v * 12.92 * 255 + 0.5) : Int((1.055 * pow(v, 1 / 2.4) - 0.055) * 255 + 0.5)
    }

    static func signedPower(_ value: Double, _ exponent: Double) -> Double {
        value < 0 ? -pow(-value, exponent) : pow(value, exponent)
    }
}

/// ThumbHash's encoder.
enum ThumbHash {
    static func encode(_ image: RasterImage) -> [UInt8] {
        let (w, h, stride) = (image.width, image.height, image.bytesPerRow)
        let pixels = image.frames[0].pixels
        var (avgR, avgG, avgB, avgA) = (0.0, 0.0, 0.0, 0.0)
        for y in 0..<h {
            for x in 0..<w {
                let p = y * stride + x * 4
                let alpha = Double(pixels[p + 3]) / 255
                avgR += alpha / 255 * Double(pixels[p])
                avgG += alpha / 255 * Double(pixels[p + 1])
                avgB += alpha / 255 * Double(pixels[p + 2])
                avgA += alpha
            }
        }
        if avgA > 0 {
            avgR /= avgA
            avgG /= avgA
            avgB /= avgA
        }
        let hasAlpha = avgA < Double(w * h)
        let lLimit = hasAlpha ? 5.0 : 7.0
        let lx = max(1, Int(round(lLimit * Double(w) / Double(max(w, h)))))
        let ly = max(1, Int(round(lLimit * Double(h) / Double(max(w, h)))))
        var l = [Double](repeating: 0, count: w * h)
        var p = l
        var q = l
        var a = l
        for y in 0..<h {
            for x in 0..<w {
                let o = y * stride + x * 4
                let i = y * w + x
                let alpha = Double(pixels[o + 3]) / 255
                let r = avgR * (1 - alpha) + alpha / 255 * Double(pixels[o])
                let g = avgG * (1 - alpha) + alpha / 255 * Double(pixels[o + 1])
                let b = avgB * (1 - alpha) + alpha / 255 * Double(pixels[o + 2])
                l[i] = (r + g + b) / 3
                p[i] = (r + g) / 2 - b
                q[i] = r - g
                a[i] = alpha
            }
        }
        func channel(_ values: [Double], _ nx: Int, _ ny: Int) -> (dc: Double, ac: [Double], scale: Double) {
            var (dc, ac, scale) = (0.0, [Double](), 0.0)
            var fx = [Double](repeating: 0, count: w)
            for cy in 0..<ny {
                var cx = 0
                while cx * ny < nx * (ny - cy) {
                    var f = 0.0
                    for x in 0..<w { fx[x] = cos(Double.pi / Double(w) * Double(cx) * (Double(x) + 0.5)) }
                    for y in 0..<h {
                        let fy = cos(Double.pi / Double(h) * Double(cy) * (Double(y) + 0.5))
                        for x in 0..<w { f += values[x + y * w] * fx[x] * fy }
                    }
                    f /= Double(w * h)
                    if cx > 0 || cy > 0 {
                        ac.append(f)
                        scale = max(scale, abs(f))
                    } else {
                        dc = f
                    }
                    cx += 1
                }
            }
            if scale > 0 { ac = ac.map { 0.5 + 0.5 / scale * $0 } }
            return (dc, ac, scale)
        }
        // JavaScript's Math.round: halves go up (every value rounded here is positive).
        func round(_ value: Double) -> Double { (value + 0.5).rounded(.down) }
        let (lDC, lAC, lScale) = channel(l, max(3, lx), max(3, ly))
        let (pDC, pAC, pScale) = channel(p, 3, 3)
        let (qDC, qAC, qScale) = channel(q, 3, 3)
        let alpha: (dc: Double, ac: [Double], scale: Double) = hasAlpha ? channel(a, 5, 5) : (0, [], 0)
        let isLandscape = w > h
        let header24 =
            Int(round(63 * lDC)) | Int(round(31.5 + 31.5 * pDC)) << 6 | Int(round(31.5 + 31.5 * qDC)) << 12
            | Int(round(31 * lScale)) << 18 | (hasAlpha ? 1 : 0) << 23
        let header16 =
            (isLandscape ? ly : lx) | Int(round(63 * pScale)) << 3 | Int(round(63 * qScale)) << 9
            | (isLandscape ? 1 : 0) << 15
        var hash: [UInt8] = [
            UInt8(header24 & 255), UInt8((header24 >> 8) & 255), UInt8((header24 >> 16) & 255),
            UInt8(header16 & 255), UInt8((header16 >> 8) & 255),
        ]
        if hasAlpha { hash.append(UInt8(Int(round(15 * alpha.dc)) | Int(round(15 * alpha.scale)) << 4)) }
        let start = hash.count
        var index = 0
        for ac in hasAlpha ? [lAC, pAC, qAC, alpha.ac] : [lAC, pAC, qAC] {
            for f in ac {
                let slot = start + (index >> 1)
                if slot >= hash.count { hash.append(0) }
                hash[slot] |= UInt8(Int(round(15 * f)) << ((index & 1) << 2))
                index += 1
            }
        }
        return hash
    }
}
