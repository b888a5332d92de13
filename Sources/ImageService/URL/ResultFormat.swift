import RasterImage

/// An output format a processing URL can name (its extension, `@png`, or the `f`
/// option), and the configuration's formats: ``ImageService/Configuration/preferredFormats``
/// and ``ImageService/Configuration/formatQuality``.
///
/// ```swift
/// var configuration = ImageService.Configuration()
/// configuration.formatQuality[.webp] = 75
/// configuration.preferredFormats = [ResultFormat(name: "jpg")!, .png]
/// ```
public enum ResultFormat: String, Sendable, Hashable, CaseIterable {
    /// The encoders the service has, and `svg`: an SVG source passed through, sanitised.
    case jpeg, png, webp, avif, jxl, gif, heic, ico, bmp, tiff, svg

    /// The format by one of imgproxy's names for it (`jpg` and `jpeg` both name
    /// JPEG), `nil` for others.
    ///
    /// ```swift
    /// ResultFormat(name: "JPG")  // .jpeg
    /// ```
    public init?(name: String) {
        guard let format = ImageFormat(fileExtension: name) else { return nil }
        self.init(format)
    }
}

extension ImageFormat {
    /// A source format by the names imgproxy's `skp` option and `IMGPROXY_SKIP_PROCESSING_FORMATS`
    /// take: the same names a result format goes by (`jpg`, `heic`, `tiff`...); `nil` for others.
    package init?(imgproxyName name: String) {
        guard let format = ResultFormat(name: name) else { return nil }
        self = format.imageFormat
    }
}
