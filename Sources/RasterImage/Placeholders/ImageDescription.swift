import Foundation

/// What a page needs to know about an image before it shows it: the header's facts, the
/// colour profile's name, the photo's EXIF fields, its dominant colours and two
/// placeholders (BlurHash and ThumbHash) to show while it loads. Encodes as the JSON
/// `imageloader serve` answers at `/info` and `imageloader info --placeholders` prints.
///
/// ```swift
/// let description = try ImageDecoder().describe(bytes)
/// description.blurhash          // "LEHV6nWB2yk8pyo0adR*.7kCMdnj"
/// description.dominantColors    // ["#2b4a7c", "#e8d5b0", ...]
/// ```
public struct ImageDescription: Sendable, Hashable, Encodable {
    /// The format's name (`jpeg`, `png`, `heif`...).
    public let format: String
    /// Its media type.
    public let contentType: String
    /// The stored size (before ``orientation``), as the header says.
    public let width: Int
    public let height: Int
    /// Frames (1 for a still image) and whether any pixel is not opaque.
    public let frames: Int
    public let hasAlpha: Bool
    /// The EXIF orientation value, 1 to 8.
    public let orientation: Int
    /// The size of the file, in bytes.
    public let bytes: Int
    /// The embedded ICC profile's own name (``ICCDescription``), if it has one.
    public let colorProfile: String?
    /// EXIF's date, camera, lens and (when asked for) location.
    public let exif: PhotoMetadata?
    /// Up to ``DescriptionOptions/dominantColorCount`` colours, `#rrggbb`, the most common first.
    public let dominantColors: [String]
    /// The BlurHash of the image as shown (upright, over white where transparent).
    public let blurhash: String
    /// The ThumbHash of the image as shown, in base64.
    public let thumbhash: String
}

/// What ``ImageDecoding/describe(_:options:)`` includes.
public struct DescriptionOptions: Sendable, Hashable {
    /// The decoding limits; the placeholders come from a thumbnail within them.
    public var limits = DecodingLimits()
    /// BlurHash's components across and down, 1 to 9 each.
    public var blurHashComponents = (x: 4, y: 3)
    /// How many dominant colours, at most.
    public var dominantColorCount = 5
    /// Include the GPS position EXIF states. Off by default: a photo's location is
    /// personal data its uploader may not mean to publish.
    public var includesLocation = false

    /// BlurHash 4x3, five colours, no location.
    public init() {}

    public static func == (a: DescriptionOptions, b: DescriptionOptions) -> Bool {
        a.limits == b.limits && a.blurHashComponents == b.blurHashComponents
            && a.dominantColorCount == b.dominantColorCount && a.includesLocation == b.includesLocation
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(limits)
        hasher.combine(blurHashComponents.x)
        hasher.combine(blurHashComponents.y)
        hasher.combine(dominantColorCount)
        hasher.combine(includesLocation)
    }
}

extension ImageDecoding {
    /// The ``ImageDescription`` of the image in `bytes`: its header, the profile's name
    /// and the EXIF fields without decoding, then a thumbnail of at most 100 pixels a
    /// side (shrunk while loading) for the dominant colours and the placeholders.
    public func describe(_ bytes: [UInt8], options: DescriptionOptions = DescriptionOptions())
        throws(ImageDecodingError) -> ImageDescription
    {
        let info = try self.info(.bytes(bytes), options: DecodingOptions(limits: options.limits))
        var thumbnailOptions = ThumbnailOptions(maxPixelSize: 100)
        thumbnailOptions.shrinkOnLoad = .fastest
        let small = try thumbnail(.bytes(bytes), limits: options.limits, options: thumbnailOptions)
        var photo = PhotoMetadata(fileBytes: bytes)
        if !options.includesLocation {
            photo?.latitude = nil
            photo?.longitude = nil
        }
        return ImageDescription(
            format: info.format.rawValue, contentType: info.contentType, width: info.width, height: info.height,
            frames: info.frameCount, hasAlpha: info.hasAlpha, orientation: info.orientation.rawValue,
            bytes: bytes.count,
            colorProfile: info.iccProfile.flatMap { ICCDescription.name(of: $0) },
            exif: photo.flatMap { $0.isEmpty ? nil : $0 },
            dominantColors: small.dominantColors(count: options.dominantColorCount).map { "#" + $0.description },
            blurhash: small.blurHash(
                xComponents: options.blurHashComponents.x, yComponents: options.blurHashComponents.y),
            thumbhash: Data(small.thumbHash()).base64EncodedString())
    }
}
