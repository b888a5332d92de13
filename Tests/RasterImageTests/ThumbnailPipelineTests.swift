import CResample
import ImageLoaderSupport
import Testing

@testable import RasterImage

@Suite("The thumbnail pipeline")
struct ThumbnailPipelineTests {
    @Test(
        "streaming rows gives the same pixels as resizing the decoded image",
        arguments: [
            "png-photo-alpha.png", "png-rgba16.png", "tiff-rgba.tif", "tiff-tiled.tif", "tiff-planar.tif",
            "bmp-32bit-v5-alpha.bmp", "bmp-24bit.bmp",
        ])
    func streamingMatchesInMemory(_ file: String) throws {
        let path = Fixtures.root + "/images/" + file
        let options = ThumbnailOptions(maxPixelSize: 20)
        let streamed = try ImageDecoder().thumbnail(.file(path: path), options: options)
        let inMemory = try ImageDecoder().decode(.file(path: path)).thumbnail(options: options)
        #expect(streamed == inMemory)
    }

    @Test("JPEG shrinks in the DCT as far as leaves 2x for the kernel, or as far as it can when asked")
    func jpegShrinkFactor() throws {
        let target = try ThumbnailGeometry(
            sourceWidth: 6000, sourceHeight: 4000, orientation: .up, options: ThumbnailOptions(maxPixelSize: 256),
            limits: DecodingLimits())
        #expect((target.scaledWidth, target.scaledHeight) == (256, 171))
        // 6000 / 8 = 750 leaves 2.9x: the largest reduction libjpeg has.
        #expect(
            ShrinkFactor.choose(width: 6000, height: 4000, target: target, mode: .quality, choices: [8, 4, 2]) == 8)
        let near = try ThumbnailGeometry(
            sourceWidth: 1000, sourceHeight: 800, orientation: .up, options: ThumbnailOptions(maxPixelSize: 200),
            limits: DecodingLimits())
        // 1000 / 4 = 250 is not twice 200; 1000 / 2 = 500 is.
        #expect(ShrinkFactor.choose(width: 1000, height: 800, target: near, mode: .quality, choices: [8, 4, 2]) == 2)
        #expect(ShrinkFactor.choose(width: 1000, height: 800, target: near, mode: .fastest, choices: [8, 4, 2]) == 4)
        let larger = try ThumbnailGeometry(
            sourceWidth: 100, sourceHeight: 80, orientation: .up, options: ThumbnailOptions(maxPixelSize: 200),
            limits: DecodingLimits())
        #expect(ShrinkFactor.choose(width: 100, height: 80, target: larger, mode: .fastest, choices: [8, 4, 2]) == 1)
    }

    @Test("the box is fitted to the upright image, and fill crops to it exactly")
    func geometry() throws {
        let turned = try ThumbnailGeometry(
            sourceWidth: 600, sourceHeight: 400, orientation: .right,
            options: ThumbnailOptions(width: 100, height: 300), limits: DecodingLimits())
        // Upright it is 400x600: fits 100 wide, 150 high; stored it is the other way round.
        #expect((turned.scaledWidth, turned.scaledHeight) == (150, 100))
        let fill = try ThumbnailGeometry(
            sourceWidth: 600, sourceHeight: 400, orientation: .up,
            options: ThumbnailOptions(maxPixelSize: 100, fit: .fill), limits: DecodingLimits())
        #expect((fill.scaledWidth, fill.scaledHeight) == (150, 100))
        #expect((fill.croppedWidth, fill.croppedHeight) == (100, 100))
        var up = ThumbnailOptions(maxPixelSize: 1000)
        #expect(
            try ThumbnailGeometry(
                sourceWidth: 60, sourceHeight: 40, orientation: .up, options: up, limits: DecodingLimits()
            ).scaledWidth == 60)
        up.allowsUpscaling = true
        #expect(
            try ThumbnailGeometry(
                sourceWidth: 60, sourceHeight: 40, orientation: .up, options: up, limits: DecodingLimits()
            ).scaledWidth == 1000)
    }

    @Test("without applying orientation, the stored orientation stays in the metadata")
    func keepsOrientationWhenAsked() throws {
        var options = ThumbnailOptions(maxPixelSize: 24)
        options.appliesOrientation = false
        let thumb = try ImageDecoder().thumbnail(
            .file(path: Fixtures.named("jpeg-orientation6").path), options: options)
        #expect(thumb.orientation == .right)
        #expect((thumb.width, thumb.height) == (24, 16))
    }

    @Test("a constant image stays constant through every kernel, in both light encodings")
    func constantStaysConstant() {
        let pixels = [UInt8](repeating: 0, count: 90 * 70 * 4).enumerated().map { i, _ in [200, 100, 50, 255][i % 4] }
        let image = RasterImage(width: 90, height: 70, pixels: pixels.map(UInt8.init))!
        for kernel in ResamplingKernel.allCases {
            for linear in [false, true] {
                let small = image.resized(width: 13, height: 11, kernel: kernel, linearLight: linear)
                let values = Set(
                    stride(from: 0, to: small.pixels.count, by: 4).map { Array(small.pixels[$0..<$0 + 4]) })
                #expect(values == [[200, 100, 50, 255]], "\(kernel) linear: \(linear)")
            }
        }
    }

    @Test("the flat quantiser rounds every value as the per-pixel store does, and never traps")
    func flatQuantiser() {
        // Every multiple of 1/4096 from -2 to 258 (halves, exact integers and the clamps
        // among them), the floats on either side of each half, and extremes.
        var values: [Float] = (-8192...1_056_768).map { Float($0) / 4096 }
        for half in 0...255 {
            let value = Float(half) + 0.5
            values += [value.nextDown, value, value.nextUp, Float(half).nextDown, Float(half).nextUp]
        }
        values += [-.greatestFiniteMagnitude, .greatestFiniteMagnitude, -.infinity, .infinity, 1e-30, -1e-30]
        while values.count % 4 != 0 { values.append(0) }
        var flat = [UInt8](repeating: 0, count: values.count)
        var expected = [UInt8](repeating: 0, count: values.count)
        values.withUnsafeBufferPointer { v in
            flat.withUnsafeMutableBufferPointer {
                StreamingResizer.quantize(v.baseAddress!, count: v.count, into: $0.baseAddress!)
            }
            expected.withUnsafeMutableBufferPointer { out in
                for i in stride(from: 0, to: v.count, by: 4) {
                    let pixel = SIMD4(v[i], v[i + 1], v[i + 2], v[i + 3])
                    StreamingResizer.store(pixel, into: out.baseAddress! + i, straight: false, linear: false)
                }
            }
        }
        let mismatches = zip(values, zip(flat, expected)).filter { $1.0 != $1.1 }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(5))")
        // A value that is not a number gives some byte, where the checked conversion trapped.
        var nan: UInt8 = 0
        [Float.nan].withUnsafeBufferPointer { StreamingResizer.quantize($0.baseAddress!, count: 1, into: &nan) }
    }

    @Test(
        "the AVX2 loops give the portable loops' pixels, to a level, in every mode the resizer has",
        .enabled(if: loops.contains(.avx2)),
        arguments: [
            (RowChannels.independent, false, 4), (.straightAlpha, false, 4), (.independent, true, 4),
            (.straightAlpha, true, 4), (.independent, false, 3),
        ])
    func loopsAgree(_ channels: RowChannels, linear: Bool, bytesPerPixel: Int) throws {
        // Given noisy rows (alpha noisy too) and resizes with and without box factors,
        // whole and as a band, with widths that leave every tail of the AVX2 loops
        var generator = SeededGenerator(seed: UInt64(bytesPerPixel * 10 + (linear ? 1 : 0)))
        let shapes = [
            (333, 211, 101, 67, nil), (1001, 97, 37, 11, nil), (258, 300, 255, 299, nil), (700, 500, 90, 70, 10..<30),
        ]
        for (width, height, outWidth, outHeight, band) in shapes {
            let pixels = (0..<width * height * bytesPerPixel + 1).map { _ in
                UInt8.random(in: 0...255, using: &generator)
            }
            func resize(_ loops: ResampleLoops) -> [UInt8] {
                let resizer = StreamingResizer(
                    inputWidth: width, inputHeight: height, outputWidth: outWidth, outputHeight: outHeight,
                    kernel: .lanczos3, channels: channels, linearLight: linear, outputRows: band, loops: loops)
                pixels.withUnsafeBufferPointer { source in
                    for y in 0..<height {
                        let row = source.baseAddress! + y * width * bytesPerPixel
                        if bytesPerPixel == 3 {
                            resizer.consumeOpaqueRGB(row, at: y)
                        } else {
                            resizer.consume(row, at: y)
                        }
                    }
                }
                return resizer.finish()
            }
            // When both loops make the same resize
            let (portable, avx2) = (resize(.portable), resize(.avx2))
            // Then every byte is within one level (FMA rounds once where the portable loops round twice)
            #expect(portable.count == avx2.count)
            let worst = zip(portable, avx2).map { abs(Int($0) - Int($1)) }.max() ?? 0
            #expect(worst <= 1, "\(width)x\(height) to \(outWidth)x\(outHeight): \(worst)")
            #expect(portable.contains { $0 != 0 })
        }
    }

    @Test("the AVX2 quantiser rounds and clamps as the portable one", .enabled(if: loops.contains(.avx2)))
    func avx2Quantiser() {
        // Values around every half, the clamps and extremes, 35 of them (every tail of the 32-wide loop)
        var values: [Float] = (-8...1032).map { Float($0) / 4 }
        for half in 0...255 { values += [Float(half) + 0.5, (Float(half) + 0.5).nextDown, (Float(half) + 0.5).nextUp] }
        values += [-.greatestFiniteMagnitude, .greatestFiniteMagnitude, -.infinity, .infinity]
        while values.count % 4 != 3 { values.append(0) }
        values.append(0)  // whole pixels
        var portable = [UInt8](repeating: 0, count: values.count)
        var avx2 = [UInt8](repeating: 7, count: values.count)
        var sums = [Float](repeating: 0, count: values.count)
        values.withUnsafeBufferPointer { v in
            portable.withUnsafeMutableBufferPointer {
                StreamingResizer.quantize(v.baseAddress!, count: v.count, into: $0.baseAddress!)
            }
            // One row, one tap of weight 1: the sums are the values, then quantised.
            var rows: [UnsafePointer<Float>?] = [v.baseAddress!]
            var one: Float = 1
            avx2.withUnsafeMutableBufferPointer { out in
                sums.withUnsafeMutableBufferPointer {
                    cresample_vertical(&rows, 1, &one, v.count / 4, $0.baseAddress!, out.baseAddress!)
                }
            }
        }
        #expect(sums == values)
        let mismatches = zip(values, zip(portable, avx2)).filter { $1.0 != $1.1 }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(5))")
    }

    @Test("tap tables from the cache are the tables made afresh, for every size, kernel and window asked")
    func cachedWeights() {
        for (input, output, outputs) in [(2000, 512, nil), (1500, 384, 10..<200), (37, 100, nil), (640, 1, nil)] {
            for kernel in ResamplingKernel.allCases {
                let fresh = ResampleWeights(inputSize: input, outputSize: output, kernel: kernel, outputs: outputs)
                // Asked twice: made (and kept) the first time, taken from the cache the second
                for _ in 0..<2 {
                    let cached = ResampleWeights.cached(
                        inputSize: input, outputSize: output, kernel: kernel, outputs: outputs)
                    #expect(cached.starts == fresh.starts && cached.counts == fresh.counts)
                    #expect(cached.weights == fresh.weights && cached.maxTaps == fresh.maxTaps)
                }
            }
        }
    }

    @Test("a box wider than 32,768 pixels is capped, so its integer sums cannot overflow")
    func widestBox() {
        // 100,000 white pixels in one row, averaged into one: a box factor of 50,000
        // uncapped, whose premultiplied sums (255 * 255 each) would pass Int32.max.
        let width = 100_000
        let image = RasterImage(width: width, height: 1, pixels: [UInt8](repeating: 255, count: width * 4))!
        #expect(StreamingResizer.boxFactor(input: width, output: 1) == 32_768)
        for kernel in [ResamplingKernel.lanczos3, .bilinear] {
            let dot = image.resized(width: 1, height: 1, kernel: kernel)
            #expect(dot.pixels == [255, 255, 255, 255], "\(kernel)")
        }
    }

    /// The resizer's loops this CPU runs: the portable ones always, AVX2 and FMA where it has them.
    static let loops: [ResampleLoops] = cresample_has_avx2() != 0 ? [.portable, .avx2] : [.portable]

    @Test(
        "rows filtered four at a time match a separable model, also when the input stops part way",
        arguments: [37, 110, 198, 201, 202, 203], loops)
    func batchedRowsMatchModel(_ rowsGiven: Int, loops: ResampleLoops) throws {
        // Given a noisy opaque image, reduced by 3.3 horizontally and 2.9 vertically
        // (single-row boxes: the horizontal pass takes four rows at a time)
        var generator = SeededGenerator(seed: UInt64(rowsGiven))
        let (width, height, outWidth, outHeight) = (330, 203, 100, 70)
        let pixels = (0..<width * height * 4).map { i in i % 4 == 3 ? 255 : UInt8.random(in: 0...255, using: &generator)
        }
        let resizer = StreamingResizer(
            inputWidth: width, inputHeight: height, outputWidth: outWidth, outputHeight: outHeight, kernel: .lanczos3,
            channels: .independent, linearLight: false, loops: loops)
        // When only the first `rowsGiven` rows arrive (a decoder that stopped early)
        let given = min(rowsGiven, height)
        pixels.withUnsafeBufferPointer { source in
            for y in 0..<given { resizer.consume(source.baseAddress! + y * width * 4, at: y) }
        }
        let output = resizer.finish()
        // Then every output row whose taps all arrived matches the model in double
        // precision (to one level), and the others are left transparent black
        let horizontal = ResampleWeights(inputSize: width, outputSize: outWidth, kernel: .lanczos3)
        let vertical = ResampleWeights(inputSize: height, outputSize: outHeight, kernel: .lanczos3)
        var complete = 0
        for y in 0..<outHeight {
            let i = (y * outWidth) * 4
            guard vertical.starts[y] + vertical.counts[y] <= given else {
                #expect(output[i..<(i + outWidth * 4)].allSatisfy { $0 == 0 }, "row \(y)")
                continue
            }
            complete += 1
            for x in 0..<outWidth {
                for c in 0..<3 {
                    var sum = 0.0
                    for ty in 0..<vertical.counts[y] {
                        let row = vertical.starts[y] + ty
                        var line = 0.0
                        for tx in 0..<horizontal.counts[x] {
                            let column = horizontal.starts[x] + tx
                            line +=
                                Double(pixels[(row * width + column) * 4 + c])
                                * Double(horizontal.weights[x * horizontal.maxTaps + tx])
                        }
                        sum += line * Double(vertical.weights[y * vertical.maxTaps + ty])
                    }
                    let expected = Int((min(255, max(0, sum)) + 0.5).rounded(.down))
                    #expect(abs(Int(output[i + x * 4 + c]) - expected) <= 1, "(\(x), \(y)) channel \(c)")
                }
            }
        }
        // And the rows that could be made were: all of them for the whole image
        #expect(complete > 0)
        if given == height { #expect(complete == outHeight) }
    }

    @Test("a large resize split across cores gives what one band gives")
    func parallelBandsAgree() throws {
        var generator = SeededGenerator(seed: 7)
        let (width, height) = (1600, 1200)
        let pixels = (0..<width * height * 4).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let image = RasterImage(width: width, height: height, pixels: pixels)!
        let banded = image.resized(width: 800, height: 600)
        // The same resize through one streaming pass.
        let single = StreamingResizer(
            inputWidth: width, inputHeight: height, outputWidth: 800, outputHeight: 600, kernel: .lanczos3,
            channels: .straightAlpha, linearLight: false)
        pixels.withUnsafeBufferPointer { source in
            for y in 0..<height { single.consume(source.baseAddress! + y * width * 4, at: y) }
        }
        #expect(800 * 600 >= RasterImage.parallelResizeThreshold)
        #expect(banded.pixels == single.finish())
        // Limited to one core (as on a loader's worker thread): the same pixels, one band.
        let limited = ResizeParallelism.withCores(1) { () -> (Int, RasterImage) in
            (ResizeParallelism.cores, image.resized(width: 800, height: 600))
        }
        #expect(limited.0 == 1)
        #expect(limited.1.pixels == banded.pixels)
        #expect(ResizeParallelism.cores == System.processorsOnline)
    }

    @Test("hostile and truncated files are typed errors on the thumbnail path too")
    func hostileThumbnails() {
        let options = ThumbnailOptions(maxPixelSize: 64)
        for name in [
            "png-30000x30000.png", "jpeg-50000x50000.jpg", "gif-65535x65535.gif", "bmp-width-2^31.bmp",
            "webp-16383x16383.webp",
        ] {
            let error = expectDecodingError {
                _ = try ImageDecoder().thumbnail(.file(path: Fixtures.root + "/hostile/" + name), options: options)
            }
            guard case .tooManyPixels = error?.reason else {
                Issue.record("\(name): \(String(describing: error))")
                continue
            }
        }
        let strips = expectDecodingError {
            _ = try ImageDecoder().thumbnail(
                .file(path: Fixtures.root + "/hostile/tiff-absurd-strips.tif"), options: options)
        }
        #expect(strips?.reason == .truncated)
        for fixture in Fixtures.onePerFormat + [
            Fixtures.named("jpeg-progressive"), Fixtures.named("png-rgba8-interlaced"),
        ] {
            let cut = Array(fixture.bytes.prefix(fixture.bytes.count / 2))
            let error = expectDecodingError { _ = try ImageDecoder().thumbnail(.bytes(cut), options: options) }
            #expect(error?.reason == .truncated, "\(fixture.name)")
        }
    }

    @Test("the limits are checked on the full-size header, before any scaled decode")
    func limitsOnFullSize() {
        let options = ThumbnailOptions(maxPixelSize: 16)
        for fixture in Fixtures.onePerFormat {
            var limits = DecodingLimits()
            limits.maxPixelsPerFrame = fixture.width * fixture.height - 1
            let error = expectDecodingError {
                _ = try ImageDecoder().thumbnail(.bytes(fixture.bytes), limits: limits, options: options)
            }
            #expect(
                error?.reason
                    == .tooManyPixels(
                        width: fixture.width, height: fixture.height, limit: fixture.width * fixture.height - 1),
                "\(fixture.name)")
        }
    }
}
