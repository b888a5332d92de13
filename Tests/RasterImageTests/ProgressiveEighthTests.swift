import Foundation
import ImageLoaderSupport
import Testing

@testable import RasterImage

/// Progressive JPEGs thumbnailed at 1/8 from only the scans that size needs
/// (``JPEGEighthImage``: the DC scans, and the AC scans of 4:2:0 chroma), checked
/// against libjpeg's own 1/8 decode of the whole file. The fixtures come from
/// `Fixtures/generate-progressive.sh`.
@Suite("Progressive JPEGs from the scans a 1/8 reduction needs")
struct ProgressiveEighthTests {
    /// The files the path reads: every scan script, restart intervals, every sampling it takes.
    static let read = [
        "prog-420-libjpeg.jpg", "prog-420-optimiser.jpg", "prog-420-restart.jpg", "prog-420-odd.jpg", "prog-422.jpg",
        "prog-440.jpg", "prog-444.jpg", "prog-grey.jpg",
    ]

    static func bytes(_ name: String) -> [UInt8] { Fixtures.bytes("progressive/" + name) }

    /// libjpeg-turbo's own 1/8 decode of the whole file (every scan read, its
    /// coefficient buffer and scaled IDCT), the reference.
    static func libjpegEighth(_ bytes: [UInt8]) throws -> RasterImage {
        try ImageDecoder.run(.bytes(bytes), DecodingLimits()) { reader, _ in
            let session = try JPEGReadSession(reader, limits: DecodingLimits())
            try session.readHeader()
            try session.start(scaleDenominator: 8)
            let bytesPerRow = session.outputWidth * 4
            let pixels = try PixelBuffer.make(count: bytesPerRow * session.outputHeight) { base in
                try session.readRows(
                    into: ImageBufferTarget(base, bytesPerRow: bytesPerRow), allowsTruncatedData: false)
            }
            return RasterImage(
                validatedWidth: session.outputWidth, height: session.outputHeight, bytesPerRow: bytesPerRow,
                frames: [.init(pixels: pixels)], alphaMode: .straight, loopCount: 1, orientation: .up,
                iccProfile: nil, format: .jpeg, hasAlpha: false)
        }
    }

    /// The 1/8 image, RGBA, as the thumbnail path writes it.
    static func eighthPixels(_ bytes: [UInt8], colorSpace: JPEGEighthImage.ColorSpace) throws -> (
        JPEGEighthImage, [UInt8]
    ) {
        let image = try #require(
            bytes.withUnsafeBytes { JPEGEighthImage.read($0, maxScans: 1000, maxWorkingBytes: 1 << 30) })
        var pixels = [UInt8](repeating: 0, count: image.outputWidth * image.outputHeight * 4)
        pixels.withUnsafeMutableBufferPointer { buffer in
            image.writeRows(
                into: ImageBufferTarget(buffer.baseAddress!, bytesPerRow: image.outputWidth * 4),
                colorSpace: colorSpace)
        }
        return (image, pixels)
    }

    @Test("those scans give libjpeg's own 1/8 image of the whole file, exactly", arguments: read)
    func sameAsLibjpegAtOneEighth(_ name: String) throws {
        let bytes = Self.bytes(name)
        let colorSpace: JPEGEighthImage.ColorSpace = name.contains("grey") ? .grey : .ycbcr
        let (image, pixels) = try Self.eighthPixels(bytes, colorSpace: colorSpace)
        let libjpeg = try Self.libjpegEighth(bytes)
        #expect(libjpeg.width == image.outputWidth && libjpeg.height == image.outputHeight)
        let diff = difference(pixels, libjpeg.pixels, width: image.outputWidth)
        // The decode for several thumbnails at once takes the same path, to the same pixels.
        let reduced = try ImageDecoder().decode(
            .bytes(bytes), options: DecodingOptions(), reducedFor: [ThumbnailOptions(maxPixelSize: 8)])
        #expect(reduced.image.pixels == libjpeg.pixels && reduced.originalWidth == image.width)
        #expect(diff.maximum == 0, "\(name): \(diff)")
    }

    @Test(
        "a 1/8 thumbnail from those scans is the thumbnail libjpeg's 1/8 decode of the whole file makes",
        arguments: read)
    func thumbnailUnchanged(_ name: String) throws {
        let bytes = Self.bytes(name)
        let options = ThumbnailOptions(maxPixelSize: 32)
        // Below libjpeg's whole-image coefficient buffer (786,432 bytes for 4:2:0 here,
        // 1,572,864 for 4:4:4): only the scans' own path can make it.
        var limits = DecodingLimits()
        limits.maxWorkingBytes = 400_000
        let thumbnail = try ImageDecoder().thumbnail(.bytes(bytes), limits: limits, options: options)
        let header = try ImageDecoder().info(.bytes(bytes))
        let libjpeg = try Self.libjpegEighth(bytes).thumbnail(
            options: options, limits: DecodingLimits(), sourceWidth: header.width, sourceHeight: header.height)
        #expect(thumbnail == libjpeg)
        #expect(thumbnail.orientation == .up && thumbnail.alphaMode == .straight && thumbnail.width == 32)
    }

    @Test("the path reads only what it understands: 4:1:1 and baseline files are libjpeg's")
    func declines() throws {
        for name in ["progressive/prog-411.jpg", "images/jpeg-800x600.jpg", "images/jpeg-restart.jpg"] {
            let bytes = Fixtures.bytes(name)
            #expect(bytes.withUnsafeBytes { JPEGEighthImage.read($0, maxScans: 1000, maxWorkingBytes: 1 << 30) } == nil)
        }
        // And what it declines still makes its thumbnail, through libjpeg.
        let thumbnail = try ImageDecoder().thumbnail(
            .bytes(Self.bytes("prog-411.jpg")), options: ThumbnailOptions(maxPixelSize: 32))
        #expect(thumbnail.width == 32)
    }

    @Test("the path never allocates the whole-image coefficient buffer libjpeg needs")
    func noCoefficientBuffer() throws {
        let bytes = Self.bytes("prog-420-libjpeg.jpg")
        // 6,144 blocks: 786,432 bytes of coefficients in libjpeg; 131,072 kept here (2 bytes
        // a luma block, 60 a chroma block: the 25 coefficients its 2x2 IDCT reads, and a mask).
        var limits = DecodingLimits()
        limits.maxWorkingBytes = 200_000
        let small = try ImageDecoder().thumbnail(
            .bytes(bytes), limits: limits, options: ThumbnailOptions(maxPixelSize: 32))
        #expect(small.width == 32)
        // A thumbnail that needs the AC scans (1/4) goes through libjpeg, and its buffer is refused.
        let larger = expectDecodingError {
            _ = try ImageDecoder().thumbnail(.bytes(bytes), limits: limits, options: ThumbnailOptions(maxPixelSize: 64))
        }
        guard case .tooMuchWorkingMemory = larger?.reason else {
            Issue.record("expected the coefficient buffer refused, got \(String(describing: larger))")
            return
        }
    }

    @Test("damaged and truncated files fail as libjpeg fails them, and never trap", arguments: read)
    func damaged(_ name: String) throws {
        let bytes = Self.bytes(name)
        let options = ThumbnailOptions(maxPixelSize: 32)
        // Cut anywhere: the thumbnail fails as the full decode does.
        for cut in stride(from: 2, to: bytes.count, by: max(1, bytes.count / 97)) {
            let part = Array(bytes.prefix(cut))
            let thumbnail = Result { try ImageDecoder().thumbnail(.bytes(part), options: options) }
            let full = Result { try ImageDecoder().decode(.bytes(part)) }
            switch (thumbnail, full) {
            case (.failure(let a as ImageDecodingError), .failure(let b as ImageDecodingError)):
                #expect(a.reason == b.reason, "\(name) cut at \(cut): \(a) against \(b)")
            case (.success, .success):
                break
            default:
                Issue.record("\(name) cut at \(cut): thumbnail \(thumbnail), full decode \(full)")
            }
        }
        // Bytes changed anywhere: a thumbnail or a typed error, never a trap.
        var generator = SplitMix(seed: UInt64(bytes.count))
        for _ in 0..<200 {
            var changed = bytes
            for _ in 0..<4 {
                changed[Int(generator.next() % UInt64(changed.count))] = UInt8(truncatingIfNeeded: generator.next())
            }
            do {
                _ = try ImageDecoder().thumbnail(.bytes(changed), options: options)
            } catch {
                #expect(error is ImageDecodingError)
            }
        }
    }

    @Test("more scans than the limit are refused as libjpeg refuses them")
    func scanLimit() throws {
        var limits = DecodingLimits()
        limits.maxProgressiveScans = 5
        let error = expectDecodingError {
            _ = try ImageDecoder().thumbnail(
                .bytes(Self.bytes("prog-420-libjpeg.jpg")), limits: limits, options: ThumbnailOptions(maxPixelSize: 32))
        }
        #expect(error?.reason == .tooManyScans(limit: 5))
    }
}
