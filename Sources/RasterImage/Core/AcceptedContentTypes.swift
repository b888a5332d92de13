/// Why bytes were refused by ``AcceptedContentTypes/validate(_:declaredContentType:)``.
public enum ContentTypeError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The bytes are not in any format RasterImage knows.
    case unrecognizedFormat
    /// The type (declared, or detected when none was declared) is not on the accepted list.
    case notAccepted(contentType: String)
    /// The declared type names another format than the bytes are in.
    case mismatch(declared: String, detected: ImageFormat)

    /// The error in words.
    public var description: String {
        switch self {
        case .unrecognizedFormat: "not a recognised image format"
        case .notAccepted(let type): "content type \(type) is not accepted"
        case .mismatch(let declared, let detected):
            "declared as \(declared) but the bytes are \(detected.contentType)"
        }
    }
}

/// The media types a caller accepts, and the check that bytes really are one of them.
///
/// The format is always judged from the bytes; a declared type (an HTTP
/// `Content-Type`, an upload's type) must be accepted and must name that same format.
///
/// ```swift
/// let accepted = AcceptedContentTypes.default
/// let format = try accepted.validate(body, declaredContentType: "image/jpg")   // .jpeg
/// try AcceptedContentTypes(["image/png"]).validate(gifBytes, declaredContentType: nil)
/// // throws ContentTypeError.notAccepted(contentType: "image/gif")
/// ```
public struct AcceptedContentTypes: Sendable, Hashable {
    /// Lowercased media types without parameters.
    public let types: Set<String>

    /// The classic loaders' list plus WebP, HEIF/HEIC, AVIF, JPEG XL, ICO and SVG
    /// (sanitised before it is rendered): image/png, image/jpg, image/jpeg, image/bmp,
    /// image/gif, image/tiff, image/webp, image/heic, image/heif, image/heic-sequence,
    /// image/heif-sequence, image/avif, image/jxl, image/x-icon,
    /// image/vnd.microsoft.icon, image/svg+xml.
    public static let `default` = AcceptedContentTypes([
        "image/png", "image/jpg", "image/jpeg", "image/bmp", "image/gif", "image/tiff", "image/webp",
        "image/heic", "image/heif", "image/heic-sequence", "image/heif-sequence", "image/avif", "image/jxl",
        "image/x-icon", "image/vnd.microsoft.icon", "image/svg+xml",
    ])

    /// Accepts `types` (MIME types, any case, parameters ignored).
    ///
    /// ```swift
    /// let accepted = AcceptedContentTypes(["image/png", "image/jpeg"])
    /// ```
    public init(_ types: some Sequence<String>) {
        self.types = Set(types.map(ImageFormat.normalize(contentType:)))
    }

    /// Whether a media type is on the list (parameters and case ignored).
    public func accepts(_ contentType: String) -> Bool {
        types.contains(ImageFormat.normalize(contentType: contentType))
    }

    /// Whether some name of `format` is on the list (`image/jpg` accepts JPEG).
    public func accepts(_ format: ImageFormat) -> Bool {
        format.contentTypeAliases.contains(where: types.contains)
    }

    /// Checks the bytes' format, and the declared type when there is one; returns the format.
    ///
    /// Only the first ``ImageFormat/sniffLength`` bytes are looked at; this does not
    /// decode. Decode as well to know that the whole image is sound.
    public func validate(
        _ bytes: some Collection<UInt8>, declaredContentType: String?
    ) throws(ContentTypeError) -> ImageFormat {
        guard let detected = ImageFormat.sniff(bytes) else { throw .unrecognizedFormat }
        if let declared = declaredContentType {
            let normalized = ImageFormat.normalize(contentType: declared)
            guard accepts(normalized) else { throw .notAccepted(contentType: normalized) }
            guard ImageFormat(contentType: normalized) == detected else {
                throw .mismatch(declared: normalized, detected: detected)
            }
        }
        guard accepts(detected) else { throw .notAccepted(contentType: detected.contentType) }
        return detected
    }
}
