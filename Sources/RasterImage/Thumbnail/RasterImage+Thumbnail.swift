import ImageLoaderSupport

extension RasterImage {
    /// A thumbnail of this already decoded image: resampled into the box, cropped for
    /// `.fill`, converted to sRGB, turned upright, with straight alpha.
    ///
    /// Decoding with ``ImageDecoder/thumbnail(_:options:)`` is faster and leaner: it
    /// shrinks while loading and never holds the full-size image.
    ///
    /// ```swift
    /// let small = try image.thumbnail(options: ThumbnailOptions(maxPixelSize: 256))
    /// ```
    ///
    /// Throws ``ImageDecodingError/Reason/invalidThumbnailSize(width:height:)`` for a box
    /// outside `1...ThumbnailOptions.maxSide`, or a result of more pixels than
    /// `limits.maxPixelsPerFrame`.
    public func thumbnail(limits: DecodingLimits = DecodingLimits(), options: ThumbnailOptions)
        throws(ImageDecodingError) -> RasterImage
    {
        try thumbnail(options: options, limits: limits, sourceWidth: width, sourceHeight: height)
    }

    /// A thumbnail whose box is fitted to a `sourceWidth` x `sourceHeight` original
    /// this image is a reduction of (shrunk while loading).
    func thumbnail(options: ThumbnailOptions, limits: DecodingLimits, sourceWidth: Int, sourceHeight: Int)
        throws(ImageDecodingError) -> RasterImage
    {
        let geometry = try ThumbnailGeometry(
            sourceWidth: sourceWidth, sourceHeight: sourceHeight, orientation: orientation, options: options,
            limits: limits)
        let kept: [Frame]
        switch options.frames {
        case .first: kept = [frames[0]]
        case .all: kept = frames
        case .prefix(let n): kept = Array(frames.prefix(max(1, n)))
        case .index(let n): kept = [frames[min(max(n, 0), frames.count - 1)]]
        }
        // Only the part the crop keeps is resampled.
        let scaled = with(frames: kept).resized(
            window: geometry.window(inputWidth: width, inputHeight: height), kernel: options.kernel,
            linearLight: options.linearLight)
        return ThumbnailFinisher.finish(scaled, geometry: geometry, options: options)
    }

    /// The `width` x `height` rectangle at (`x`, `y`) of every frame, exactly: a
    /// rectangle that is empty or reaches outside the image (a crop that came from a
    /// request) is ``ImageDecodingError/Reason/invalidCrop(x:y:width:height:)``, never
    /// another rectangle.
    ///
    /// ```swift
    /// let corner = try image.cropped(x: 0, y: 0, width: 64, height: 64)
    /// ```
    public func cropped(x: Int, y: Int, width: Int, height: Int) throws(ImageDecodingError) -> RasterImage {
        guard x >= 0, y >= 0, width > 0, height > 0, let right = Checked.sum(x, width), right <= self.width,
            let bottom = Checked.sum(y, height), bottom <= self.height
        else {
            throw ImageDecodingError(.invalidCrop(x: x, y: y, width: width, height: height))
        }
        return croppedWithin(x: x, y: y, width: width, height: height)
    }

    /// The rectangle, which the caller has placed inside the image.
    func croppedWithin(x: Int, y: Int, width: Int, height: Int) -> RasterImage {
        if x == 0 && y == 0 && width == self.width && height == self.height { return self }
        let stride = bytesPerRow
        let frames = self.frames.map { frame in
            Frame(
                pixels: [UInt8](unsafeUninitializedCapacity: width * height * 4) { buffer, initialized in
                    frame.pixels.withUnsafeBufferPointer { source in
                        for row in 0..<height {
                            (buffer.baseAddress! + row * width * 4).initialize(
                                from: source.baseAddress! + (y + row) * stride + x * 4, count: width * 4)
                        }
                    }
                    initialized = width * height * 4
                }, duration: frame.duration)
        }
        return with(width: width, height: height, frames: frames, bytesPerRow: width * 4)
    }
}

/// The last steps every thumbnail shares, on the small image: crop, straight alpha,
/// colour to sRGB, orientation.
enum ThumbnailFinisher {
    /// `image` is resampled to the geometry's scaled size, or already cropped from it,
    /// in the stored orientation.
    /// `colorModel` says what its pixels hold (`.cmyk` only when the caller has checked
    /// that the profile converts them).
    static func finish(
        _ image: RasterImage, geometry: ThumbnailGeometry, options: ThumbnailOptions,
        colorModel: PixelColorModel = .rgba
    ) -> RasterImage {
        // An image at the scaled size is cropped where the geometry says; one already
        // cropped is kept whole.
        let whole = image.width == geometry.scaledWidth && image.height == geometry.scaledHeight
        // (The geometry places the crop inside the scaled image; the bounds are kept
        // here all the same, since a wrong rectangle would read outside the pixels.)
        let x = whole ? min(max(geometry.cropX, 0), image.width - 1) : 0
        let y = whole ? min(max(geometry.cropY, 0), image.height - 1) : 0
        var result = image.croppedWithin(
            x: x, y: y, width: min(geometry.croppedWidth, image.width - x),
            height: min(geometry.croppedHeight, image.height - y)
        ).straightAlpha()
        if let profile = result.iccProfile {
            let space = ColorProfileConversion.colorSpace(of: profile)
            let describesPixels = colorModel == .rgba && (space == "RGB" || space == "GRAY")
            if options.keepsColorProfile && describesPixels {
                // Kept as it is, with the pixels it describes.
            } else {
                var frames = result.frames
                for index in frames.indices {
                    var pixels = frames[index].pixels
                    ColorProfileConversion.convertToSRGB(
                        &pixels, width: result.width, height: result.height, bytesPerRow: result.bytesPerRow,
                        profile: profile, model: colorModel)
                    frames[index] = .init(pixels: pixels, duration: frames[index].duration)
                }
                // Converted to sRGB, or (a profile lcms cannot use) assumed to be sRGB already.
                result = result.with(frames: frames, iccProfile: .some(nil))
            }
        }
        return options.appliesOrientation ? result.oriented() : result
    }
}
