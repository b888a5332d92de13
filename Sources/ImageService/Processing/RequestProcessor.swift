import ImageLoaderSupport
import RasterImage

/// One request's processing, on the worker that decodes it: one decode, which reads
/// the header and makes its ``Decision`` there
/// (``ImageDecoding/thumbnail(_:limits:options:)``), then the general path's steps when
/// the options need them (``GeneralPath``), then the encoder this type chooses
/// (``ResultEncoders``).
struct RequestProcessor: Sendable {
    let options: ProcessingOptions
    let limits: EffectiveLimits
    /// The loader's decoding limits, with the request's pixel limit.
    let decodingLimits: DecodingLimits
    /// The EXIF block the result keeps, if any.
    let exif: [UInt8]?
    /// The result's format, from the header and whether the result would be animated.
    let format: @Sendable (ImageInfo, _ animated: Bool) -> ResultFormat
    /// The service's encoders and qualities.
    let encoders: ResultEncoders
    let shrinkOnLoad: ThumbnailOptions.ShrinkOnLoad
    let watermark: WatermarkImage?
    /// The decode's, the processing's and the encode's spans.
    var spans = WorkerSpans(context: nil)

    /// The encoded result of `bytes` and its format: one decode, which reads the
    /// header and makes its decision (``decision(for:)``), then the general path's steps,
    /// then the encoder.
    func encoded(_ bytes: [UInt8], decoder: any ImageDecoding) throws -> Encoded {
        var choice: Decision?
        // The decode shrinks while it loads (the thumbnail's resize, when the options ask
        // for no other step).
        let decoded = try spans.run("image.decode") {
            try decoder.thumbnail(.bytes(bytes), limits: decodingLimits) { info in
                let chosen = try self.decision(for: info)
                choice = chosen
                return chosen.decode
            }
        }
        guard let choice else { throw ServiceError(status: 500, "the decoder did not read the header") }
        let image =
            try choice.general.map { general in
                try spans.run("image.process") { try general.processor.finish(decoded, general.planned) }
            } ?? decoded
        let bytes = try spans.run("image.encode") {
            try ResultEncoders.encode(image, as: choice.output, maxBytes: options.maxBytes)
        }
        return Encoded(bytes: bytes, format: choice.format, origin: choice.origin, result: (image.width, image.height))
    }

    /// The decision for a source with this header; throws 413 past the pixel limit.
    func decision(for info: ImageInfo) throws -> Decision {
        try limits.checkPixels(of: info)
        // A vector is drawn at the size asked for, larger than its own too, as imgproxy draws it.
        var options = self.options
        if info.format == .svg { options.enlarge = true }
        // As imgproxy: the frames kept are the first `maxAnimationFrames`
        // (`min(pages, maxAnimationFrames)`); the format is chosen knowing whether the
        // result would be animated, and the result is animated when it keeps them.
        let kept = min(info.frameCount, limits.maxAnimationFrames)
        let format = format(info, kept > 1)
        var output = encoders.output(
            format, quality: options.quality(for: format), keepsProfile: !options.stripColorProfile,
            grey: info.isGrayscale)
        if let exif { output = output.with(exif: exif) }
        var animated = kept > 1 && format.keepsAnimation
        if animated {
            try limits.checkAnimation(of: info, frames: kept)
            // Past the decoder's own working limits, the first frame (they bound
            // memory, whatever the service's settings allow).
            animated =
                Checked.multiply(info.width, info.height).flatMap { Checked.multiply($0, kept) }.map {
                    $0 <= decodingLimits.maxTotalPixels && $0 <= decodingLimits.maxTotalBytes / 4
                } ?? false
        }
        let frames: FrameSelection = !animated ? .first : kept < info.frameCount ? .prefix(kept) : .all
        let origin = info.orientation.swapsDimensions ? (info.height, info.width) : (info.width, info.height)
        // Formats with a smaller limit on a side scale results down to it, as imgproxy's `fixSize`.
        let maxResultSide = min(limits.maxResultSide, format.maxSide)
        if !options.needsGeneralPath && !animated {
            var thumbnail = options.thumbnailOptions(
                sourceWidth: origin.0, sourceHeight: origin.1, maxResultSide: maxResultSide)
            thumbnail.shrinkOnLoad = shrinkOnLoad
            return Decision(
                format: format, output: output, decode: thumbnail, general: nil, origin: origin)
        }
        let processor = GeneralPath(
            options: options, info: info, maxResultSide: maxResultSide, shrinkOnLoad: shrinkOnLoad,
            limits: decodingLimits, watermark: watermark, frames: frames)
        let (decode, planned) = try processor.firstDecode()
        return Decision(
            format: format, output: output, decode: decode, general: (processor, planned), origin: origin)
    }

    /// What one processed request's decode does, chosen from the source's header as the
    /// decode reads it (``ImageDecoding/thumbnail(_:limits:options:)``): the result's
    /// format and encoder, the decode's options, and the general path's steps after it.
    struct Decision {
        let format: ResultFormat
        let output: OutputFormat
        /// The first decode; in one pass, the only step before encoding.
        let decode: ThumbnailOptions
        /// The general path's processor and what it planned, `nil` in one pass.
        let general: (processor: GeneralPath, planned: GeneralPath.Pending)?
        /// The source's size, upright (imgproxy's `X-Origin-Width`/`-Height`).
        let origin: (width: Int, height: Int)
    }

    /// A request's result: the encoded bytes, their format, and the source's and the
    /// result's sizes (upright).
    struct Encoded: Sendable {
        let bytes: [UInt8]
        let format: ResultFormat
        let origin: (width: Int, height: Int)
        let result: (width: Int, height: Int)
    }
}
