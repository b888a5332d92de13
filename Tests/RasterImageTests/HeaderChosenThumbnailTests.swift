import Foundation
import ImageLoaderSupport
import Testing

@testable import RasterImage

/// `thumbnail(_:limits:options:)`: options chosen from the header that the thumbnail's
/// own decode reads, against `info(_:)` and `thumbnail(_:options:)` called apart.
@Suite("Thumbnails with options chosen from the header")
struct HeaderChosenThumbnailTests {
    /// Every format, and each of their thumbnail paths: streamed rows, DCT scaling,
    /// interlaced and run-length fallbacks, pages, animations, orientation, profiles.
    static let sources = [
        "images/jpeg-orientation6.jpg", "images/jpeg-cmyk-icc.jpg", "images/png-photo-alpha.png",
        "images/png-rgba8-interlaced.png", "images/png-exif-icc.png", "images/tiff-multipage.tif",
        "images/tiff-orientation6.tif", "images/tiff-rgba-associated.tif", "images/bmp-rle8.bmp",
        "images/bmp-32bit-v5-alpha.bmp", "images/gif-animation.gif", "images/gif-transparent.gif",
        "images/webp-animation.webp", "images/webp-exif-icc.webp", "images/webp-lossy-alpha.webp",
        "modern/images/avif-animation.avif", "modern/images/avif-irot1-imir1.avif", "modern/images/avif-clap.avif",
        "modern/images/heif-orientation-6.heic", "modern/images/heif-alpha.heic", "modern/images/jxl-animation.jxl",
        "modern/images/jxl-alpha.jxl",
    ]

    /// Options that depend on every fact a caller might use: a third of the upright
    /// width, every frame of an animation, a square crop when there is alpha.
    static func choose(_ info: ImageInfo) -> ThumbnailOptions {
        let uprightWidth = info.orientation.swapsDimensions ? info.height : info.width
        var options = ThumbnailOptions(maxPixelSize: max(1, uprightWidth / 3), fit: info.hasAlpha ? .fill : .fit)
        options.frames = info.frameCount > 1 ? .all : .first
        return options
    }

    @Test(
        "the chooser sees what info(_:) reads, once, and the thumbnail is the one its options make", arguments: sources)
    func sameAsTwoCalls(_ file: String) throws {
        let source = ImageSource.file(path: Fixtures.root + "/" + file)
        let limits = DecodingLimits()
        let decoder = ImageDecoder()
        let seen = Lock<[ImageInfo]>([])
        let chosen = try decoder.thumbnail(source, limits: limits) { info in
            seen.withLock { $0.append(info) }
            return Self.choose(info)
        }
        let header = try decoder.info(source, options: DecodingOptions(limits: limits))
        #expect(seen.withLock { $0 } == [header])
        let apart = try decoder.thumbnail(source, limits: limits, options: Self.choose(header))
        #expect(chosen == apart)
        #expect(chosen.frames.count == (header.frameCount > 1 ? header.frameCount : 1))
    }

    struct Refused: Error, Equatable {
        let width: Int
    }

    @Test("the chooser's own error comes out unchanged; invalid options and decoders' errors are typed")
    func errors() throws {
        let decoder = ImageDecoder()
        let photo = ImageSource.file(path: Fixtures.root + "/images/png-photo.png")
        let width = try decoder.info(photo).width
        #expect(throws: Refused(width: width)) {
            try decoder.thumbnail(photo, limits: DecodingLimits()) { info in throw Refused(width: info.width) }
        }
        let invalid = #expect(throws: ImageDecodingError.self) {
            try decoder.thumbnail(photo, limits: DecodingLimits()) { _ in ThumbnailOptions(width: 0, height: 10) }
        }
        #expect(invalid?.reason == .invalidThumbnailSize(width: 0, height: 10))
        let bytes = try Data(contentsOf: URL(fileURLWithPath: Fixtures.root + "/images/png-photo.png"))
        let truncated = Array(bytes.prefix(200))
        let broken = #expect(throws: ImageDecodingError.self) {
            try decoder.thumbnail(.bytes(truncated), limits: DecodingLimits()) { _ in ThumbnailOptions(maxPixelSize: 8)
            }
        }
        #expect(broken?.reason != nil)
    }

    @Test(
        "a header past the limits is refused before the chooser is asked",
        arguments: [
            "images/jpeg-800x600.jpg", "images/png-photo.png", "images/bmp-24bit.bmp", "images/webp-lossy.webp",
            "images/tiff-rgb-lzw.tif", "images/gif-animation.gif", "modern/images/avif-8bit.avif",
            "modern/images/heif-8bit.heic", "modern/images/jxl-lossy.jxl",
        ]
    )
    func limits(_ file: String) throws {
        let source = ImageSource.file(path: Fixtures.root + "/" + file)
        let decoder = ImageDecoder()
        var small = DecodingLimits()
        small.maxPixelsPerFrame = 100
        let asked = Lock(0)
        let refused = #expect(throws: ImageDecodingError.self) {
            try decoder.thumbnail(source, limits: small) { _ in
                asked.withLock { $0 += 1 }
                return ThumbnailOptions(maxPixelSize: 8)
            }
        }
        guard case .tooManyPixels(_, _, let limit) = refused?.reason else {
            Issue.record("expected too many pixels, got \(String(describing: refused))")
            return
        }
        #expect(limit == 100)
        #expect(asked.withLock { $0 } == 0)
    }

    /// A decoder with only the two required methods: the default reads the header, then
    /// makes the thumbnail.
    struct PlainDecoder: ImageDecoding {
        let inner = ImageDecoder()
        func decode(_ source: ImageSource, options: DecodingOptions) throws(ImageDecodingError) -> RasterImage {
            try inner.decode(source, options: options)
        }
        func info(_ source: ImageSource, options: DecodingOptions) throws(ImageDecodingError) -> ImageInfo {
            try inner.info(source, options: options)
        }
    }

    @Test("a decoder of one's own gets the same thumbnail through the protocol's default")
    func protocolDefault() throws {
        let source = ImageSource.file(path: Fixtures.root + "/images/jpeg-orientation6.jpg")
        let plain: any ImageDecoding = PlainDecoder()
        let viaDefault = try plain.thumbnail(source, limits: DecodingLimits(), options: Self.choose)
        let viaOverride = try ImageDecoder().thumbnail(source, limits: DecodingLimits(), options: Self.choose)
        #expect(viaDefault.width == viaOverride.width && viaDefault.height == viaOverride.height)
        let header = try ImageDecoder().info(source)
        #expect(viaDefault == (try PlainDecoder().thumbnail(source, options: Self.choose(header))))
    }
}
