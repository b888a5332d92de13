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
    /// `sourceWidth` x `sourceHeight`, with imgproxy's meanings:
    /// - the box is `width` x `height` times `dpr`; a side of 0 follows the other side's
    ///   scale (and then `fill` behaves as `fit`); both 0 keep the source's size;
    /// - `fit` fits the box, `fill` covers it and crops by the gravity, `force` stretches
    ///   to it, `fill-down` is `fill` with the box shrunk (same aspect) when the source is
    ///   smaller, `auto` is `fill` when the source and the box are both landscape or both
    ///   portrait, `fit` otherwise;
    /// - nothing is enlarged unless `enlarge`.
    ///
    /// Throws ``ResultTooLarge`` when a side of the box passes `maxResultSide`.
    ///
    /// ```swift
    /// let thumbnail = try request.options.thumbnailOptions(sourceWidth: 4000, sourceHeight: 3000, maxResultSide: 8192)
    /// ```
    public func thumbnailOptions(sourceWidth: Int, sourceHeight: Int, maxResultSide: Int) throws(ResultTooLarge)
        -> ThumbnailOptions
    {
        let limit = min(maxResultSide, ThumbnailOptions.maxSide)
        let boxWidth = (Double(width) * dpr).rounded()
        let boxHeight = (Double(height) * dpr).rounded()
        guard boxWidth <= Double(limit), boxHeight <= Double(limit) else {
            throw ResultTooLarge(width: Int(min(boxWidth, 1e9)), height: Int(min(boxHeight, 1e9)), limit: limit)
        }
        var (w, h) = (Int(boxWidth), Int(boxHeight))
        var fit: ThumbnailOptions.Fit
        switch resizingType {
        case .fit: fit = .fit
        case .fill, .fillDown: fit = .fill
        case .force: fit = .force
        case .auto:
            let sourceLandscape = sourceWidth >= sourceHeight
            let boxLandscape = w >= h
            fit = w == 0 || h == 0 || sourceLandscape == boxLandscape ? .fill : .fit
        }
        if w == 0 || h == 0 {
            // A side of 0 follows the other's scale: fit a box unbounded on that side
            // (both 0: the source's own size, within the limit).
            if w == 0 { w = limit }
            if h == 0 { h = limit }
            fit = .fit
        }
        if resizingType == .fillDown, !enlarge, sourceWidth < w || sourceHeight < h {
            let shrink = min(Double(sourceWidth) / Double(w), Double(sourceHeight) / Double(h))
            w = max(1, Int((Double(w) * shrink).rounded()))
            h = max(1, Int((Double(h) * shrink).rounded()))
        }
        var options = ThumbnailOptions(width: w, height: h, fit: fit)
        options.allowsUpscaling = enlarge
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
