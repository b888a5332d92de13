import Foundation
import ImageLoaderSupport
import Testing

@testable import RasterImage

/// Small files that claim huge work or memory (Fixtures/hostile/make_hostile.py writes
/// them): each is refused with a typed error before anything large is allocated.
@Suite("Working memory and work limits")
struct ResourceLimitTests {
    func hostile(_ name: String) -> ImageSource { .file(path: Fixtures.root + "/hostile/" + name) }

    @Test("a 1x1 TIFF declaring a 65536x65536 16-bit tile, or a 16384x16384 deflate tile")
    func hugeTIFFTiles() {
        for name in ["tiff-1x1-tile-65536.tif", "tiff-1x1-deflate-tile-16384.tif"] {
            let decoded = expectDecodingError { _ = try ImageDecoder().decode(hostile(name)) }
            guard case .tooMuchWorkingMemory(_, let limit) = decoded?.reason else {
                Issue.record("\(name): \(String(describing: decoded))")
                continue
            }
            #expect(limit == DecodingLimits().maxWorkingBytes)
            let thumbnail = expectDecodingError {
                _ = try ImageDecoder().thumbnail(hostile(name), options: ThumbnailOptions(maxPixelSize: 32))
            }
            guard case .tooMuchWorkingMemory = thumbnail?.reason else {
                Issue.record("\(name) thumbnail: \(String(describing: thumbnail))")
                continue
            }
        }
    }

    @Test("a TIFF strip larger than the working memory is read a row at a time, with the same pixels")
    func largeStripsReadByRow() throws {
        let path = Fixtures.root + "/images/tiff-gray8.tif"
        let whole = try ImageDecoder().decode(.file(path: path))
        var limits = DecodingLimits()
        limits.maxWorkingBytes = whole.width * 2 + 16  // less than any strip of more than one row
        let byRow = try ImageDecoder(options: DecodingOptions(limits: limits)).decode(.file(path: path))
        #expect(byRow == whole)
    }

    @Test("a 100,000,000 x 1 16-bit PNG is refused for its libpng row buffers")
    func wideSixteenBitPNG() {
        let error = expectDecodingError { _ = try ImageDecoder().decode(hostile("png-100000000x1-rgba16.png")) }
        guard case .tooMuchWorkingMemory = error?.reason else {
            Issue.record("\(String(describing: error))")
            return
        }
        #expect(error?.format == .png)
    }

    @Test("a 487-byte PNG declaring a 1.7 GB eXIf chunk (a fuzzer finding): libpng is refused the allocation")
    func hugeExifChunk() throws {
        let source = hostile("png-exif-chunk-1.7gb.png")
        let limits = DecodingLimits()
        let (largest, refused) = try source.withReader(limits: limits) { reader in
            let session = try PNGReadSession(reader, limits: limits)
            _ = try? session.readHeader()
            return (session.largestAllocationRequest, session.refusedAllocations)
        }
        #expect(largest == 1_761_607_706)  // what the chunk declares, asked for by libpng...
        #expect(refused == 1)  // ...and refused: no allocation past maxWorkingBytes
        let error = expectDecodingError { _ = try ImageDecoder().decode(source) }
        #expect(error?.format == .png)
    }

    @Test("a truncated progressive JPEG claiming 9000x9000 fails before its coefficients are allocated")
    func truncatedProgressiveJPEG() {
        let source = hostile("jpeg-progressive-9000x9000-truncated.jpg")
        let error = expectDecodingError { _ = try ImageDecoder().decode(source) }
        #expect(error?.reason == .truncated)
        let thumbnail = expectDecodingError {
            _ = try ImageDecoder().thumbnail(source, options: ThumbnailOptions(maxPixelSize: 64))
        }
        #expect(thumbnail?.reason == .truncated)
        // With a working memory too small for the coefficients, the limit speaks first.
        var limits = DecodingLimits()
        limits.maxWorkingBytes = 1 << 20
        let limited = expectDecodingError {
            _ = try ImageDecoder(options: DecodingOptions(limits: limits)).decode(source)
        }
        guard case .tooMuchWorkingMemory = limited?.reason else {
            Issue.record("limited: \(String(describing: limited))")
            return
        }
    }

    @Test("progressive JPEGs within the working memory still decode")
    func progressiveWithinLimits() throws {
        let path = Fixtures.root + "/images/jpeg-progressive.jpg"
        let image = try ImageDecoder().decode(.file(path: path))
        var limits = DecodingLimits()
        // The coefficients of this image: 128 bytes a block, three components.
        limits.maxWorkingBytes = 4 << 20
        #expect(try ImageDecoder(options: DecodingOptions(limits: limits)).decode(.file(path: path)) == image)
    }

    @Test("animated WebP timestamps that wrap past Int32 give non-negative durations")
    func webpTimestampsWrap() throws {
        let image = try ImageDecoder().decode(hostile("webp-timestamps-wrap.webp"))
        #expect(image.frames.count == 130)
        #expect(image.frames.allSatisfy { $0.duration >= .zero })
        #expect(image.frames[0].duration == .milliseconds(0xFFFFFF))
    }

    @Test("a lossless WebP's full-size decoding buffer counts toward the working memory")
    func losslessWebP() throws {
        let path = Fixtures.root + "/images/webp-lossless.webp"
        let image = try ImageDecoder().decode(.file(path: path))
        var limits = DecodingLimits()
        limits.maxWorkingBytes = image.width * image.height * 4 - 1
        let error = expectDecodingError {
            _ = try ImageDecoder(options: DecodingOptions(limits: limits)).decode(.file(path: path))
        }
        #expect(
            error?.reason == .tooMuchWorkingMemory(bytes: image.width * image.height * 4, limit: limits.maxWorkingBytes)
        )
        limits.maxWorkingBytes += 1
        #expect(try ImageDecoder(options: DecodingOptions(limits: limits)).decode(.file(path: path)) == image)
    }

    @Test("GIF frames count toward the total work by their own rectangles")
    func gifTotalWork() throws {
        let path = Fixtures.root + "/images/gif-animation.gif"
        let image = try ImageDecoder().decode(.file(path: path))
        var limits = DecodingLimits()
        limits.maxTotalPixels = image.width * image.height  // the first frame's, fewer than all hold
        let error = expectDecodingError {
            _ = try ImageDecoder(options: DecodingOptions(limits: limits)).decode(.file(path: path))
        }
        guard case .tooMuchWork(let pixels, let limit) = error?.reason else {
            Issue.record(
                "gif: \(String(describing: error)) \(image.frames.count) frames \(image.width)x\(image.height)")
            return
        }
        #expect(pixels > limit && limit == limits.maxTotalPixels)
        // The first frame alone is within the limit.
        #expect(
            try ImageDecoder(options: DecodingOptions(limits: limits, frames: .first)).decode(.file(path: path)).frames
                .count == 1)
    }

    @Test("a fill thumbnail of a 1 x 100,000,000 BMP computes only its box", arguments: [false, true])
    func fillOfAVeryLongImage(_ upscaling: Bool) {
        var options = ThumbnailOptions(width: 256, height: 256, fit: .fill)
        options.allowsUpscaling = upscaling
        // The header is all there is: the rows are missing, which is the only error.
        let error = expectDecodingError {
            _ = try ImageDecoder().thumbnail(hostile("bmp-1x100000000.bmp"), options: options)
        }
        #expect(error?.reason == .truncated)
    }

    @Test("a fill crop is the same pixels as resizing the whole image and cropping it")
    func windowedResizeMatchesCrop() throws {
        let image = try ImageDecoder().decode(.file(path: Fixtures.root + "/images/png-photo.png"))
        let geometry = try ThumbnailGeometry(
            sourceWidth: image.width, sourceHeight: image.height, orientation: .up,
            options: ThumbnailOptions(width: 40, height: 90, fit: .fill), limits: DecodingLimits())
        let whole = try image.resized(width: geometry.scaledWidth, height: geometry.scaledHeight)
            .cropped(x: geometry.cropX, y: geometry.cropY, width: geometry.croppedWidth, height: geometry.croppedHeight)
        let window = image.resized(
            window: geometry.window(inputWidth: image.width, inputHeight: image.height), kernel: .lanczos3,
            linearLight: false)
        #expect(window.width == 40 && window.height == 90)
        #expect(window.pixels == whole.pixels)
        // Filling a box as wide as the image and half as tall scales by 1: the rows are
        // the source's own, cropped, untouched.
        var half = ThumbnailOptions(width: image.width, height: image.height / 2, fit: .fill)
        half.appliesOrientation = false
        let cropped = try image.thumbnail(options: half)
        let reference = try image.cropped(
            x: 0, y: (image.height - image.height / 2) / 2, width: image.width, height: image.height / 2)
        #expect(cropped.pixels == reference.straightAlpha().pixels)
    }

    @Test(
        "a crop rectangle outside the image is .invalidCrop, never a clamped one",
        arguments: [
            (-1, 0, 4, 4), (0, -1, 4, 4), (0, 0, 0, 4), (0, 0, 4, -2), (45, 0, 4, 4), (0, 0, 49, 4), (.max, 0, 4, 4),
            (4, 4, .max, 2),
        ])
    func cropRectangles(x: Int, y: Int, width: Int, height: Int) throws {
        let image = try ImageDecoder().decode(.file(path: Fixtures.root + "/images/png-rgba8.png"))
        #expect(image.width == 48)
        let error = expectDecodingError { _ = try image.cropped(x: x, y: y, width: width, height: height) }
        #expect(error?.reason == .invalidCrop(x: x, y: y, width: width, height: height))
        // The largest rectangle inside is exact.
        let whole = try image.cropped(x: 44, y: 0, width: 4, height: image.height)
        #expect((whole.width, whole.height) == (4, image.height))
    }

    @Test(
        "a thumbnail box outside 1...maxSide is .invalidThumbnailSize, from the initialiser or a property, never clamped",
        arguments: [(0, 16), (-5, 16), (16, 0), (ThumbnailOptions.maxSide + 1, 16), (16, .max), (.min, .max)])
    func thumbnailBoxes(width: Int, height: Int) throws {
        let path = Fixtures.root + "/images/png-rgb8.png"
        let initialised = ThumbnailOptions(width: width, height: height)
        #expect((initialised.width, initialised.height) == (width, height))
        var set = ThumbnailOptions(maxPixelSize: 16)
        (set.width, set.height) = (width, height)
        for options in [initialised, set] {
            #expect(throws: ImageDecodingError(.invalidThumbnailSize(width: width, height: height))) {
                try options.validate()
            }
            let decoded = expectDecodingError { _ = try ImageDecoder().thumbnail(.file(path: path), options: options) }
            #expect(decoded?.reason == .invalidThumbnailSize(width: width, height: height))
            let image = try ImageDecoder().decode(.file(path: path))
            let resized = expectDecodingError { _ = try image.thumbnail(options: options) }
            #expect(resized?.reason == .invalidThumbnailSize(width: width, height: height))
        }
        // The edges themselves are allowed.
        try ThumbnailOptions(width: 1, height: ThumbnailOptions.maxSide).validate()
    }

    @Test("a box within the sides but past the pixel limit is .invalidThumbnailSize too")
    func thumbnailPastPixelLimit() throws {
        let path = Fixtures.root + "/images/png-rgb8.png"
        var huge = ThumbnailOptions(maxPixelSize: ThumbnailOptions.maxSide)
        huge.allowsUpscaling = true
        var limits = DecodingLimits()
        limits.maxPixelsPerFrame = 1_000_000
        let tooLarge = expectDecodingError {
            _ = try ImageDecoder().thumbnail(.file(path: path), limits: limits, options: huge)
        }
        guard case .invalidThumbnailSize = tooLarge?.reason else {
            Issue.record("\(String(describing: tooLarge))")
            return
        }
        // An image already decoded is held to the limits it is given, and a reduced decode
        // to the limits it was decoded under.
        let image = try ImageDecoder().decode(.file(path: path))
        let inMemory = expectDecodingError { _ = try image.thumbnail(limits: limits, options: huge) }
        #expect(inMemory?.reason == tooLarge?.reason)
        let reduced = try ImageDecoder().decode(
            .file(path: path), options: DecodingOptions(limits: limits), reducedFor: [huge])
        let fromReduced = expectDecodingError { _ = try reduced.thumbnail(options: huge) }
        #expect(fromReduced?.reason == tooLarge?.reason)
    }

    @Test("checked arithmetic: overflow is nil or saturated, never a trap")
    func checkedArithmetic() {
        #expect(Checked.multiply(.max, 2) == nil)
        #expect(Checked.product(1 << 20, 1 << 20, 1 << 30) == nil)
        #expect(Checked.sum(.max, 1) == nil)
        #expect(Checked.saturatingAdd(.max, 1) == .max)
        #expect(Checked.saturatingMultiply(.min, 2) == .min)
        #expect(Checked.clampedInt(.infinity, to: 0...10) == 10)
        #expect(Checked.clampedInt(.nan, to: 0...10) == nil)
        #expect(Checked.decimal("99999999999999999999") == nil)
        #expect(Checked.decimal("-1") == nil)
        #expect(Checked.decimal("+1") == nil)
        #expect(Checked.decimal("0042") == 42)
        #expect(Checked.int(UInt64.max) == nil)
    }
}
