import ImageLoaderSupport

/// What a header says about an image, read without decoding its pixels.
public struct ImageInfo: Sendable, Hashable, CustomStringConvertible {
    /// The format, from the bytes' signature.
    public let format: ImageFormat
    /// Width in pixels (the canvas, for an animation; the first page, for a TIFF).
    public let width: Int
    /// Height in pixels.
    public let height: Int
    /// Frames of an animation, pages of a TIFF, otherwise 1.
    public let frameCount: Int
    /// Whether the image can have transparent pixels.
    public let hasAlpha: Bool
    /// The EXIF or TIFF orientation.
    public let orientation: Orientation
    /// How many times an animation plays (0: forever).
    public let loopCount: Int
    /// The embedded ICC profile, when the header carries one.
    public let iccProfile: [UInt8]?
    /// Whether the image stores one colour channel: grey, with or without alpha (a
    /// grey PNG, a one-component JPEG, a min-is-black TIFF). Decoded images are RGBA
    /// either way; an encoder's `grayscale` option writes such an image back as grey.
    public let isGrayscale: Bool

    /// The format's media type, `image/png` and so on.
    public var contentType: String { format.contentType }

    /// A header's facts (a custom ``ImageDecoding`` returns these).
    public init(
        format: ImageFormat, width: Int, height: Int, frameCount: Int = 1, hasAlpha: Bool,
        orientation: Orientation = .up, loopCount: Int = 1, iccProfile: [UInt8]? = nil, isGrayscale: Bool = false
    ) {
        self.format = format
        self.width = width
        self.height = height
        self.frameCount = frameCount
        self.hasAlpha = hasAlpha
        self.orientation = orientation
        self.loopCount = loopCount
        self.iccProfile = iccProfile
        self.isGrayscale = isGrayscale
    }

    /// One line, without the profile's bytes: `ImageInfo(jpeg 6000x4000, opaque, orientation 6, ICC profile 3144 bytes)`.
    public var description: String {
        var parts = ["\(format.rawValue) \(width)x\(height)"]
        if frameCount > 1 { parts.append("\(frameCount) frames") }
        parts.append(hasAlpha ? "alpha" : "opaque")
        if isGrayscale { parts.append("grey") }
        if orientation != .up { parts.append("orientation \(orientation.rawValue)") }
        if let iccProfile { parts.append("ICC profile \(iccProfile.count) bytes") }
        return "ImageInfo(" + parts.joined(separator: ", ") + ")"
    }
}

/// Turns encoded bytes into a ``RasterImage``. The seam for custom decoders: the
/// loader takes any `ImageDecoding`.
///
/// Only ``decode(_:options:)`` and ``info(_:options:)`` are required. The thumbnail
/// methods have defaults that decode at full size and resample; a decoder that can
/// shrink while loading overrides them, as ``ImageDecoder`` does.
///
/// ```swift
/// struct LoggingDecoder: ImageDecoding {
///     let inner = ImageDecoder()
///     func decode(_ source: ImageSource, options: DecodingOptions) throws(ImageDecodingError) -> RasterImage {
///         try inner.decode(source, options: options)
///     }
///     func info(_ source: ImageSource, options: DecodingOptions) throws(ImageDecodingError) -> ImageInfo {
///         try inner.info(source, options: options)
///     }
/// }
/// ```
public protocol ImageDecoding: Sendable {
    /// Decodes the image in `source`.
    func decode(_ source: ImageSource, options: DecodingOptions) throws(ImageDecodingError) -> RasterImage
    /// Reads the header of the image in `source` without decoding its pixels.
    func info(_ source: ImageSource, options: DecodingOptions) throws(ImageDecodingError) -> ImageInfo
    /// A thumbnail of the image in `source`, upright, sRGB, straight alpha; `limits`
    /// bound the whole read (the full-size header is checked before anything is
    /// allocated) and the thumbnail's pixels.
    /// Default: ``decode(_:options:)`` with `limits` and the thumbnail's frames, then
    /// ``RasterImage/thumbnail(limits:options:)``.
    func thumbnail(_ source: ImageSource, limits: DecodingLimits, options: ThumbnailOptions)
        throws(ImageDecodingError) -> RasterImage
    /// A thumbnail whose options are chosen from the image's header, read once: `options`
    /// is called with the header (the same facts ``info(_:options:)`` returns) before any
    /// pixel is decoded, and the thumbnail is made as ``ImageDecoding/thumbnail(_:limits:options:)-228y1``
    /// makes it. `limits` bound the whole read.
    /// Throws ``ImageDecodingError``, or what `options` throws, unchanged.
    /// Default: ``info(_:options:)``, then ``ImageDecoding/thumbnail(_:limits:options:)-228y1`` (two reads).
    func thumbnail(
        _ source: ImageSource, limits: DecodingLimits, options: (ImageInfo) throws -> ThumbnailOptions
    ) throws -> RasterImage
    /// One decode from which every thumbnail in `thumbnails` can be made
    /// (``ReducedImage/thumbnail(options:)``): as small as the largest of them allows.
    /// Default: ``decode(_:options:)`` at full size.
    func decode(_ source: ImageSource, options: DecodingOptions, reducedFor thumbnails: [ThumbnailOptions])
        throws(ImageDecodingError) -> ReducedImage
}

extension ImageDecoding {
    public func thumbnail(_ source: ImageSource, limits: DecodingLimits, options: ThumbnailOptions)
        throws(ImageDecodingError) -> RasterImage
    {
        try options.validate()
        return try decode(source, options: DecodingOptions(limits: limits, frames: options.frames))
            .thumbnail(limits: limits, options: options)
    }

    /// A thumbnail under the default ``DecodingLimits``, as
    /// ``ImageDecoding/thumbnail(_:limits:options:)-228y1`` makes it.
    ///
    /// ```swift
    /// let thumb = try decoder.thumbnail(.data(body), options: ThumbnailOptions(maxPixelSize: 256))
    /// ```
    public func thumbnail(_ source: ImageSource, options: ThumbnailOptions) throws(ImageDecodingError) -> RasterImage {
        try thumbnail(source, limits: DecodingLimits(), options: options)
    }

    public func thumbnail(
        _ source: ImageSource, limits: DecodingLimits, options: (ImageInfo) throws -> ThumbnailOptions
    ) throws -> RasterImage {
        let chosen = try options(info(source, options: DecodingOptions(limits: limits)))
        return try thumbnail(source, limits: limits, options: chosen)
    }

    public func decode(_ source: ImageSource, options: DecodingOptions, reducedFor thumbnails: [ThumbnailOptions])
        throws(ImageDecodingError) -> ReducedImage
    {
        ReducedImage(full: try decode(source, options: options), limits: options.limits)
    }
}

/// Decodes PNG, JPEG, GIF, TIFF, WebP, BMP, HEIF/HEIC, AVIF and JPEG XL, choosing the decoder from the bytes'
/// signature (never from a file name or a declared type). Safe to use from many
/// tasks at once: every decode has its own state.
///
/// ```swift
/// let decoder = ImageDecoder()
/// let image = try decoder.decode(.file(path: "animation.gif"))
/// print(image.frames.count, image.loopCount)
///
/// let header = try decoder.info(.data(data))       // no pixels decoded
/// print(header.width, header.height, header.contentType)
/// ```
public struct ImageDecoder: ImageDecoding {
    /// Options used by the calls that do not take their own.
    public var options: DecodingOptions

    /// A decoder whose calls without options use `options`.
    public init(options: DecodingOptions = DecodingOptions()) {
        self.options = options
    }

    /// Decodes the image with ``options``.
    public func decode(_ source: ImageSource) throws(ImageDecodingError) -> RasterImage {
        try decode(source, options: options)
    }

    public func decode(_ source: ImageSource, options: DecodingOptions) throws(ImageDecodingError) -> RasterImage {
        try ImageDecoder.run(source, options.limits) { reader, decoder in
            try decoder.decode(reader, options: options)
        }
    }

    /// Reads the header with ``options``' limits.
    public func info(_ source: ImageSource) throws(ImageDecodingError) -> ImageInfo {
        try info(source, options: options)
    }

    public func info(_ source: ImageSource, options: DecodingOptions) throws(ImageDecodingError) -> ImageInfo {
        try ImageDecoder.run(source, options.limits) { reader, decoder in
            try decoder.info(reader, limits: options.limits)
        }
    }

    /// Every page of a multi-page TIFF, each its own image with its own size; for
    /// other formats, the one image ``decode(_:)`` returns.
    ///
    /// ```swift
    /// for page in try ImageDecoder().decodePages(.file(path: "scan.tiff")) { ... }
    /// ```
    public func decodePages(_ source: ImageSource) throws(ImageDecodingError) -> [RasterImage] {
        try ImageDecoder.run(source, options.limits) { reader, decoder in
            try decoder.decodePages(reader, options: options)
        }
    }

    /// The format of the bytes in `source`, from their signature, or `nil`.
    public func format(of source: ImageSource) throws(ImageDecodingError) -> ImageFormat? {
        ImageFormat.sniff(try source.leadingBytes(ImageFormat.svgCheckLength))
    }

    static func decoder(for format: ImageFormat) -> any FormatDecoder.Type {
        switch format {
        case .png: PNGDecoder.self
        case .jpeg: JPEGDecoder.self
        case .gif: GIFDecoder.self
        case .tiff: TIFFDecoder.self
        case .webp: WebPDecoder.self
        case .bmp: BMPDecoder.self
        case .heif: HEIFDecoder.self
        case .avif: AVIFDecoder.self
        case .jxl: JXLDecoder.self
        case .ico: ICODecoder.self
        case .svg: SVGDecoder.self
        }
    }

    static func run<R>(
        _ source: ImageSource, _ limits: DecodingLimits,
        _ body: (ByteReader, any FormatDecoder.Type) throws -> R
    ) throws(ImageDecodingError) -> R {
        try convertingErrors {
            try source.withReader(limits: limits) { reader in
                // A binary signature from the first bytes; SVG's root element may come later.
                let leading = reader.bytes(at: 0, count: ImageFormat.sniffLength)
                let sniffed =
                    ImageFormat.sniff(leading)
                    ?? (SVGSniffer.mayBeMarkup(leading)
                        ? ImageFormat.sniff(reader.bytes(at: 0, count: ImageFormat.svgCheckLength)) : nil)
                guard let format = sniffed else {
                    throw ImageDecodingError(.unrecognizedFormat)
                }
                return try body(reader, decoder(for: format))
            }
        }
    }

    /// The decoders throw only ``ImageDecodingError``; this gives the public API its typed throws.
    static func convertingErrors<R>(_ body: () throws -> R) throws(ImageDecodingError) -> R {
        do {
            return try body()
        } catch let error as ImageDecodingError {
            throw error
        } catch {
            throw ImageDecodingError(.corrupt, message: String(describing: error))
        }
    }
}

/// One format's decoder. Each reads from a ``ByteReader`` and throws only ``ImageDecodingError``.
protocol FormatDecoder {
    static var format: ImageFormat { get }
    static func info(_ reader: ByteReader, limits: DecodingLimits) throws -> ImageInfo
    static func decode(_ reader: ByteReader, options: DecodingOptions) throws -> RasterImage
    /// Every page as its own image; formats without pages return the one image.
    static func decodePages(_ reader: ByteReader, options: DecodingOptions) throws -> [RasterImage]
    /// A thumbnail, doing the least decoding work the format allows, with the options
    /// `request` gives or chooses from the header this read finds.
    static func thumbnail(_ reader: ByteReader, _ request: ThumbnailRequest) throws -> RasterImage
}

extension FormatDecoder {
    static func decodePages(_ reader: ByteReader, options: DecodingOptions) throws -> [RasterImage] {
        [try decode(reader, options: options)]
    }

    /// The plain way: decode at full size, then resize in memory (options chosen from
    /// the header need ``info(_:limits:)`` first).
    static func thumbnail(_ reader: ByteReader, _ request: ThumbnailRequest) throws -> RasterImage {
        let options = try request.options(try info(reader, limits: request.limits))
        reader.seek(to: 0)
        let image = try decode(reader, options: DecodingOptions(limits: request.limits, frames: options.frames))
        return try image.thumbnail(limits: request.limits, options: options)
    }
}

extension FrameSelection {
    /// The last frame index a decode must composite, or `nil` for every frame.
    var lastNeededIndex: Int? {
        switch self {
        case .first: 0
        case .all: nil
        case .index(let n): n
        case .prefix(let n): max(0, n - 1)
        }
    }

    /// Whether frame `index` is returned.
    func returns(_ index: Int) -> Bool {
        switch self {
        case .first: index == 0
        case .all: true
        case .index(let n): index == n
        case .prefix(let n): index < max(1, n)
        }
    }
}

/// Allocation of output pixels, written in place by the decoders (no extra copy).
enum PixelBuffer {
    /// `count` bytes, uninitialised until `fill` writes them; `fill` must write every byte.
    static func make(count: Int, _ fill: (UnsafeMutablePointer<UInt8>) throws -> Void) rethrows -> [UInt8] {
        try [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            initialized = 0
            let prefault = PageFaulter.start(UnsafeMutableRawBufferPointer(buffer))
            defer { prefault?.finish() }
            try fill(buffer.baseAddress!)
            initialized = count
        }
    }
}
