import ImageLoaderSupport
import RasterImage

// The names the caches file thumbnails under. They belong to the caches, not to the
// codec library: RasterImage knows nothing about caches.

/// Everything that shapes a thumbnail's pixels and its encoding, and nothing else: the
/// one list of a thumbnail's identity (every field of ``ThumbnailOptions``). The
/// memory cache's equality and hash are this value's own (synthesised from its fields),
/// and the disk cache's name is written from the same fields, so a setting cannot count
/// for one cache and not the other. StorageNameTests fails when ThumbnailOptions or an
/// encoder gains a field that is not here.
struct ThumbnailIdentity: Hashable {
    let width: Int
    let height: Int
    let fit: ThumbnailOptions.Fit
    /// The centre unless the fit is `.fill`: gravity shapes only a crop.
    let gravity: ThumbnailOptions.Gravity
    let allowsUpscaling: Bool
    let kernel: ResamplingKernel
    let shrinkOnLoad: ThumbnailOptions.ShrinkOnLoad
    let linearLight: Bool
    let keepsColorProfile: Bool
    let appliesOrientation: Bool
    let usesEmbeddedThumbnail: Bool
    let frames: FrameSelection
    let outputFormat: OutputFormat

    init(_ options: ThumbnailOptions) {
        width = options.width
        height = options.height
        fit = options.fit
        gravity = options.fit == .fill ? options.gravity : .center
        allowsUpscaling = options.allowsUpscaling
        kernel = options.kernel
        shrinkOnLoad = options.shrinkOnLoad
        linearLight = options.linearLight
        keepsColorProfile = options.keepsColorProfile
        appliesOrientation = options.appliesOrientation
        usesEmbeddedThumbnail = options.usesEmbeddedThumbnail
        frames = options.frames
        outputFormat = options.outputFormat
    }

    /// A stable text naming the identity: equal names, equal thumbnails. The disk cache
    /// files thumbnails under it; its form is kept from version to version (settings
    /// added later appear only when they differ from their defaults), so stored
    /// thumbnails stay valid.
    var storageName: String {
        var key = ""
        key.reserveCapacity(80)
        key += "\(width)x\(height),"
        key += fit.rawValue
        // The centre is left out, so the keys of thumbnails made before gravity stay the same.
        if gravity != .center {
            key += "@"
            key += gravity.rawValue
        }
        key += allowsUpscaling ? "+up," : ","
        key += kernel.rawValue
        key += ","
        key += shrinkOnLoad.rawValue
        key += linearLight ? ",linear" : ",srgb"
        key += keepsColorProfile ? ",keep" : ",convert"
        key += appliesOrientation ? ",upright," : ",stored,"
        if usesEmbeddedThumbnail { key += "embedded," }
        switch frames {
        case .first: key += "first,"
        case .all: key += "all,"
        case .index(let n): key += "frame\(n),"
        case .prefix(let n): key += "first\(n),"
        }
        key += outputFormat.storageName
        return key
    }
}

extension ThumbnailOptions {
    /// The options' ``ThumbnailIdentity``.
    var identity: ThumbnailIdentity { ThumbnailIdentity(self) }

    /// The name the disk cache files the thumbnail under (``ThumbnailIdentity/storageName``).
    ///
    /// ```swift
    /// ThumbnailOptions(maxPixelSize: 256).storageName   // "256x256,fit,lanczos3,quality,srgb,convert,upright,first,auto85"
    /// ```
    var storageName: String { identity.storageName }
}

extension OutputFormat {
    /// A stable text naming the format and every setting of its encoder (settings added
    /// later only when they differ from their defaults, so stored names stay the same).
    var storageName: String {
        switch self {
        case .automatic(let quality): "auto\(quality)"
        case .png(let e):
            "png\(e.compressionLevel)\(e.alwaysIncludeAlpha ? "a" : "")\(e.includeICCProfile ? "i" : "")"
                + OutputFormat.exifKey(e.exif) + (e.grayscale ? "g" : "")
        case .jpeg(let e):
            "jpeg\(e.quality)\(e.progressive ? "p" : "")\(e.optimizeHuffmanTables ? "o" : "")s\(e.chromaSubsampling.rawValue)"
                + "\(e.includeICCProfile ? "i" : "")bg\(e.background.0).\(e.background.1).\(e.background.2)"
                + OutputFormat.exifKey(e.exif) + (e.grayscale ? "g" : "")
        case .webp(let e):
            "webp\(e.quality)\(e.lossless ? "l" : "")m\(e.method)\(e.includeICCProfile ? "i" : "")"
                + OutputFormat.exifKey(e.exif)
        case .avif(let e): "avif\(e.quality)\(e.lossless ? "l" : "")s\(e.speed)\(e.includeICCProfile ? "i" : "")"
        case .jxl(let e): "jxl\(e.quality)e\(e.effort)\(e.includeICCProfile ? "i" : "")"
        case .gif: "gif"
        case .heic(let e): "heic\(e.quality)\(e.preset)\(e.includeICCProfile ? "i" : "")"
        case .ico(let e): "ico" + OutputFormat.png(e.png).storageName
        case .bmp: "bmp"
        case .tiff(let e): "tiff\(e.includeICCProfile ? "i" : "")"
        }
    }

    /// The EXIF block's size and CRC32C: the same in every process.
    private static func exifKey(_ exif: [UInt8]?) -> String {
        guard let exif else { return "" }
        return "x\(exif.count).\(String(CRC32C.checksum(exif), radix: 16))"
    }
}
