/// An image decoded once to make several thumbnails: possibly shrunk while loading
/// (a JPEG by its DCT), with the size of the original it came from, so each
/// thumbnail gets exactly the geometry it would get from the original.
///
/// ```swift
/// let sizes = [ThumbnailOptions(maxPixelSize: 512), ThumbnailOptions(maxPixelSize: 128)]
/// let reduced = try ImageDecoder().decode(.bytes(body), options: DecodingOptions(), reducedFor: sizes)
/// let thumbnails = try sizes.map { try reduced.thumbnail(options: $0) }
/// ```
public struct ReducedImage: Sendable {
    /// The decoded pixels, at full size or reduced.
    public let image: RasterImage
    /// The original image's width, before any reduction.
    public let originalWidth: Int
    /// The original image's height, before any reduction.
    public let originalHeight: Int
    /// The limits the image was decoded under, which its thumbnails are held to.
    public let limits: DecodingLimits

    /// An image decoded at full size under `limits`.
    public init(full image: RasterImage, limits: DecodingLimits = DecodingLimits()) {
        self.init(image: image, originalWidth: image.width, originalHeight: image.height, limits: limits)
    }

    init(image: RasterImage, originalWidth: Int, originalHeight: Int, limits: DecodingLimits) {
        self.image = image
        self.originalWidth = originalWidth
        self.originalHeight = originalHeight
        self.limits = limits
    }

    /// Whether the pixels are the original's size.
    public var isFullSize: Bool { image.width == originalWidth && image.height == originalHeight }

    /// A thumbnail, as ``RasterImage/thumbnail(limits:options:)`` makes it, with the box
    /// fitted to the original's size, held to the decode's ``limits``.
    public func thumbnail(options: ThumbnailOptions) throws(ImageDecodingError) -> RasterImage {
        try image.thumbnail(
            options: options, limits: limits, sourceWidth: originalWidth, sourceHeight: originalHeight)
    }
}

extension ImageDecoder {
    /// One decode for all of `thumbnails`: a JPEG is scaled in the DCT by the largest
    /// factor that still leaves every thumbnail the margin its
    /// ``ThumbnailOptions/shrinkOnLoad`` asks for; other formats decode at full size.
    public func decode(_ source: ImageSource, options: DecodingOptions, reducedFor thumbnails: [ThumbnailOptions])
        throws(ImageDecodingError) -> ReducedImage
    {
        try ImageDecoder.run(source, options.limits) { reader, decoder in
            guard decoder.format == .jpeg, !thumbnails.isEmpty else {
                return ReducedImage(full: try decoder.decode(reader, options: options), limits: options.limits)
            }
            return try JPEGDecoder.decode(reader, options: options, reducedFor: thumbnails)
        }
    }
}

extension JPEGDecoder {
    static func decode(_ reader: ByteReader, options: DecodingOptions, reducedFor thumbnails: [ThumbnailOptions])
        throws -> ReducedImage
    {
        var original = (width: 0, height: 0)
        let image = try decode(reader, options: options) { width, height, orientation in
            original = (width, height)
            var denominator = 8
            for thumbnail in thumbnails {
                let geometry = try ThumbnailGeometry(
                    sourceWidth: width, sourceHeight: height, orientation: orientation, options: thumbnail,
                    limits: options.limits)
                denominator = min(
                    denominator,
                    ShrinkFactor.choose(
                        width: width, height: height, target: geometry, mode: thumbnail.shrinkOnLoad,
                        choices: [8, 4, 2]))
            }
            return denominator
        }
        return ReducedImage(
            image: image, originalWidth: original.width, originalHeight: original.height, limits: options.limits)
    }
}
