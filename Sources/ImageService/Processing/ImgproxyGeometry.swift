import ImageLoaderSupport
import RasterImage

/// The sizes imgproxy works out for a source and the options (its `CalcParams`:
/// `calcScale`, `calcSizes` and `limitScale` in `processing/prepare.go`, version 4),
/// every size in the result's orientation (after `auto_rotate` and `rotate`).
struct ImgproxyGeometry: Sendable, Hashable {
    /// The source's size, trimmed when it was, turned as the result is.
    let sourceWidth: Int
    let sourceHeight: Int
    /// The `crop` option's part of the source (0 on a side: the whole side).
    private(set) var cropWidth = 0
    private(set) var cropHeight = 0
    /// Scales from the (cropped) source to the scaled image.
    private(set) var widthScale = 1.0
    private(set) var heightScale = 1.0
    /// What pixel sizes of the URL (padding, offsets) are multiplied by.
    private(set) var dprScale = 1.0
    /// The box, dpr and zoom applied (0 on a side: none).
    private(set) var targetWidth = 0
    private(set) var targetHeight = 0
    /// The whole (cropped) source scaled.
    private(set) var scaledWidth = 0
    private(set) var scaledHeight = 0
    /// The result's crop of the scaled image (0 on a side: none).
    private(set) var resultCropWidth = 0
    private(set) var resultCropHeight = 0
    /// `extend_aspect_ratio`'s canvas (0: none).
    private(set) var aspectWidth = 0
    private(set) var aspectHeight = 0

    /// The plan for a source of `sourceWidth` x `sourceHeight` (already turned as the
    /// result will be), with no side of the result, padding and extension included,
    /// above `maxResultSide`.
    init(options: ProcessingOptions, sourceWidth: Int, sourceHeight: Int, maxResultSide: Int) {
        self.sourceWidth = max(1, sourceWidth)
        self.sourceHeight = max(1, sourceHeight)
        if let crop = options.crop {
            cropWidth = Self.cropSide(self.sourceWidth, crop.width)
            cropHeight = Self.cropSide(self.sourceHeight, crop.height)
        }
        let toScale = (
            width: minNonZero(cropWidth, self.sourceWidth), height: minNonZero(cropHeight, self.sourceHeight)
        )
        calculateScale(options, toScale)
        calculateSizes(options, toScale)
        limitScale(options, toScale, maxResultSide: max(1, maxResultSide))
    }

    /// The size of the image the steps before padding produce: the result's crop of the
    /// scaled image, extended to the box or its aspect ratio when asked.
    func outputSize(_ options: ProcessingOptions) -> (width: Int, height: Int) {
        var width = minNonZero(scaledWidth, resultCropWidth)
        var height = minNonZero(scaledHeight, resultCropHeight)
        if options.extend.enabled {
            (width, height) = (max(width, targetWidth), max(height, targetHeight))
        } else if options.extendAspectRatio.enabled {
            (width, height) = (max(width, aspectWidth), max(height, aspectHeight))
        }
        return (width, height)
    }

    /// The padding in result pixels: each side scaled by dpr, rounded half to even.
    func padding(_ options: ProcessingOptions) -> ProcessingOptions.Padding {
        var padding = ProcessingOptions.Padding()
        padding.top = Self.scaleToEven(options.padding.top, dprScale)
        padding.right = Self.scaleToEven(options.padding.right, dprScale)
        padding.bottom = Self.scaleToEven(options.padding.bottom, dprScale)
        padding.left = Self.scaleToEven(options.padding.left, dprScale)
        return padding
    }

    private mutating func calculateScale(_ options: ProcessingOptions, _ source: (width: Int, height: Int)) {
        let (sourceWidth, sourceHeight) = (Double(source.width), Double(source.height))
        let boxWidth = options.width == 0 ? sourceWidth : Double(options.width)
        let boxHeight = options.height == 0 ? sourceHeight : Double(options.height)
        var widthShrink = boxWidth == sourceWidth ? 1 : sourceWidth / boxWidth
        var heightShrink = boxHeight == sourceHeight ? 1 : sourceHeight / boxHeight
        if widthShrink != 1 || heightShrink != 1 {
            var type = options.resizingType
            if type == .auto {
                type = (sourceWidth - sourceHeight >= 0) == (boxWidth - boxHeight >= 0) ? .fill : .fit
            }
            if options.width == 0 && type != .force {
                widthShrink = heightShrink
            } else if options.height == 0 && type != .force {
                heightShrink = widthShrink
            } else if type == .fit {
                widthShrink = max(widthShrink, heightShrink)
                heightShrink = widthShrink
            } else if type == .fill || type == .fillDown {
                widthShrink = min(widthShrink, heightShrink)
                heightShrink = widthShrink
            }
        }
        widthShrink /= options.zoomWidth
        heightShrink /= options.zoomHeight
        dprScale = options.dpr
        if !options.enlarge {
            let smallest = min(widthShrink, heightShrink)
            if smallest < 1 {
                widthShrink /= smallest
                heightShrink /= smallest
                // Extended results keep their composition whatever the dpr.
                if !options.extend.enabled { dprScale /= smallest }
            }
            dprScale = min(dprScale, min(widthShrink, heightShrink))
        }
        if options.minWidth > 0 {
            let least = sourceWidth / Double(options.minWidth)
            if least < widthShrink {
                heightShrink /= widthShrink / least
                widthShrink = least
            }
        }
        if options.minHeight > 0 {
            let least = sourceHeight / Double(options.minHeight)
            if least < heightShrink {
                widthShrink /= heightShrink / least
                heightShrink = least
            }
        }
        widthShrink = min(widthShrink / dprScale, sourceWidth)
        heightShrink = min(heightShrink / dprScale, sourceHeight)
        (widthScale, heightScale) = (1 / widthShrink, 1 / heightShrink)
    }

    private mutating func calculateSizes(_ options: ProcessingOptions, _ source: (width: Int, height: Int)) {
        targetWidth = Self.scale(options.width, dprScale * options.zoomWidth)
        targetHeight = Self.scale(options.height, dprScale * options.zoomHeight)
        scaledWidth = max(1, Self.scale(source.width, widthScale))
        scaledHeight = max(1, Self.scale(source.height, heightScale))
        (resultCropWidth, resultCropHeight) = (targetWidth, targetHeight)
        if options.resizingType == .fillDown && !options.enlarge {
            let widthRatio = Double(targetWidth) / Double(scaledWidth)
            let heightRatio = Double(targetHeight) / Double(scaledHeight)
            if widthRatio > heightRatio && widthRatio > 1 {
                resultCropHeight = Self.scale(scaledWidth, Double(targetHeight) / Double(targetWidth))
                resultCropWidth = scaledWidth
            } else if heightRatio > widthRatio && heightRatio > 1 {
                resultCropWidth = Self.scale(scaledHeight, Double(targetWidth) / Double(targetHeight))
                resultCropHeight = scaledHeight
            }
        }
        (aspectWidth, aspectHeight) = (0, 0)
        if options.extendAspectRatio.enabled && targetWidth > 0 && targetHeight > 0 {
            let outWidth = minNonZero(scaledWidth, resultCropWidth)
            let outHeight = minNonZero(scaledHeight, resultCropHeight)
            let widthRatio = Double(targetWidth) / Double(outWidth)
            let heightRatio = Double(targetHeight) / Double(outHeight)
            if heightRatio > widthRatio {
                aspectHeight = Self.scale(outWidth, Double(targetHeight) / Double(targetWidth))
                aspectWidth = outWidth
            } else if widthRatio > heightRatio {
                aspectWidth = Self.scale(outHeight, Double(targetWidth) / Double(targetHeight))
                aspectHeight = outHeight
            }
        }
    }

    /// imgproxy's `limitScale`: a result (padding included) past the limit is scaled down
    /// to it. Rounding can leave a pixel over; a second pass (at most two more) takes it off.
    private mutating func limitScale(
        _ options: ProcessingOptions, _ source: (width: Int, height: Int), maxResultSide: Int
    ) {
        for _ in 0..<3 {
            var (outWidth, outHeight) = outputSize(options)
            let padding = padding(options)
            outWidth = Checked.saturatingAdd(outWidth, padding.left + padding.right)
            outHeight = Checked.saturatingAdd(outHeight, padding.top + padding.bottom)
            guard outWidth > maxResultSide || outHeight > maxResultSide else { return }
            let factor = Double(maxResultSide) / Double(max(outWidth, outHeight))
            widthScale = max(widthScale * factor, 1 / Double(source.width))
            heightScale = max(heightScale * factor, 1 / Double(source.height))
            dprScale *= factor
            calculateSizes(options, source)
        }
    }

    /// imgproxy's `CalcCropSize`: 0 for none, pixels from 1, a fraction of the side below.
    static func cropSide(_ side: Int, _ crop: Double) -> Int {
        if crop == 0 { return 0 }
        if crop >= 1 { return Int(min(crop, Double(ProcessingOptions.maxSide))) }
        return max(1, scale(side, crop))
    }

    /// `value` x `scale`, rounded half away from zero (Go's `math.Round`); 0 stays 0.
    static func scale(_ value: Int, _ scale: Double) -> Int {
        guard value != 0 else { return 0 }
        return Int(exactly: (Double(value) * scale).rounded(.toNearestOrAwayFromZero)) ?? Int.max / 2
    }

    /// `value` x `scale`, rounded half to even (Go's `math.RoundToEven`); 0 stays 0.
    static func scaleToEven(_ value: Int, _ scale: Double) -> Int {
        guard value != 0 else { return 0 }
        return Int(exactly: (Double(value) * scale).rounded(.toNearestOrEven)) ?? Int.max / 2
    }

    /// imgproxy's `calcPosition`: the top-left corner of an `innerWidth` x `innerHeight`
    /// window in a `width` x `height` image for `gravity`, pixel offsets times `dpr`,
    /// kept inside the image, or with `allowsOverflow` anywhere that leaves a pixel of the
    /// window on it. (Smart gravity is placed by the caller.)
    static func position(
        width: Int, height: Int, innerWidth: Int, innerHeight: Int, gravity: ProcessingOptions.Gravity, dpr: Double,
        allowsOverflow: Bool = false
    ) -> (x: Int, y: Int) {
        var left: Int
        var top: Int
        if gravity.type == .focusPoint {
            left = scaleToEven(width, gravity.x) - innerWidth / 2
            top = scaleToEven(height, gravity.y) - innerHeight / 2
        } else {
            let offsetX = offset(gravity.x, of: width, dpr: dpr)
            let offsetY = offset(gravity.y, of: height, dpr: dpr)
            left = halfToEven(width - innerWidth + 1) + offsetX
            top = halfToEven(height - innerHeight + 1) + offsetY
            switch gravity.type {
            case .north, .northEast, .northWest: top = offsetY
            case .south, .southEast, .southWest: top = height - innerHeight - offsetY
            default: break
            }
            switch gravity.type {
            case .east, .northEast, .southEast: left = width - innerWidth - offsetX
            case .west, .northWest, .southWest: left = offsetX
            default: break
            }
        }
        if allowsOverflow {
            left = max(1 - innerWidth, min(left, width - 1))
            top = max(1 - innerHeight, min(top, height - 1))
        } else {
            left = max(0, min(left, width - innerWidth))
            top = max(0, min(top, height - innerHeight))
        }
        return (left, top)
    }

    /// An offset in pixels: `value` times `dpr` from 1 (or -1) on, else a fraction of `side`
    /// (imgproxy's rule for gravity offsets and watermark gaps).
    static func offset(_ value: Double, of side: Int, dpr: Double) -> Int {
        abs(value) >= 1 ? Int(exactly: (value * dpr).rounded(.toNearestOrEven)) ?? 0 : scaleToEven(side, value)
    }

    /// `value` / 2 rounded half to even (imgproxy's `ShrinkToEven(value, 2)`).
    private static func halfToEven(_ value: Int) -> Int {
        Int((Double(value) / 2).rounded(.toNearestOrEven))
    }
}

private func minNonZero(_ a: Int, _ b: Int) -> Int {
    if a == 0 { return b }
    if b == 0 { return a }
    return min(a, b)
}
