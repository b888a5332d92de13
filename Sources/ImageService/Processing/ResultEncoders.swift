import RasterImage

/// The service's encoders: the encoder and quality for each result format (the URL's
/// quality, else ``ImageService/Configuration/formatQuality``, else
/// ``ImageService/Configuration/quality``), and imgproxy's `max_bytes` re-encoding.
struct ResultEncoders: Sendable {
    let quality: Int
    let formatQuality: [ResultFormat: Int]
    let pngCompressionLevel: Int

    init(_ configuration: ImageService.Configuration) {
        quality = configuration.quality
        formatQuality = configuration.formatQuality
        pngCompressionLevel = configuration.pngCompressionLevel
    }

    /// The encoder for `format`, with the URL's quality (`nil`: the service's for the
    /// format, else its common one), keeping the colour profile or not.
    ///
    /// A grey source (`grey`) gives grey JPEG and PNG results when they are still grey
    /// after processing (no coloured background, padding or watermark), as imgproxy
    /// keeps the source's colourspace.
    func output(_ format: ResultFormat, quality: Int?, keepsProfile: Bool, grey: Bool = false) -> OutputFormat {
        let quality = quality ?? formatQuality[format] ?? self.quality
        switch format {
        case .jpeg:
            var encoder = JPEGEncoder(quality: quality, includeICCProfile: keepsProfile)
            encoder.grayscale = grey
            return .jpeg(encoder)
        case .png:
            var encoder = PNGEncoder(compressionLevel: pngCompressionLevel, includeICCProfile: keepsProfile)
            encoder.grayscale = grey
            return .png(encoder)
        case .ico: return .ico(ICOEncoder(png: PNGEncoder(compressionLevel: pngCompressionLevel)))
        case .webp: return .webp(WebPEncoder(quality: quality, includeICCProfile: keepsProfile))
        case .avif: return .avif(AVIFEncoder(quality: quality, includeICCProfile: keepsProfile))
        case .jxl: return .jxl(JXLEncoder(quality: quality, includeICCProfile: keepsProfile))
        case .gif: return .gif(GIFEncoder())
        case .heic: return .heic(HEIFEncoder(quality: quality, includeICCProfile: keepsProfile))
        case .bmp: return .bmp(BMPEncoder())
        case .tiff: return .tiff(TIFFEncoder(includeICCProfile: keepsProfile))
        // SVG results are passed through before any encoder is chosen; a raster source
        // asking for one is refused then (422).
        case .svg: return .png(PNGEncoder(includeICCProfile: keepsProfile))
        }
    }

    /// `image` encoded; with `maxBytes` above 0 and a lossy format, encoded again at lower
    /// qualities until it fits, as imgproxy's `max_bytes` does: each try's quality is the
    /// last one times 0.25, 0.5 or 0.75 by how far over the size it was, down to 10 at
    /// the least (about eight tries from 100); the last try is sent when none fits.
    static func encode(_ image: RasterImage, as output: OutputFormat, maxBytes: Int) throws -> [UInt8] {
        var output = output
        while true {
            let bytes = try image.encodedKeepingAnimation(as: output).bytes
            guard maxBytes > 0, bytes.count > maxBytes, let quality = output.quality, quality > 10 else {
                return bytes
            }
            let over = Double(bytes.count) / Double(maxBytes)
            let factor = over > 3 ? 0.25 : over > 1.5 ? 0.5 : 0.75
            output = output.with(quality: max(1, min(quality - 1, ImgproxyGeometry.scale(quality, factor))))
        }
    }
}
