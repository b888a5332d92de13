import RasterImage
import Testing

@testable import ImageLoader

/// The names the caches file thumbnails under (`ThumbnailOptions.storageName`): on
/// disk they are file names, so they must not change between versions, and they must
/// tell apart every setting that shapes the result, and only those.
@Suite("Storage names of thumbnails")
struct StorageNameTests {
    @Test("the name covers every setting that shapes the result, and only those")
    func everySetting() {
        let base = ThumbnailOptions(maxPixelSize: 256)
        // Stored on disk under this text: it must not change between versions.
        #expect(base.storageName == "256x256,fit,lanczos3,quality,srgb,convert,upright,first,auto85")
        let variants: [(inout ThumbnailOptions) -> Void] = [
            { $0.width = 128 }, { $0.height = 128 }, { $0.fit = .fill }, { $0.allowsUpscaling = true },
            { $0.kernel = .mitchell }, { $0.shrinkOnLoad = .fastest }, { $0.linearLight = true },
            { $0.keepsColorProfile = true }, { $0.appliesOrientation = false }, { $0.frames = .all },
            { $0.frames = .index(2) }, { $0.outputFormat = .automatic(quality: 70) },
            { $0.outputFormat = .png(PNGEncoder()) }, { $0.outputFormat = .jpeg(JPEGEncoder(quality: 85)) },
            { $0.outputFormat = .jpeg(JPEGEncoder(quality: 85, progressive: true)) },
            { $0.outputFormat = .webp(WebPEncoder()) }, { $0.outputFormat = .webp(WebPEncoder(lossless: true)) },
            { $0.outputFormat = .heic(HEIFEncoder()) }, { $0.outputFormat = .ico(ICOEncoder()) },
            { $0.outputFormat = .bmp(BMPEncoder()) }, { $0.outputFormat = .tiff(TIFFEncoder()) },
            { $0.usesEmbeddedThumbnail = true },
        ]
        var names: Set<String> = [base.storageName]
        for change in variants {
            var options = base
            change(&options)
            names.insert(options.storageName)
        }
        #expect(names.count == variants.count + 1)
        var limited = base
        limited.limits.maxPixelsPerFrame = 1_000
        #expect(limited.storageName == base.storageName)
    }

    @Test("gravity and force name their thumbnails apart; the centre keeps the old name")
    func gravity() {
        var options = ThumbnailOptions(width: 64, height: 64, fit: .fill)
        let centre = options.storageName
        #expect(centre == "64x64,fill,lanczos3,quality,srgb,convert,upright,first,auto85")
        options.gravity = .north
        #expect(options.storageName != centre)
        #expect(ThumbnailOptions(width: 64, height: 64, fit: .force).storageName != centre)
    }
}
