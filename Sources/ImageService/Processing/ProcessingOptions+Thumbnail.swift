import RasterImage

extension ProcessingOptions {
    /// The thumbnail these options make of a source whose upright size is
    /// `sourceWidth` x `sourceHeight`, when they ask for a resize with at most a plain
    /// compass crop (the common case, made in one pass: the decoder shrinks while
    /// loading and the resampler computes only the kept part). Sizes are imgproxy's
    /// (`processing/prepare.go`):
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
    /// - `dpr` multiplies the box, as far as `enlarge` allows;
    /// - a result with a side past `maxResultSide` is scaled down until it fits, as
    ///   imgproxy's `max_result_dimension` does.
    ///
    /// ```swift
    /// let thumbnail = request.options.thumbnailOptions(sourceWidth: 4000, sourceHeight: 3000, maxResultSide: 8192)
    /// ```
    func thumbnailOptions(sourceWidth: Int, sourceHeight: Int, maxResultSide: Int) -> ThumbnailOptions {
        let limit = max(1, min(maxResultSide, ThumbnailOptions.maxSide))
        let plan = ImgproxyGeometry(
            options: self, sourceWidth: sourceWidth, sourceHeight: sourceHeight, maxResultSide: limit)
        let (resultWidth, resultHeight) = plan.outputSize(self)
        var options: ThumbnailOptions
        if (resultWidth, resultHeight) == (plan.scaledWidth, plan.scaledHeight) {
            // Nothing cropped: the scaled size itself, each side exact.
            options = ThumbnailOptions(width: resultWidth, height: resultHeight, fit: .force)
        } else {
            // A uniform scale (only those crop) covering the result, cropped by the gravity.
            options = ThumbnailOptions(width: resultWidth, height: resultHeight, fit: .fill)
        }
        // The scales above already decided what may grow.
        options.allowsUpscaling = true
        options.gravity = gravity.type.thumbnailGravity
        options.keepsColorProfile = !stripColorProfile
        options.usesEmbeddedThumbnail = enforceThumbnail
        return options
    }
}

extension ProcessingOptions.GravityType {
    /// The compass point a one-pass thumbnail crops by (smart and focus-point crops take
    /// the general path; the centre stands in for them here).
    var thumbnailGravity: ThumbnailOptions.Gravity {
        switch self {
        case .center, .smart, .focusPoint: .center
        case .north: .north
        case .south: .south
        case .east: .east
        case .west: .west
        case .northEast: .northEast
        case .northWest: .northWest
        case .southEast: .southEast
        case .southWest: .southWest
        }
    }
}
