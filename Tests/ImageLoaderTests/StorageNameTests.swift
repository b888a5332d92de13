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
        ]
        // Every pair of one or two changes: gravity counts only for fill.
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

    @Test("the identity holds every field of the options, and each of its fields names thumbnails apart")
    func identityIsEveryField() {
        let base = ThumbnailOptions(width: 64, height: 48, fit: .fill)
        // A field added to ThumbnailOptions fails here until the identity holds it.
        let fields = Set(Mirror(reflecting: base).children.compactMap(\.label))
        let identity = Set(Mirror(reflecting: base.identity).children.compactMap(\.label))
        #expect(fields == identity)
        // And each of the identity's fields changes the name (a field without a change here fails).
        let changes: [String: (inout ThumbnailOptions) -> Void] = [
            "width": { $0.width = 65 }, "height": { $0.height = 49 }, "fit": { $0.fit = .force },
            "gravity": { $0.gravity = .south }, "allowsUpscaling": { $0.allowsUpscaling = true },
            "kernel": { $0.kernel = .mitchell }, "shrinkOnLoad": { $0.shrinkOnLoad = .fastest },
            "linearLight": { $0.linearLight = true }, "keepsColorProfile": { $0.keepsColorProfile = true },
            "appliesOrientation": { $0.appliesOrientation = false },
            "usesEmbeddedThumbnail": { $0.usesEmbeddedThumbnail = true }, "frames": { $0.frames = .all },
            "outputFormat": { $0.outputFormat = .png(PNGEncoder()) },
        ]
        #expect(Set(changes.keys) == identity)
        for (field, change) in changes {
            var options = base
            change(&options)
            #expect(options.storageName != base.storageName, "\(field)")
            #expect(options.identity != base.identity, "\(field)")
        }
    }

    @Test("every setting of every encoder names its thumbnails apart, as it sets their equality apart")
    func everyEncoderSetting() {
        // Per encoder: its default, and for each of its stored fields (by Mirror) the encoder
        // with that field changed. An encoder gaining a field fails until it is listed here
        // and its storage name tells it apart.
        let exif: [UInt8] = [0x4D, 0x4D, 0, 42, 0, 0, 0, 8, 0, 0]
        func changed<Encoder>(_ encoder: Encoder, _ change: (inout Encoder) -> Void) -> Encoder {
            var encoder = encoder
            change(&encoder)
            return encoder
        }
        func png(_ change: (inout PNGEncoder) -> Void) -> PNGEncoder { changed(PNGEncoder(), change) }
        func jpeg(_ change: (inout JPEGEncoder) -> Void) -> OutputFormat { .jpeg(changed(JPEGEncoder(), change)) }
        func webp(_ change: (inout WebPEncoder) -> Void) -> OutputFormat { .webp(changed(WebPEncoder(), change)) }
        func avif(_ change: (inout AVIFEncoder) -> Void) -> OutputFormat { .avif(changed(AVIFEncoder(), change)) }
        func jxl(_ change: (inout JXLEncoder) -> Void) -> OutputFormat { .jxl(changed(JXLEncoder(), change)) }
        func heic(_ change: (inout HEIFEncoder) -> Void) -> OutputFormat { .heic(changed(HEIFEncoder(), change)) }
        let pngChanges: [String: PNGEncoder] = [
            "compressionLevel": png { $0.compressionLevel = 1 },
            "alwaysIncludeAlpha": png { $0.alwaysIncludeAlpha = true },
            "includeICCProfile": png { $0.includeICCProfile.toggle() }, "exif": png { $0.exif = exif },
            "grayscale": png { $0.grayscale = true },
        ]
        let table: [(OutputFormat, Any, [String: OutputFormat])] = [
            (.png(PNGEncoder()), PNGEncoder(), pngChanges.mapValues { .png($0) }),
            (.ico(ICOEncoder()), ICOEncoder(), ["png": .ico(ICOEncoder(png: png { $0.grayscale = true }))]),
            (
                jpeg { _ in }, JPEGEncoder(),
                [
                    "quality": jpeg { $0.quality = 70 }, "progressive": jpeg { $0.progressive.toggle() },
                    "optimizeHuffmanTables": jpeg { $0.optimizeHuffmanTables.toggle() },
                    "chromaSubsampling": jpeg { $0.chromaSubsampling = .none },
                    "includeICCProfile": jpeg { $0.includeICCProfile.toggle() },
                    "backgroundColor": jpeg { $0.background = (0, 0, 0) }, "exif": jpeg { $0.exif = exif },
                    "grayscale": jpeg { $0.grayscale = true },
                ]
            ),
            (
                webp { _ in }, WebPEncoder(),
                [
                    "quality": webp { $0.quality = 30 }, "lossless": webp { $0.lossless.toggle() },
                    "method": webp { $0.method = 6 }, "includeICCProfile": webp { $0.includeICCProfile.toggle() },
                    "exif": webp { $0.exif = exif },
                ]
            ),
            (
                avif { _ in }, AVIFEncoder(),
                [
                    "quality": avif { $0.quality = 30 }, "speed": avif { $0.speed = 2 },
                    "lossless": avif { $0.lossless.toggle() },
                    "includeICCProfile": avif { $0.includeICCProfile.toggle() },
                ]
            ),
            (
                jxl { _ in }, JXLEncoder(),
                [
                    "quality": jxl { $0.quality = 30 }, "effort": jxl { $0.effort = 3 },
                    "includeICCProfile": jxl { $0.includeICCProfile.toggle() },
                ]
            ),
            (
                heic { _ in }, HEIFEncoder(),
                [
                    "quality": heic { $0.quality = 30 }, "preset": heic { $0.preset = "slow" },
                    "includeICCProfile": heic { $0.includeICCProfile.toggle() },
                ]
            ),
            (.gif(GIFEncoder()), GIFEncoder(), [:]),
            (.bmp(BMPEncoder()), BMPEncoder(), [:]),
            (.tiff(TIFFEncoder()), TIFFEncoder(), ["includeICCProfile": .tiff(TIFFEncoder(includeICCProfile: false))]),
        ]
        for (base, encoder, changes) in table {
            let fields = Set(Mirror(reflecting: encoder).children.compactMap(\.label))
            #expect(Set(changes.keys) == fields, "\(type(of: encoder))")
            for (field, changed) in changes {
                #expect(changed != base, "\(type(of: encoder)).\(field)")
                #expect(changed.storageName != base.storageName, "\(type(of: encoder)).\(field)")
            }
        }
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
