import RasterImage

// The names the caches file thumbnails under. They belong to the caches, not to the
// codec library: RasterImage knows nothing about caches.

extension ThumbnailOptions {
    /// A stable text naming everything that shapes the thumbnail's pixels and its
    /// encoding (not the limits): equal names, equal thumbnails. The disk cache files
    /// thumbnails under it; the memory cache compares the same fields as values
    /// (``makesSameThumbnail(as:)``).
    ///
    /// ```swift
    /// ThumbnailOptions(maxPixelSize: 256).storageName   // "256x256,fit,lanczos3,quality,srgb,convert,upright,first,auto85"
    /// ```
    var storageName: String {
        var key = ""
        key.reserveCapacity(80)
        key += "\(width)x\(height),"
        key += fit.rawValue
        // The centre is left out, so the keys of thumbnails made before gravity stay the same.
        if gravity != .center && fit == .fill {
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
        // Left out when off, so earlier keys stay the same.
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
    /// Whether `self` and `other` make the same thumbnail: what ``storageName`` names,
    /// compared as values (the memory cache's keys; no text is made).
    func makesSameThumbnail(as other: ThumbnailOptions) -> Bool {
        width == other.width && height == other.height && fit == other.fit
            && (fit != .fill || gravity == other.gravity) && allowsUpscaling == other.allowsUpscaling
            && kernel == other.kernel && shrinkOnLoad == other.shrinkOnLoad && linearLight == other.linearLight
            && keepsColorProfile == other.keepsColorProfile && appliesOrientation == other.appliesOrientation
            && usesEmbeddedThumbnail == other.usesEmbeddedThumbnail && frames == other.frames
            && outputFormat == other.outputFormat
    }

    /// Hashes what ``makesSameThumbnail(as:)`` compares.
    func hashThumbnail(into hasher: inout Hasher) {
        hasher.combine(width)
        hasher.combine(height)
        hasher.combine(fit)
        if fit == .fill { hasher.combine(gravity) }
        hasher.combine(allowsUpscaling)
        hasher.combine(kernel)
        hasher.combine(shrinkOnLoad)
        hasher.combine(linearLight)
        hasher.combine(keepsColorProfile)
        hasher.combine(appliesOrientation)
        hasher.combine(usesEmbeddedThumbnail)
        hasher.combine(frames)
        hasher.combine(outputFormat)
    }
}

extension OutputFormat {
    /// A stable text naming the format and every setting of its encoder.
    var storageName: String {
        switch self {
        case .automatic(let quality): "auto\(quality)"
        case .png(let e):
            "png\(e.compressionLevel)\(e.alwaysIncludeAlpha ? "a" : "")\(e.includeICCProfile ? "i" : "")"
                + OutputFormat.exifKey(e.exif)
        case .jpeg(let e):
            "jpeg\(e.quality)\(e.progressive ? "p" : "")\(e.optimizeHuffmanTables ? "o" : "")s\(e.chromaSubsampling.rawValue)"
                + "\(e.includeICCProfile ? "i" : "")bg\(e.background.0).\(e.background.1).\(e.background.2)"
                + OutputFormat.exifKey(e.exif)
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
