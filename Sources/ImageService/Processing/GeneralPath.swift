import ImageLoaderSupport
import RasterImage

/// The general path of a processing URL, imgproxy's pipeline step by step on a scaled
/// image: trim, rotate and flip, `crop`, scale, the result's crop (by gravity, offsets,
/// focus point or attention), filters, extend, padding, background, watermark. Runs
/// on one of the loader's worker threads.
///
/// Where imgproxy crops before scaling, this scales the whole source first (never past
/// its own size when a crop follows) and crops the scaled image: the same pixels up
/// to the resampler's reach at the crop's edges, and the decoder still shrinks while
/// loading. Rotation and flips come before the crops here and the crops keep the
/// gravity as written, which is what imgproxy's gravity adjustment amounts to.
struct GeneralPath: Sendable {
    let options: ProcessingOptions
    /// The source's header.
    let info: ImageInfo
    let maxResultSide: Int
    let shrinkOnLoad: ThumbnailOptions.ShrinkOnLoad
    let limits: DecodingLimits
    /// The watermark, already read, when the service has one.
    let watermark: WatermarkImage?
    /// `.all` for an animated result, every frame processed alike.
    let frames: FrameSelection

    /// What the first decode leaves to do: trim (the plan follows from what is left),
    /// or the plan made from the header.
    enum Pending {
        case trim(ProcessingOptions.Trim)
        case plan(ImgproxyGeometry)
    }

    /// How the source is decoded first, chosen from its header (``info``): the thumbnail
    /// options, and the plan when the header is enough to make it.
    func firstDecode() throws -> (options: ThumbnailOptions, planned: Pending) {
        let autoRotate = options.autoRotate ?? true
        let upright =
            autoRotate && info.orientation.swapsDimensions ? (info.height, info.width) : (info.width, info.height)
        if let trim = options.trim {
            // Trim looks at the source's own pixels: a full decode, then the plan for what is left.
            // Without auto-rotation the pixels are taken as stored, whatever the source says.
            return (thumbnailOptions(width: upright.0, height: upright.1, autoRotate: autoRotate), .trim(trim))
        }
        let turns = options.rotate / 90
        let turned = turns % 2 == 1 ? (upright.1, upright.0) : upright
        let plan = ImgproxyGeometry(
            options: options, sourceWidth: turned.0, sourceHeight: turned.1, maxResultSide: resultSideLimit)
        try checkScaledSize(plan)
        // With a crop to come, no larger than the source: the crop is enlarged after.
        let cropping = options.crop != nil
        let widthScale = cropping ? min(plan.widthScale, 1) : plan.widthScale
        let heightScale = cropping ? min(plan.heightScale, 1) : plan.heightScale
        let swaps = turns % 2 == 1
        let decodeWidth = max(1, ImgproxyGeometry.scale(upright.0, swaps ? heightScale : widthScale))
        let decodeHeight = max(1, ImgproxyGeometry.scale(upright.1, swaps ? widthScale : heightScale))
        return (thumbnailOptions(width: decodeWidth, height: decodeHeight, autoRotate: autoRotate), .plan(plan))
    }

    /// The processed image, from the first decode that ``firstDecode()`` asked for.
    func finish(_ decoded: RasterImage, _ planned: Pending) throws -> RasterImage {
        let turns = options.rotate / 90
        var image = decoded.labelled(.up)
        let plan: ImgproxyGeometry
        switch planned {
        case .trim(let trim):
            let region = image.contentRegion(
                threshold: trim.threshold, color: trim.color, equalHorizontal: trim.equalHorizontal,
                equalVertical: trim.equalVertical)
            image = image.cropped(to: region).rotated(quarterTurns: turns)
                .flipped(horizontally: options.flipHorizontal, vertically: options.flipVertical)
            plan = ImgproxyGeometry(
                options: options, sourceWidth: image.width, sourceHeight: image.height, maxResultSide: resultSideLimit)
            try checkScaledSize(plan)
        case .plan(let planned):
            plan = planned
            image = image.rotated(quarterTurns: turns).flipped(
                horizontally: options.flipHorizontal, vertically: options.flipVertical)
        }

        // `crop`: a part of the source, in the source's pixels scaled to the image's.
        if let crop = options.crop, plan.cropWidth > 0 || plan.cropHeight > 0 {
            let scaleX = Double(image.width) / Double(plan.sourceWidth)
            let scaleY = Double(image.height) / Double(plan.sourceHeight)
            let width = plan.cropWidth == 0 ? image.width : max(1, ImgproxyGeometry.scale(plan.cropWidth, scaleX))
            let height = plan.cropHeight == 0 ? image.height : max(1, ImgproxyGeometry.scale(plan.cropHeight, scaleY))
            image = Self.crop(
                image, width: width, height: height, gravity: crop.gravity ?? options.gravity, dpr: scaleX)
        }
        if (image.width, image.height) != (plan.scaledWidth, plan.scaledHeight) {
            image = image.resized(width: plan.scaledWidth, height: plan.scaledHeight)
        }
        // The result's crop.
        image = Self.crop(
            image, width: plan.resultCropWidth == 0 ? image.width : plan.resultCropWidth,
            height: plan.resultCropHeight == 0 ? image.height : plan.resultCropHeight, gravity: options.gravity,
            dpr: plan.dprScale)
        // Filters.
        if options.blur > 0 { image = image.blurred(sigma: options.blur) }
        if options.sharpen > 0 { image = image.sharpened(sigma: options.sharpen) }
        if options.pixelate > 1 { image = image.pixelated(blockSize: options.pixelate) }
        // Extend, to the box or to its aspect ratio, then padding.
        let fill = options.background ?? .transparent
        if options.extend.enabled {
            image = Self.extend(
                image, width: plan.targetWidth, height: plan.targetHeight, gravity: options.extend.gravity,
                dpr: plan.dprScale, fill: fill)
        }
        if options.extendAspectRatio.enabled && plan.aspectWidth > 0 && plan.aspectHeight > 0 {
            image = Self.extend(
                image, width: plan.aspectWidth, height: plan.aspectHeight, gravity: options.extendAspectRatio.gravity,
                dpr: plan.dprScale, fill: fill)
        }
        let padding = plan.padding(options)
        if !padding.isEmpty {
            image = image.embedded(
                width: image.width + padding.left + padding.right, height: image.height + padding.top + padding.bottom,
                x: padding.left, y: padding.top, background: fill)
        }
        if let background = options.background { image = image.flattened(onto: background) }
        if let mark = options.watermark, let watermark {
            image = watermark.drawn(over: image, options: mark, dpr: plan.dprScale)
        }
        return image
    }

    /// The longest side a result may have: the service's limit, within what a thumbnail can be.
    private var resultSideLimit: Int { max(1, min(maxResultSide, ThumbnailOptions.maxSide)) }

    /// The whole (cropped) source scaled is made before the result's crop: it is bounded
    /// like a source, as a large enlargement cropped to a small box could ask for more.
    private func checkScaledSize(_ plan: ImgproxyGeometry) throws {
        guard let scaled = Checked.multiply(plan.scaledWidth, plan.scaledHeight), scaled <= limits.maxPixelsPerFrame
        else {
            throw ServiceError(status: 422, "the scaled image would be larger than \(limits.maxPixelsPerFrame) pixels")
        }
        // Every frame of an animation is scaled alike.
        let frameCount =
            switch frames {
            case .all: max(1, info.frameCount)
            case .prefix(let n): max(1, min(n, info.frameCount))
            default: 1
            }
        guard let all = Checked.multiply(scaled, frameCount), all <= limits.maxTotalPixels else {
            throw ServiceError(status: 422, "the scaled frames would be more than \(limits.maxTotalPixels) pixels")
        }
    }

    private func thumbnailOptions(width: Int, height: Int, autoRotate: Bool) -> ThumbnailOptions {
        var thumbnail = ThumbnailOptions(width: width, height: height, fit: .force)
        thumbnail.allowsUpscaling = true
        thumbnail.appliesOrientation = autoRotate
        thumbnail.shrinkOnLoad = shrinkOnLoad
        thumbnail.keepsColorProfile = !options.stripColorProfile
        thumbnail.usesEmbeddedThumbnail = options.enforceThumbnail
        thumbnail.frames = frames
        return thumbnail
    }

    /// imgproxy's `cropImage`: a `width` x `height` window placed by `gravity` (pixel
    /// offsets times `dpr`); nothing when the window covers the image.
    static func crop(
        _ image: RasterImage, width: Int, height: Int, gravity: ProcessingOptions.Gravity, dpr: Double
    ) -> RasterImage {
        let (width, height) = (min(width, image.width), min(height, image.height))
        guard width < image.width || height < image.height else { return image }
        if gravity.type == .smart { return image.cropped(to: image.attentionRegion(width: width, height: height)) }
        let (x, y) = ImgproxyGeometry.position(
            width: image.width, height: image.height, innerWidth: width, innerHeight: height, gravity: gravity,
            dpr: dpr)
        return image.cropped(to: PixelRegion(x: x, y: y, width: width, height: height))
    }

    /// imgproxy's `extendImage`: the image on a canvas of at least its size, placed by `gravity`.
    static func extend(
        _ image: RasterImage, width: Int, height: Int, gravity: ProcessingOptions.Gravity, dpr: Double,
        fill: PixelColor
    ) -> RasterImage {
        guard width > image.width || height > image.height else { return image }
        let canvasWidth = max(width, image.width)
        let canvasHeight = max(height, image.height)
        let (x, y) = ImgproxyGeometry.position(
            width: canvasWidth, height: canvasHeight, innerWidth: image.width, innerHeight: image.height,
            gravity: gravity, dpr: dpr)
        return image.embedded(width: canvasWidth, height: canvasHeight, x: x, y: y, background: fill)
    }
}
