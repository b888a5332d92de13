import ImageLoaderSupport

/// What a thumbnail should be: the box it fits (or fills), how it is resampled, and
/// what happens to orientation, colour and frames.
///
/// ```swift
/// var options = ThumbnailOptions(maxPixelSize: 256)          // longest side 256
/// let square = ThumbnailOptions(width: 128, height: 128, fit: .fill)   // cropped to 128x128
/// options.kernel = .mitchell
/// options.linearLight = true
/// ```
public struct ThumbnailOptions: Sendable, Hashable {
    /// How the image meets the box.
    public enum Fit: String, Sendable, Hashable, Codable {
        /// The whole image inside the box; one side touches it.
        case fit
        /// The box covered, the overflow cropped (where ``ThumbnailOptions/gravity`` says).
        case fill
        /// Exactly the box, each side scaled on its own: the aspect ratio is not kept.
        case force
    }

    /// Which part of the image a `.fill` crop keeps, as the upright image is shown.
    public enum Gravity: String, Sendable, Hashable, Codable, CaseIterable {
        case center, north, south, east, west, northEast, northWest, southEast, southWest

        /// The crop's position, in halves of the overflow: 0 (left or top), 1 (middle), 2.
        var halves: (x: Int, y: Int) {
            switch self {
            case .center: (1, 1)
            case .north: (1, 0)
            case .south: (1, 2)
            case .east: (2, 1)
            case .west: (0, 1)
            case .northEast: (2, 0)
            case .northWest: (0, 0)
            case .southEast: (2, 2)
            case .southWest: (0, 2)
            }
        }
    }

    /// How much of the reduction the decoder does itself (JPEG's DCT scaling, WebP's
    /// scaled decode).
    public enum ShrinkOnLoad: String, Sendable, Hashable, Codable {
        /// As much as leaves at least 2x for the kernel: fast and sharp.
        case quality
        /// As much as the decoder can without going below the target: fastest, a little softer.
        case fastest
    }

    /// The box, in pixels, once the image is upright.
    public var width: Int
    /// The box's height in pixels, 1 to ``maxSide``.
    public var height: Int
    /// How the image meets the box: inside it, or filling it and cropped.
    public var fit: Fit
    /// Which part a `.fill` crop keeps. Default: the centre.
    public var gravity: Gravity = .center
    /// Whether an image smaller than the box is enlarged. Default: no.
    public var allowsUpscaling = false
    /// The filter for the final reduction. Default: Lanczos-3.
    public var kernel: ResamplingKernel = .lanczos3
    /// How far a decoder may shrink while loading (JPEG DCT scaling, WebP).
    public var shrinkOnLoad: ShrinkOnLoad = .quality
    /// Filter in linear light instead of the encoded sRGB values: truer for fine
    /// detail and saturated edges, a little slower.
    public var linearLight = false
    /// Keep the embedded ICC profile instead of converting the pixels to sRGB.
    public var keepsColorProfile = false
    /// Turn the image upright (EXIF or TIFF orientation). The result then says `.up`.
    public var appliesOrientation = true
    /// Make the thumbnail from a HEIF file's embedded thumbnail image when it has one at
    /// least as large as the thumbnail: faster, since the main image is not decoded.
    /// Default: no. An embedded thumbnail is written when the file is made and an
    /// editor may leave it as it was: it can show what the edited main image no longer
    /// shows (a crop, a redaction), so it is used only when the caller opts in.
    public var usesEmbeddedThumbnail = false
    /// The first frame of an animation, or `.all` to keep it animated.
    public var frames: FrameSelection = .first
    /// The format ``ImageDecoder/encodedThumbnail(_:limits:options:)`` writes.
    public var outputFormat: OutputFormat = .automatic()

    /// The longest side a thumbnail box may have.
    public static let maxSide = 16_384

    /// A box of `width` x `height`, kept exactly as given: a side outside
    /// `1...maxSide` is never turned into another size. Such options fail with
    /// ``ImageDecodingError/Reason/invalidThumbnailSize(width:height:)`` wherever they
    /// are used (or at once with ``validate()``), whether the side came through this
    /// initialiser or was set on a property afterwards.
    ///
    /// ```swift
    /// let options = ThumbnailOptions(width: requestedWidth, height: requestedHeight)
    /// try options.validate()          // a side of 0 or 20000: .invalidThumbnailSize
    /// ```
    public init(width: Int, height: Int, fit: Fit = .fit) {
        self.width = width
        self.height = height
        self.fit = fit
    }

    /// Throws ``ImageDecodingError/Reason/invalidThumbnailSize(width:height:)`` when a
    /// side of the box is outside `1...maxSide`, before any work: what every use of the
    /// options checks first.
    public func validate() throws(ImageDecodingError) {
        guard (1...ThumbnailOptions.maxSide).contains(width), (1...ThumbnailOptions.maxSide).contains(height) else {
            throw ImageDecodingError(.invalidThumbnailSize(width: width, height: height))
        }
    }

    /// A square box: the longest side becomes `maxPixelSize` (with `.fit`).
    public init(maxPixelSize: Int, fit: Fit = .fit) {
        self.init(width: maxPixelSize, height: maxPixelSize, fit: fit)
    }
}

extension ThumbnailOptions {
    /// The size a thumbnail of an upright `sourceWidth` x `sourceHeight` image comes out
    /// at with these options, without decoding anything: for a page's `width` and
    /// `height` attributes, or to check a box before the work.
    ///
    /// ```swift
    /// let size = try ThumbnailOptions(width: 300, height: 200).resultSize(sourceWidth: 4000, sourceHeight: 3000)
    /// // (width: 267, height: 200)
    /// ```
    ///
    /// Throws ``ImageDecodingError/Reason/invalidThumbnailSize(width:height:)`` as making
    /// the thumbnail under `limits` would.
    public func resultSize(sourceWidth: Int, sourceHeight: Int, limits: DecodingLimits = DecodingLimits())
        throws(ImageDecodingError) -> (width: Int, height: Int)
    {
        var upright = self
        upright.appliesOrientation = false
        let geometry = try ThumbnailGeometry(
            sourceWidth: sourceWidth, sourceHeight: sourceHeight, orientation: .up, options: upright, limits: limits)
        return (geometry.croppedWidth, geometry.croppedHeight)
    }
}

/// The sizes a thumbnail goes through, in the stored (not yet upright) orientation.
/// For `.fill`, only the part of the scaled image that the crop keeps is ever
/// computed: the work and memory follow the box, not the scaled size, which can be
/// enormous for a long, thin source.
struct ThumbnailGeometry: Equatable {
    /// The size the whole image would be resampled to.
    let scaledWidth: Int
    let scaledHeight: Int
    /// The size after cropping (`.fill`); the scaled size for `.fit`.
    let croppedWidth: Int
    let croppedHeight: Int
    /// Where the crop starts in the scaled image (the gravity, turned to the stored orientation).
    let cropX: Int
    let cropY: Int

    /// The largest scaled side kept; the scale itself is still exact up to it.
    static let maxScaledSide = 1 << 40

    /// The sizes for `options`; a result of more than `limits.maxPixelsPerFrame` pixels
    /// is refused.
    init(
        sourceWidth: Int, sourceHeight: Int, orientation: Orientation, options: ThumbnailOptions,
        limits: DecodingLimits
    ) throws(ImageDecodingError) {
        try options.validate()
        guard sourceWidth > 0, sourceHeight > 0 else {
            throw ImageDecodingError(.invalidThumbnailSize(width: options.width, height: options.height))
        }
        let swaps = options.appliesOrientation && orientation.swapsDimensions
        let (shownWidth, shownHeight) = swaps ? (sourceHeight, sourceWidth) : (sourceWidth, sourceHeight)
        let fitX = Double(options.width) / Double(shownWidth)
        let fitY = Double(options.height) / Double(shownHeight)
        var (scaleX, scaleY): (Double, Double)
        switch options.fit {
        case .fit: (scaleX, scaleY) = (min(fitX, fitY), min(fitX, fitY))
        case .fill: (scaleX, scaleY) = (max(fitX, fitY), max(fitX, fitY))
        case .force: (scaleX, scaleY) = (fitX, fitY)
        }
        if !options.allowsUpscaling { (scaleX, scaleY) = (min(scaleX, 1), min(scaleY, 1)) }
        let sides = 1...ThumbnailGeometry.maxScaledSide
        let width = Checked.clampedInt((Double(shownWidth) * scaleX).rounded(), to: sides) ?? 1
        let height = Checked.clampedInt((Double(shownHeight) * scaleY).rounded(), to: sides) ?? 1
        let cropWidth = options.fit == .fill ? min(width, options.width) : width
        let cropHeight = options.fit == .fill ? min(height, options.height) : height
        let limit = limits.maxPixelsPerFrame
        guard let pixels = Checked.multiply(cropWidth, cropHeight), pixels <= limit else {
            throw ImageDecodingError(
                .invalidThumbnailSize(width: cropWidth, height: cropHeight),
                message: "more than \(limit) pixels")
        }
        (scaledWidth, scaledHeight) = swaps ? (height, width) : (width, height)
        (croppedWidth, croppedHeight) = swaps ? (cropHeight, cropWidth) : (cropWidth, cropHeight)
        let (x, y) = ThumbnailGeometry.storedHalves(
            options.gravity.halves, orientation: options.appliesOrientation ? orientation : .up)
        cropX = (scaledWidth - croppedWidth) * x / 2
        cropY = (scaledHeight - croppedHeight) * y / 2
    }

    /// A position given in the upright image (halves: 0, 1 or 2 along each side) as a
    /// position in the stored image, by the inverse of what ``RasterImage/oriented()`` does.
    static func storedHalves(_ shown: (x: Int, y: Int), orientation: Orientation) -> (x: Int, y: Int) {
        let (x, y) = shown
        switch orientation {
        case .up: return (x, y)
        case .upMirrored: return (2 - x, y)
        case .down: return (2 - x, 2 - y)
        case .downMirrored: return (x, 2 - y)
        case .leftMirrored: return (y, x)
        case .right: return (y, 2 - x)
        case .rightMirrored: return (2 - y, 2 - x)
        case .left: return (2 - y, x)
        }
    }

    /// The resize that makes the cropped image straight from a source of this size.
    func window(inputWidth: Int, inputHeight: Int) -> ResizeWindow {
        ResizeWindow(
            inputWidth: inputWidth, inputHeight: inputHeight, scaledWidth: scaledWidth, scaledHeight: scaledHeight,
            x: cropX, y: cropY, width: croppedWidth, height: croppedHeight)
    }
}
