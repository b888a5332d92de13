/// The image formats RasterImage decodes, recognised by their bytes.
public enum ImageFormat: String, Sendable, Hashable, CaseIterable, Codable {
    /// Portable Network Graphics.
    case png
    /// JPEG (JFIF, EXIF).
    case jpeg
    /// Graphics Interchange Format, still or animated.
    case gif
    /// Tagged Image File Format.
    case tiff
    /// WebP, lossy or lossless, still or animated.
    case webp
    /// Windows bitmap.
    case bmp

    /// The name people write: PNG, JPEG, GIF, TIFF, WebP, BMP.
    public var displayName: String {
        self == .webp ? "WebP" : rawValue.uppercased()
    }

    /// The registered media type: `image/png`, `image/jpeg`, ...
    public var contentType: String {
        switch self {
        case .png: "image/png"
        case .jpeg: "image/jpeg"
        case .gif: "image/gif"
        case .tiff: "image/tiff"
        case .webp: "image/webp"
        case .bmp: "image/bmp"
        }
    }

    /// The media types that name this format, the registered one first
    /// (`image/jpg` is common for JPEG, though not registered).
    public var contentTypeAliases: [String] {
        switch self {
        case .jpeg: ["image/jpeg", "image/jpg", "image/pjpeg"]
        case .bmp: ["image/bmp", "image/x-bmp", "image/x-ms-bmp"]
        default: [contentType]
        }
    }

    /// The format a media type names, ignoring case and parameters
    /// (`"image/JPEG; charset=binary"` is ``jpeg``), or `nil`.
    public init?(contentType: String) {
        let type = ImageFormat.normalize(contentType: contentType)
        guard let format = ImageFormat.allCases.first(where: { $0.contentTypeAliases.contains(type) }) else {
            return nil
        }
        self = format
    }

    /// A media type without parameters or surrounding spaces, lowercased.
    static func normalize(contentType: String) -> String {
        let essence = contentType.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        return essence.trimmingASCIISpaces().lowercased()
    }

    /// How many leading bytes ``sniff(_:)`` looks at.
    public static let sniffLength = 32

    /// The format the bytes are in, judged from their signature only, or `nil`.
    ///
    /// ```swift
    /// ImageFormat.sniff([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])   // .png
    /// ```
    public static func sniff(_ bytes: some Collection<UInt8>) -> ImageFormat? {
        let b = Array(bytes.prefix(sniffLength))
        func starts(_ prefix: [UInt8], at offset: Int = 0) -> Bool {
            b.count >= offset + prefix.count && Array(b[offset..<offset + prefix.count]) == prefix
        }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        if starts([0xFF, 0xD8, 0xFF]) { return .jpeg }
        if starts(Array("GIF87a".utf8)) || starts(Array("GIF89a".utf8)) { return .gif }
        if starts([0x49, 0x49, 0x2A, 0x00]) || starts([0x4D, 0x4D, 0x00, 0x2A])
            || starts([0x49, 0x49, 0x2B, 0x00]) || starts([0x4D, 0x4D, 0x00, 0x2B])
        {
            return .tiff
        }
        if starts(Array("RIFF".utf8)) && starts(Array("WEBP".utf8), at: 8) { return .webp }
        // "BM" alone is too weak a signature; the DIB header size must be one that exists.
        if starts([0x42, 0x4D]) && b.count >= 18 {
            let headerSize = UInt32(b[14]) | UInt32(b[15]) << 8 | UInt32(b[16]) << 16 | UInt32(b[17]) << 24
            if BMPDecoder.knownHeaderSizes.contains(headerSize) { return .bmp }
        }
        return nil
    }
}

extension StringProtocol {
    func trimmingASCIISpaces() -> String {
        var scalars = Substring(self).unicodeScalars[...]
        while let first = scalars.first, first == " " || first == "\t" { scalars.removeFirst() }
        while let last = scalars.last, last == " " || last == "\t" { scalars.removeLast() }
        return String(scalars)
    }
}
