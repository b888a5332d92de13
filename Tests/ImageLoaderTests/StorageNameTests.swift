import Foundation
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

    @Test("cache keys compare as values exactly as their storage names compare as text")
    func keysAgreeWithNames() throws {
        let base = ThumbnailOptions(maxPixelSize: 256)
        let changes: [(inout ThumbnailOptions) -> Void] = [
            { _ in }, { $0.width = 128 }, { $0.height = 100 }, { $0.fit = .fill }, { $0.fit = .force },
            { $0.gravity = .north }, { $0.allowsUpscaling = true }, { $0.kernel = .mitchell },
            { $0.shrinkOnLoad = .fastest }, { $0.linearLight = true }, { $0.keepsColorProfile = true },
            { $0.appliesOrientation = false }, { $0.frames = .all }, { $0.frames = .prefix(3) },
            { $0.usesEmbeddedThumbnail = true }, { $0.outputFormat = .png(PNGEncoder()) },
            { $0.outputFormat = .jpeg(JPEGEncoder(quality: 85, progressive: true)) },
            { $0.limits.maxPixelsPerFrame = 1_000 }, { $0.limits.maxTotalBytes = 1 << 20 },
        ]
        // Every pair of one or two changes: gravity counts only for fill, limits never.
        var variants: [ThumbnailOptions] = []
        for first in changes {
            for second in changes {
                var options = base
                first(&options)
                second(&options)
                variants.append(options)
            }
        }
        let urls = [URL(string: "https://example.com/a.jpg")!, URL(string: "https://example.com/b.jpg")!]
        var keys: [CacheKey] = urls.map { CacheKey(url: $0, product: .original) }
        for url in urls { keys += variants.map { CacheKey(url: url, product: .thumbnail($0)) } }
        for a in keys {
            for b in keys {
                #expect((a == b) == (a.storageName == b.storageName), "\(a.storageName) \(b.storageName)")
                if a == b { #expect(a.hashValue == b.hashValue) }
            }
        }
        // A URL relative to a base is the URL it resolves to.
        let relative = try #require(URL(string: "a.jpg", relativeTo: URL(string: "https://example.com/")))
        #expect(CacheKey(url: relative, product: .original) == keys[0])
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
