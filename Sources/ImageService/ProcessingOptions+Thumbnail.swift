import RasterImage

extension ProcessingOptions {
    /// Why options cannot be made for a source: a result larger than the service allows.
    public struct ResultTooLarge: Error, Sendable, Hashable, CustomStringConvertible {
        /// The box asked for, in pixels (dpr applied).
        public let width: Int
        /// The box's height.
        public let height: Int
        /// The longest side allowed.
        public let limit: Int

        /// What went wrong, in one line.
        public var description: String { "a \(width)x\(height) result is larger than \(limit) px on a side" }
    }

    /// The thumbnail these options make of a source whose upright size is
    /// `sourceWidth` x `sourceHeight`, with imgproxy's meanings (where its documentation
    /// is silent, what its code does: `processing/prepare.go`, `calcScale` and `calcSizes`):
    /// - `fit` keeps the aspect ratio inside the box, `fill` covers the box and crops by
    ///   the gravity, `force` scales each side to the box on its own, `fill-down` is `fill`
    ///   whose crop keeps the box's aspect ratio when the source is too small to cover it,
    ///   `auto` is `fill` when the source and the box are both landscape (or square) or
    ///   both portrait, `fit` otherwise;
    /// - a side of 0 follows the other side's scale, for every type but `force`, where it
    ///   keeps the source's side (imgproxy's documented exception); both 0 keep the
    ///   source's size;
    /// - without `enlarge`, nothing is scaled up: when the box asks for more, the scales
    ///   are divided by the smallest one, so `force` keeps its proportions of distortion;
    /// - `dpr` multiplies the box, as far as `enlarge` allows.
    ///
    /// Throws ``ResultTooLarge`` when a side of the box asked for (dpr applied) passes
    /// `maxResultSide`: the caller named that size, and gets it or an error. A result
    /// whose size is implied (a side of 0 on a source larger than the limit) is scaled
    /// down to the limit, as imgproxy's `max_result_dimension` does.
    ///
    /// ```swift
    /// let thumbnail = try request.options.thumbnailOptions(sourceWidth: 4000, sourceHeight: 3000, maxResultSide: 8192)
    /// ```
    public func thumbnailOptions(sourceWidth: Int, sourceHeight: Int, maxResultSide: Int) throws(ResultTooLarge)
        -> ThumbnailOptions
    {
        let limit = max(1, min(maxResultSide, ThumbnailOptions.maxSide))
        let boxWidth = (Double(width) * dpr).rounded()
        let boxHeight = (Double(height) * dpr).rounded()
        guard boxWidth <= Double(limit), boxHeight <= Double(limit) else {
            throw ResultTooLarge(width: Int(min(boxWidth, 1e9)), height: Int(min(boxHeight, 1e9)), limit: limit)
        }
        let source = (width: max(1, sourceWidth), height: max(1, sourceHeight))
        var sizes = ResultSizes(options: self, source: source)
        // An implied size past the limit: everything scaled down to it.
        let (outWidth, outHeight) = sizes.output
        if outWidth > limit || outHeight > limit {
            sizes.scaleDown(by: Double(limit) / Double(max(outWidth, outHeight)), options: self, source: source)
        }
        let (resultWidth, resultHeight) = sizes.output
        guard resultWidth <= limit, resultHeight <= limit else {
            throw ResultTooLarge(width: resultWidth, height: resultHeight, limit: limit)
        }
        var options: ThumbnailOptions
        if (resultWidth, resultHeight) == (sizes.scaledWidth, sizes.scaledHeight) {
            // Nothing cropped: the scaled size itself, each side exact.
            options = ThumbnailOptions(width: resultWidth, height: resultHeight, fit: .force)
        } else {
            // A uniform scale (only those crop) covering the result, cropped by the gravity.
            options = ThumbnailOptions(width: resultWidth, height: resultHeight, fit: .fill)
        }
        // The scales above already decided what may grow.
        options.allowsUpscaling = true
        options.gravity =
            switch gravity {
            case .center, .smart: .center
            case .north: .north
            case .south: .south
            case .east: .east
            case .west: .west
            case .northEast: .northEast
            case .northWest: .northWest
            case .southEast: .southEast
            case .southWest: .southWest
            }
        return options
    }
}

/// The sizes imgproxy works out for a source and the options: the scaled image, and the
/// crop of it the result keeps (0 on a side: no crop there).
private struct ResultSizes {
    var widthScale: Double
    var heightScale: Double
    var dprScale: Double
    var scaledWidth = 0
    var scaledHeight = 0
    var cropWidth = 0
    var cropHeight = 0

    init(options: ProcessingOptions, source: (width: Int, height: Int)) {
        let (sourceWidth, sourceHeight) = (Double(source.width), Double(source.height))
        let targetWidth = options.width == 0 ? sourceWidth : Double(options.width)
        let targetHeight = options.height == 0 ? sourceHeight : Double(options.height)
        var widthShrink = targetWidth == sourceWidth ? 1 : sourceWidth / targetWidth
        var heightShrink = targetHeight == sourceHeight ? 1 : sourceHeight / targetHeight
        if widthShrink != 1 || heightShrink != 1 {
            var type = options.resizingType
            if type == .auto {
                let sourceLandscape = sourceWidth - sourceHeight >= 0
                let boxLandscape = targetWidth - targetHeight >= 0
                type = sourceLandscape == boxLandscape ? .fill : .fit
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
        var dprScale = options.dpr
        if !options.enlarge {
            let smallest = min(widthShrink, heightShrink)
            if smallest < 1 {
                widthShrink /= smallest
                heightShrink /= smallest
                dprScale /= smallest
            }
            dprScale = min(dprScale, min(widthShrink, heightShrink))
        }
        widthShrink = min(widthShrink / dprScale, sourceWidth)
        heightShrink = min(heightShrink / dprScale, sourceHeight)
        (widthScale, heightScale, self.dprScale) = (1 / widthShrink, 1 / heightShrink, dprScale)
        computeSizes(options: options, source: source)
    }

    /// imgproxy's `calcSizes`: the scaled size, and the crop (`fill-down` keeping the
    /// box's aspect ratio when the scaled image is smaller than the box).
    mutating func computeSizes(options: ProcessingOptions, source: (width: Int, height: Int)) {
        let targetWidth = Self.scale(options.width, dprScale)
        let targetHeight = Self.scale(options.height, dprScale)
        scaledWidth = max(1, Self.scale(source.width, widthScale))
        scaledHeight = max(1, Self.scale(source.height, heightScale))
        (cropWidth, cropHeight) = (targetWidth, targetHeight)
        guard options.resizingType == .fillDown, !options.enlarge else { return }
        let widthRatio = Double(targetWidth) / Double(scaledWidth)
        let heightRatio = Double(targetHeight) / Double(scaledHeight)
        if widthRatio > heightRatio && widthRatio > 1 {
            (cropWidth, cropHeight) = (scaledWidth, Self.scale(scaledWidth, Double(targetHeight) / Double(targetWidth)))
        } else if heightRatio > widthRatio && heightRatio > 1 {
            (cropWidth, cropHeight) = (
                Self.scale(scaledHeight, Double(targetWidth) / Double(targetHeight)), scaledHeight
            )
        }
    }

    /// The result's size: the crop where there is one (never larger than the scaled image).
    var output: (Int, Int) {
        func side(_ crop: Int, _ scaled: Int) -> Int { crop == 0 ? scaled : min(crop, scaled) }
        if cropWidth == 0 && cropHeight == 0 { return (scaledWidth, scaledHeight) }
        return (side(cropWidth, scaledWidth), side(cropHeight, scaledHeight))
    }

    /// imgproxy's `limitScale`: every scale multiplied by `factor`, never below a pixel.
    mutating func scaleDown(by factor: Double, options: ProcessingOptions, source: (width: Int, height: Int)) {
        widthScale = max(widthScale * factor, 1 / Double(source.width))
        heightScale = max(heightScale * factor, 1 / Double(source.height))
        dprScale *= factor
        computeSizes(options: options, source: source)
    }

    /// `value` x `scale`, rounded half away from zero (Go's `math.Round`); 0 stays 0.
    static func scale(_ value: Int, _ scale: Double) -> Int {
        guard value != 0 else { return 0 }
        return Int(exactly: (Double(value) * scale).rounded(.toNearestOrAwayFromZero)) ?? Int.max / 2
    }
}
