/// An encoder: the seam for writing other formats.
public protocol ImageEncoding: Sendable {
    /// The format written.
    var format: ImageFormat { get }
    /// Encodes frame `frame` of `image`.
    func encode(_ image: RasterImage, frame: Int) throws(ImageEncodingError) -> [UInt8]
}

extension PNGEncoder: ImageEncoding {
    public var format: ImageFormat { .png }
}

extension JPEGEncoder: ImageEncoding {
    public var format: ImageFormat { .jpeg }
}

extension WebPEncoder: ImageEncoding {
    public var format: ImageFormat { .webp }
}

extension AVIFEncoder: ImageEncoding {
    public var format: ImageFormat { .avif }
}

extension JXLEncoder: ImageEncoding {
    public var format: ImageFormat { .jxl }
}

extension GIFEncoder: ImageEncoding {
    public var format: ImageFormat { .gif }
}

extension HEIFEncoder: ImageEncoding {
    public var format: ImageFormat { .heif }
}

extension ICOEncoder: ImageEncoding {
    public var format: ImageFormat { .ico }
}

extension BMPEncoder: ImageEncoding {
    public var format: ImageFormat { .bmp }
}

extension TIFFEncoder: ImageEncoding {
    public var format: ImageFormat { .tiff }
}

/// Which format, with which settings, an image is written in.
///
/// ```swift
/// let automatic = OutputFormat.automatic(quality: 85)    // PNG with alpha, JPEG without
/// let named = OutputFormat(fileExtension: "webp", quality: 80)
/// ```
public enum OutputFormat: Sendable, Hashable {
    /// PNG when the image has transparency, otherwise JPEG at `quality`.
    case automatic(quality: Int = 85)
    /// PNG with this encoder.
    case png(PNGEncoder)
    /// JPEG with this encoder.
    case jpeg(JPEGEncoder)
    /// WebP with this encoder.
    case webp(WebPEncoder)
    /// AVIF with this encoder.
    case avif(AVIFEncoder)
    /// JPEG XL with this encoder.
    case jxl(JXLEncoder)
    /// GIF with this encoder.
    case gif(GIFEncoder)
    /// HEIC through libheif and x265 (``HEIFEncoder/isAvailable`` says whether this
    /// libheif has its encoder).
    case heic(HEIFEncoder)
    /// A Windows icon of one PNG entry, at most 256 pixels a side.
    case ico(ICOEncoder)
    /// An uncompressed Windows bitmap.
    case bmp(BMPEncoder)
    /// A Deflate-compressed baseline TIFF.
    case tiff(TIFFEncoder)

    /// The format a file name's extension names (any of ``ImageFormat/Traits/fileExtensions``
    /// of a writable format: `jpg`, `jpeg`, `png`, `webp`, `avif`, `jxl`, `gif`, `heic`,
    /// `heif`, `ico`, `bmp`, `tif`, `tiff`), or `nil`.
    public init?(fileExtension: String, quality: Int? = nil) {
        guard let format = ImageFormat(fileExtension: fileExtension) else { return nil }
        self.init(format, quality: quality)
    }

    /// `format` written by its encoder with its default settings (and `quality` where
    /// it has one), or `nil` for a format the library does not write (SVG).
    ///
    /// ```swift
    /// let webp = OutputFormat(.webp, quality: 80)
    /// ```
    public init?(_ format: ImageFormat, quality: Int? = nil) {
        switch format {
        case .jpeg: self = .jpeg(JPEGEncoder(quality: quality ?? 85))
        case .png: self = .png(PNGEncoder())
        case .webp: self = .webp(WebPEncoder(quality: quality ?? 80))
        case .avif: self = .avif(AVIFEncoder(quality: quality ?? 60))
        case .jxl: self = .jxl(JXLEncoder(quality: quality ?? 75))
        case .gif: self = .gif(GIFEncoder())
        case .heif: self = .heic(HEIFEncoder(quality: quality ?? 50))
        case .ico: self = .ico(ICOEncoder())
        case .bmp: self = .bmp(BMPEncoder())
        case .tiff: self = .tiff(TIFFEncoder())
        case .svg: return nil
        }
    }

    /// The extensions ``init(fileExtension:quality:)`` takes, for help texts: ".jpg, .jpeg, ... or .tiff".
    public static var fileExtensionList: String {
        ImageFormat.list(ImageFormat.writable.flatMap(\.traits.fileExtensions).map { "." + $0 })
    }

    /// The encoder for `image`: the automatic choice resolved by its transparency.
    public func encoder(for image: RasterImage) -> any ImageEncoding {
        switch self {
        case .automatic(let quality): image.hasAlpha ? PNGEncoder() : JPEGEncoder(quality: quality)
        case .png(let encoder): encoder
        case .jpeg(let encoder): encoder
        case .webp(let encoder): encoder
        case .avif(let encoder): encoder
        case .jxl(let encoder): encoder
        case .gif(let encoder): encoder
        case .heic(let encoder): encoder
        case .ico(let encoder): encoder
        case .bmp(let encoder): encoder
        case .tiff(let encoder): encoder
        }
    }

    /// The quality of a lossy format (JPEG, WebP unless lossless, AVIF, JPEG XL); `nil` for others.
    public var quality: Int? {
        switch self {
        case .automatic, .png, .gif, .ico, .bmp, .tiff: nil
        case .jpeg(let encoder): encoder.quality
        case .heic(let encoder): encoder.quality
        case .webp(let encoder): encoder.lossless ? nil : encoder.quality
        case .avif(let encoder): encoder.quality
        case .jxl(let encoder): encoder.quality
        }
    }

    /// The same format writing `exif` (a TIFF-structured block) into its files: JPEG,
    /// PNG and WebP; the other formats are returned as they are.
    public func with(exif: [UInt8]?) -> OutputFormat {
        switch self {
        case .jpeg(var encoder):
            encoder.exif = exif
            return .jpeg(encoder)
        case .png(var encoder):
            encoder.exif = exif
            return .png(encoder)
        case .webp(var encoder):
            encoder.exif = exif
            return .webp(encoder)
        default:
            return self
        }
    }

    /// The same format at another quality (formats without one are returned as they are).
    public func with(quality: Int) -> OutputFormat {
        switch self {
        case .automatic, .png, .gif, .ico, .bmp, .tiff: return self
        case .heic(var encoder):
            encoder.quality = quality
            return .heic(encoder)
        case .jpeg(var encoder):
            encoder.quality = quality
            return .jpeg(encoder)
        case .webp(var encoder):
            encoder.quality = quality
            return .webp(encoder)
        case .avif(var encoder):
            encoder.quality = quality
            return .avif(encoder)
        case .jxl(var encoder):
            encoder.quality = quality
            return .jxl(encoder)
        }
    }
}

/// Encoded bytes and what they are.
public struct EncodedImage: Sendable, Hashable, CustomStringConvertible {
    /// The encoded bytes.
    public let bytes: [UInt8]
    /// Their format.
    public let format: ImageFormat
    /// The image's width in pixels.
    public let width: Int
    /// The image's height in pixels.
    public let height: Int

    /// Bytes already encoded, with what they are.
    public init(bytes: [UInt8], format: ImageFormat, width: Int, height: Int) {
        self.bytes = bytes
        self.format = format
        self.width = width
        self.height = height
    }

    /// `image/jpeg` and so on.
    public var contentType: String { format.contentType }

    /// One line, without the bytes: `EncodedImage(jpeg 256x171, 9472 bytes)`.
    public var description: String { "EncodedImage(\(format.rawValue) \(width)x\(height), \(bytes.count) bytes)" }
}

extension RasterImage {
    /// This image's first frame written in `format`.
    ///
    /// ```swift
    /// let encoded = try image.encoded(as: .automatic())
    /// try Data(encoded.bytes).write(to: url)
    /// ```
    public func encoded(as format: OutputFormat) throws(ImageEncodingError) -> EncodedImage {
        let encoder = format.encoder(for: self)
        return EncodedImage(
            bytes: try encoder.encode(self, frame: 0), format: encoder.format, width: width, height: height)
    }

    /// This image written in `format`, every frame when it is animated and the format
    /// can animate (WebP, GIF), else its first frame.
    ///
    /// ```swift
    /// let animation = try gif.encodedKeepingAnimation(as: .webp(WebPEncoder(quality: 75)))
    /// ```
    public func encodedKeepingAnimation(as format: OutputFormat) throws(ImageEncodingError) -> EncodedImage {
        guard frames.count > 1 else { return try encoded(as: format) }
        switch format {
        case .webp(let encoder):
            return EncodedImage(bytes: try encoder.encodeAnimation(self), format: .webp, width: width, height: height)
        case .gif(let encoder):
            return EncodedImage(bytes: try encoder.encodeAnimation(self), format: .gif, width: width, height: height)
        default:
            return try encoded(as: format)
        }
    }
}
