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
    /// HEIF (High Efficiency Image File Format), HEIC (HEVC-coded HEIF, what iPhones
    /// save) among them, decoded by libheif.
    case heif
    /// AVIF (AV1-coded HEIF), still or animated, decoded by libavif.
    case avif
    /// JPEG XL, codestream or container, still or animated, decoded by libjxl.
    case jxl
    /// Windows icon: a directory of PNG or bitmap images, the largest (or the one a
    /// thumbnail needs) decoded.
    case ico
    /// Scalable Vector Graphics, sanitised and rendered by librsvg.
    case svg

    /// What the library knows of one format, in one entry: adding a format is a case,
    /// its entry in ``traits``, its codec, and (when it can be written) its encoder in
    /// ``OutputFormat/init(_:quality:)``. Names, media types, extensions, what can be
    /// written and the lists in help texts and errors all derive from it.
    public struct Traits: Sendable, Hashable {
        /// The name people write: "JPEG XL".
        public let displayName: String
        /// The media types that name the format, the registered one first (`image/jpg`
        /// is common for JPEG, though not registered).
        public let contentTypes: [String]
        /// File name extensions, the usual one first.
        public let fileExtensions: [String]
        /// Whether the library writes it (an ``OutputFormat``).
        public let isWritable: Bool
        /// Whether what the library writes may be animated.
        public let writesAnimation: Bool
        /// Whether what the library writes keeps transparency.
        public let writesAlpha: Bool
        /// The longest side the library writes in it (WebP 16383, HEIC 16384, ICO 256).
        public let maxWrittenSide: Int
    }

    /// This format's entry: the one place a format's facts are written.
    ///
    /// ```swift
    /// ImageFormat.jxl.traits.fileExtensions   // ["jxl"]
    /// ImageFormat.svg.traits.isWritable        // false
    /// ```
    public var traits: Traits {
        func entry(
            _ name: String, _ types: [String], _ extensions: [String], writes: Bool = true, animates: Bool = false,
            alpha: Bool = true, maxSide: Int = .max
        ) -> Traits {
            Traits(
                displayName: name, contentTypes: types, fileExtensions: extensions, isWritable: writes,
                writesAnimation: animates, writesAlpha: alpha, maxWrittenSide: maxSide)
        }
        return switch self {
        case .png: entry("PNG", ["image/png"], ["png"])
        case .jpeg: entry("JPEG", ["image/jpeg", "image/jpg", "image/pjpeg"], ["jpg", "jpeg"], alpha: false)
        case .gif: entry("GIF", ["image/gif"], ["gif"], animates: true)
        case .tiff: entry("TIFF", ["image/tiff"], ["tiff", "tif"])
        case .webp: entry("WebP", ["image/webp"], ["webp"], animates: true, maxSide: 16_383)
        case .bmp: entry("BMP", ["image/bmp", "image/x-bmp", "image/x-ms-bmp"], ["bmp"])
        case .heif:
            entry(
                "HEIF", ["image/heif", "image/heic", "image/heif-sequence", "image/heic-sequence"], ["heic", "heif"],
                maxSide: 16_384)
        case .avif: entry("AVIF", ["image/avif"], ["avif"])
        case .jxl: entry("JPEG XL", ["image/jxl"], ["jxl"])
        case .ico:
            entry(
                "ICO", ["image/x-icon", "image/vnd.microsoft.icon", "image/ico", "image/icon"], ["ico"],
                maxSide: ICOEncoder.maxSide)
        case .svg: entry("SVG", ["image/svg+xml"], ["svg"], writes: false)
        }
    }

    /// The name people write: PNG, JPEG, GIF, TIFF, WebP, BMP, HEIF, AVIF, JPEG XL, ICO, SVG.
    public var displayName: String { traits.displayName }

    /// The registered media type: `image/png`, `image/jpeg`, ...
    public var contentType: String { traits.contentTypes[0] }

    /// The media types that name this format, the registered one first.
    public var contentTypeAliases: [String] { traits.contentTypes }

    /// The usual file name extension: `jpg`, `png`, `heic`, `tiff`...
    public var fileExtension: String { traits.fileExtensions[0] }

    /// The format a file name extension names, ignoring case (`"JPG"` is ``jpeg``), or `nil`.
    public init?(fileExtension: String) {
        let name = fileExtension.lowercased()
        guard let format = ImageFormat.allCases.first(where: { $0.traits.fileExtensions.contains(name) }) else {
            return nil
        }
        self = format
    }

    /// The formats the library writes, in declaration order.
    public static var writable: [ImageFormat] { allCases.filter(\.traits.isWritable) }

    /// Names in a list for people: "PNG, JPEG or GIF" (`conjunction` joins the last two).
    public static func list(_ names: [String], conjunction: String = "or") -> String {
        guard let last = names.last else { return "" }
        return names.count == 1 ? last : names.dropLast().joined(separator: ", ") + " \(conjunction) " + last
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

    /// How many leading bytes ``sniff(_:)`` looks at for a binary format's signature.
    public static let sniffLength = 64

    /// How many leading bytes ``sniff(_:)`` reads for SVG's root element, past an XML
    /// declaration, comments and a document type (imgproxy's `IMGPROXY_MAX_SVG_CHECK_BYTES`).
    public static let svgCheckLength = 32 << 10

    /// The format the bytes are in, judged from their signature only (for SVG: an
    /// `svg` root element within the first ``svgCheckLength`` bytes), or `nil`.
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
        if let brandFormat = ImageFormat.sniffBrands(b) { return brandFormat }
        // JPEG XL: a bare codestream, or the ISO container's signature box.
        if starts([0xFF, 0x0A]) || starts([0, 0, 0, 0x0C, 0x4A, 0x58, 0x4C, 0x20, 0x0D, 0x0A, 0x87, 0x0A]) {
            return .jxl
        }
        // "BM" alone is too weak a signature; the DIB header size must be one that exists.
        if starts([0x42, 0x4D]) && b.count >= 18 {
            let headerSize = UInt32(b[14]) | UInt32(b[15]) << 8 | UInt32(b[16]) << 16 | UInt32(b[17]) << 24
            if BMPDecoder.knownHeaderSizes.contains(headerSize) { return .bmp }
        }
        if ICODecoder.sniff(b) { return .ico }
        if SVGSniffer.isSVG(bytes.prefix(svgCheckLength)) { return .svg }
        return nil
    }

    /// HEIF and AVIF from the `ftyp` box's brands: the major brand when it names one,
    /// else the compatible brands read (an AVIF brand wins over a HEVC one, a file
    /// whose brands are only the generic `mif1`/`msf1` is HEIF, left to libheif).
    private static func sniffBrands(_ b: [UInt8]) -> ImageFormat? {
        guard b.count >= 12, b[4] == 0x66, b[5] == 0x74, b[6] == 0x79, b[7] == 0x70 else { return nil }
        let boxSize = Int(b[0]) << 24 | Int(b[1]) << 16 | Int(b[2]) << 8 | Int(b[3])
        guard boxSize >= 12 else { return nil }
        func brand(_ offset: Int) -> String { String(decoding: b[offset..<offset + 4], as: UTF8.self) }
        let avif: Set = ["avif", "avis"]
        let hevc: Set = ["heic", "heix", "heim", "heis", "hevc", "hevx"]
        let generic: Set = ["mif1", "msf1"]
        let major = brand(8)
        if avif.contains(major) { return .avif }
        if hevc.contains(major) { return .heif }
        // Compatible brands from offset 16, as far as the box and the sniffed bytes go.
        var compatible: [String] = []
        var offset = 16
        while offset + 4 <= min(boxSize, b.count) {
            compatible.append(brand(offset))
            offset += 4
        }
        if compatible.contains(where: avif.contains) { return .avif }
        if compatible.contains(where: hevc.contains) || generic.contains(major)
            || compatible.contains(where: generic.contains)
        {
            return .heif
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
