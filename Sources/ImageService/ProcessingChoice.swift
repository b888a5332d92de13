import ImageLoaderSupport
import RasterImage

/// What one processed request's decode does, chosen from the source's header as the
/// decode reads it (``ImageDecoding/thumbnail(_:limits:options:)``): the result's
/// format and encoder, the decode's options, and the general path's steps after it.
struct ProcessingChoice {
    let format: ProcessingOptions.Format
    let output: OutputFormat
    /// The first decode; in one pass, the only step before encoding.
    let decode: ThumbnailOptions
    /// The general path's processor and what it planned, `nil` in one pass.
    let general: (processor: ImageProcessor, planned: ImageProcessor.Planned)?

    /// Chooses for one request, on the worker that decodes it.
    struct Planner: Sendable {
        let options: ProcessingOptions
        let limits: EffectiveLimits
        /// The loader's decoding limits, with the request's pixel limit.
        let decodingLimits: DecodingLimits
        /// The EXIF block the result keeps, if any.
        let exif: [UInt8]?
        let format: @Sendable (ImageInfo) -> ProcessingOptions.Format
        /// The encoder for a format, a quality (`nil`: the service's) and whether the profile is kept.
        let output: @Sendable (ProcessingOptions.Format, Int?, Bool) -> OutputFormat
        let shrinkOnLoad: ThumbnailOptions.ShrinkOnLoad
        let watermark: WatermarkImage?

        /// The encoded result of `bytes` and its format: one decode, which reads the
        /// header and makes its choice (``choice(for:)``), then the general path's steps,
        /// then the encoder.
        func encoded(_ bytes: [UInt8], decoder: any ImageDecoding) throws -> (
            bytes: [UInt8], format: ProcessingOptions.Format
        ) {
            var choice: ProcessingChoice?
            let decoded = try decoder.thumbnail(.bytes(bytes), limits: decodingLimits) { info in
                let chosen = try self.choice(for: info)
                choice = chosen
                return chosen.decode
            }
            guard let choice else { throw ServiceError(status: 500, "the decoder did not read the header") }
            let image = try choice.general.map { try $0.processor.finish(decoded, $0.planned) } ?? decoded
            return (try ImageService.encode(image, as: choice.output, maxBytes: options.maxBytes), choice.format)
        }

        /// The choice for a source with this header; throws 413 past the pixel limit.
        func choice(for info: ImageInfo) throws -> ProcessingChoice {
            try limits.checkPixels(of: info)
            let format = format(info)
            var output = output(format, options.quality(for: format), !options.stripColorProfile)
            if let exif { output = output.with(exif: exif) }
            // Animated when allowed and the frames kept (the first `maxAnimationFrames`, as
            // imgproxy's `min(pages, maxAnimationFrames)`), at the source's size, fit the
            // decoding limits; else the first frame.
            let framePixels = Checked.multiply(info.width, info.height)
            let kept = min(info.frameCount, limits.maxAnimationFrames)
            let animated =
                kept > 1 && framePixels.map { $0 <= limits.maxAnimationFramePixels } ?? false
                && framePixels.flatMap { Checked.multiply($0, kept) }.map {
                    $0 <= decodingLimits.maxTotalPixels && $0 <= decodingLimits.maxTotalBytes / 4
                } ?? false
                && format.keepsAnimation
            let frames: FrameSelection = !animated ? .first : kept < info.frameCount ? .prefix(kept) : .all
            // Formats with a smaller limit on a side scale results down to it, as imgproxy's `fixSize`.
            let maxResultSide = format == .webp ? min(limits.maxResultSide, 16_383) : limits.maxResultSide
            if !options.needsGeneralPath && !animated {
                let upright = info.orientation.swapsDimensions ? (info.height, info.width) : (info.width, info.height)
                var thumbnail = options.thumbnailOptions(
                    sourceWidth: upright.0, sourceHeight: upright.1, maxResultSide: maxResultSide)
                thumbnail.shrinkOnLoad = shrinkOnLoad
                return ProcessingChoice(format: format, output: output, decode: thumbnail, general: nil)
            }
            let processor = ImageProcessor(
                options: options, info: info, maxResultSide: maxResultSide, shrinkOnLoad: shrinkOnLoad,
                limits: decodingLimits, watermark: watermark, frames: frames)
            let (decode, planned) = try processor.firstDecode()
            return ProcessingChoice(format: format, output: output, decode: decode, general: (processor, planned))
        }
    }
}
