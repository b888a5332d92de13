import RasterImage
import Testing

/// HEIF, AVIF and JPEG XL beyond the reference decodes (DecoderReferenceTests runs those
/// from Fixtures/modern/manifest.json): placement, limits, hostile files, sniffing,
/// thumbnails and the embedded-thumbnail option.
@Suite("HEIF, AVIF and JPEG XL")
struct ModernFormatTests {
    static func path(_ relative: String) -> String { Fixtures.root + "/modern/" + relative }

    @Test("ftyp brands and JPEG XL signatures are sniffed; content types name the formats")
    func sniffing() throws {
        func ftyp(_ major: String, _ compatible: [String]) -> [UInt8] {
            let body = Array(major.utf8) + [0, 0, 0, 0] + compatible.flatMap { Array($0.utf8) }
            let size = UInt32(8 + body.count)
            return withUnsafeBytes(of: size.bigEndian, Array.init) + Array("ftyp".utf8) + body
        }
        for brand in ["heic", "heix", "heim", "heis", "hevc", "hevx", "mif1", "msf1"] {
            #expect(ImageFormat.sniff(ftyp(brand, ["mif1"])) == .heif, "\(brand)")
        }
        #expect(ImageFormat.sniff(ftyp("avif", ["mif1"])) == .avif)
        #expect(ImageFormat.sniff(ftyp("avis", [])) == .avif)
        #expect(ImageFormat.sniff(ftyp("mif1", ["miaf", "avif"])) == .avif)
        #expect(ImageFormat.sniff(ftyp("mif1", ["miaf", "heic"])) == .heif)
        #expect(ImageFormat.sniff(ftyp("isom", ["mp41"])) == nil)
        #expect(ImageFormat.sniff(ftyp("qt  ", [])) == nil)
        #expect(ImageFormat.sniff([0xFF, 0x0A, 0xFA, 0x7F]) == .jxl)
        #expect(ImageFormat.sniff([0, 0, 0, 0x0C, 0x4A, 0x58, 0x4C, 0x20, 0x0D, 0x0A, 0x87, 0x0A, 0, 0]) == .jxl)
        for (type, format) in [
            ("image/heic", ImageFormat.heif), ("image/HEIF", .heif), ("image/heic-sequence", .heif),
            ("image/heif-sequence", .heif), ("image/avif", .avif), ("image/jxl", .jxl),
        ] {
            #expect(ImageFormat(contentType: type) == format)
            #expect(AcceptedContentTypes.default.accepts(type))
        }
        let heic = Fixtures.bytes("modern/images/heif-8bit.heic")
        #expect(try AcceptedContentTypes.default.validate(heic, declaredContentType: "image/heic") == .heif)
        #expect(throws: ContentTypeError.mismatch(declared: "image/avif", detected: .heif)) {
            try AcceptedContentTypes.default.validate(heic, declaredContentType: "image/avif")
        }
    }

    @Test("dimension bombs in ispe are refused before libheif or libavif allocate")
    func dimensionBombs() {
        for name in ["heif-ispe-60000x60000.heic", "avif-ispe-60000x60000.avif"] {
            let error = expectDecodingError { _ = try ImageDecoder().decode(.file(path: Self.path("hostile/" + name))) }
            #expect(error?.reason == .tooManyPixels(width: 60000, height: 60000, limit: 100_000_000), "\(name)")
            let header = expectDecodingError { _ = try ImageDecoder().info(.file(path: Self.path("hostile/" + name))) }
            #expect(header?.reason == .tooManyPixels(width: 60000, height: 60000, limit: 100_000_000))
        }
        let empty = expectDecodingError {
            _ = try ImageDecoder().decode(.file(path: Self.path("hostile/heif-ispe-0x0.heic")))
        }
        #expect(empty?.reason == .tooManyPixels(width: 0, height: 0, limit: 100_000_000))
    }

    @Test("a box cut short is .truncated; a few bytes of padding after the last box are not a box")
    func truncationAndPadding() throws {
        for name in ["heif-8bit.heic", "avif-8bit.avif"] {
            let bytes = Fixtures.bytes("modern/images/" + name)
            #expect(try ImageDecoder().decode(.bytes(bytes + [0, 0, 0])).width == 64, "\(name)")
            let cut = expectDecodingError { _ = try ImageDecoder().decode(.bytes(Array(bytes.dropLast(10)))) }
            #expect(cut?.reason == .truncated, "\(name)")
        }
    }

    @Test("the fuzzers' findings are typed errors")
    func fuzzFindings() {
        // libavif cannot parse it; the decoder was leaked on that path.
        let avif = expectDecodingError {
            _ = try ImageDecoder().decode(.file(path: Self.path("findings/avif-leak-on-limit.avif")))
        }
        #expect(avif?.reason == .corrupt && avif?.format == .avif)
        // ispe says 64x48, libheif decodes 64x560: the output, sized from the header, was
        // written past its end.
        let source = ImageSource.file(path: Self.path("findings/heif-decoded-size-mismatch.heic"))
        let decode = expectDecodingError { _ = try ImageDecoder().decode(source) }
        #expect(decode?.reason == .corrupt && decode?.format == .heif)
        let thumbnail = expectDecodingError {
            _ = try ImageDecoder().thumbnail(source, options: ThumbnailOptions(maxPixelSize: 20))
        }
        #expect(thumbnail?.reason == .corrupt)
        // An nclx box libheif rejects after allocating the profile (it leaked): decoded
        // without a profile, as sRGB.
        let nclx = try? ImageDecoder().decode(.file(path: Self.path("findings/heif-nclx-error-leak.heic")))
        #expect(nclx?.iccProfile == nil && nclx?.width == 50)
    }

    @Test("limits: working memory, frames and the work of a grid are checked first")
    func limits() throws {
        var options = DecodingOptions()
        options.limits.maxWorkingBytes = 1000
        for name in ["heif-8bit.heic", "avif-8bit.avif", "jxl-lossy.jxl"] {
            let error = expectDecodingError {
                _ = try ImageDecoder(options: options).decode(.file(path: Self.path("images/" + name)))
            }
            guard case .tooMuchWorkingMemory = error?.reason else {
                Issue.record("\(name): \(String(describing: error))")
                continue
            }
        }
        var frames = DecodingOptions()
        frames.limits.maxFrames = 2
        for name in ["avif-animation.avif", "jxl-animation.jxl"] {
            let error = expectDecodingError {
                _ = try ImageDecoder(options: frames).decode(.file(path: Self.path("images/" + name)))
            }
            #expect(error?.reason == .tooManyFrames(limit: 2), "\(name)")
        }
        // The grid's one tile is 64x64: its pixels count against the work limit.
        var work = DecodingOptions()
        work.limits.maxTotalPixels = 64 * 64 - 1
        let grid = expectDecodingError {
            _ = try ImageDecoder(options: work).decode(.file(path: Self.path("images/heif-exif-orientation-grid.heic")))
        }
        #expect(grid?.reason == .tooMuchWork(pixels: 64 * 64, limit: 64 * 64 - 1))
    }

    @Test("thumbnails are upright: irot, imir and clap as the stored pixels turned, for every combination")
    func uprightThumbnails() throws {
        let fixtures = Fixtures.all.filter {
            $0.name.hasPrefix("avif-irot") || $0.name.hasPrefix("heif-orientation-") || $0.name == "avif-clap"
        }
        #expect(fixtures.count == 11 + 8 + 1)
        for fixture in fixtures {
            let stored = RasterImage(
                width: fixture.width, height: fixture.height, pixels: fixture.expectedFrames[0])!
            let upright = RasterImage(
                width: stored.width, height: stored.height, frames: stored.frames,
                orientation: Orientation(rawValue: fixture.orientation)!
            )!.oriented()
            var options = ThumbnailOptions(width: upright.width, height: upright.height)
            options.kernel = .box
            let thumbnail = try ImageDecoder().thumbnail(.file(path: fixture.path), options: options)
            #expect(thumbnail.orientation == .up)
            #expect(thumbnail.width == upright.width && thumbnail.height == upright.height, "\(fixture.name)")
            let diff = difference(thumbnail.pixels, upright.pixels, width: upright.width)
            #expect(diff.maximum <= fixture.tolerance + 1, "\(fixture.name): \(diff)")
        }
    }

    @Test("an EXIF orientation inside a HEIF file is not applied; irot is")
    func exifIgnored() throws {
        let exifOnly = try ImageDecoder().info(.file(path: Self.path("images/heif-exif-orientation-grid.heic")))
        #expect(exifOnly.orientation == .up && exifOnly.width == 64 && exifOnly.height == 48)
        let rotated = try ImageDecoder().info(.file(path: Self.path("images/heif-orientation-6.heic")))
        #expect(rotated.orientation == .right)
    }

    @Test("a JPEG XL thumbnail from its DC is close to one from the full decode")
    func jxlProgressive() throws {
        let source = ImageSource.file(path: Self.path("images/jxl-1024x768.jxl"))
        var fromDC = ThumbnailOptions(maxPixelSize: 64)
        fromDC.shrinkOnLoad = .quality
        let small = try ImageDecoder().thumbnail(source, options: fromDC)
        let full = try ImageDecoder().decode(source).thumbnail(options: fromDC)
        #expect(small.width == 64 && small.height == 48)
        let diff = difference(small.pixels, full.pixels, width: 64)
        #expect(diff.mean < 3, "\(diff)")
        // Cut short after its DC, the file is still an error for a full decode.
        let bytes = Fixtures.bytes("modern/images/jxl-1024x768.jxl")
        let cut = Array(bytes.prefix(bytes.count / 2))
        #expect(expectDecodingError { _ = try ImageDecoder().decode(.bytes(cut)) }?.reason == .truncated)
    }

    @Test("a predictively coded primary image (a pred reference) is refused, not shown as its residual")
    func predictedImage() throws {
        // The grid's references to its tiles relabelled: the primary item is now coded
        // from other items (as in Nokia's conformance file C044), which libheif 1.15
        // would decode alone and return as a grey residual.
        var bytes = Fixtures.bytes("modern/images/heif-exif-orientation-grid.heic")
        let label = Array("dimg".utf8)
        let at = try #require((0...(bytes.count - 4)).first { Array(bytes[$0..<$0 + 4]) == label })
        bytes.replaceSubrange(at..<at + 4, with: Array("pred".utf8))
        for operation in ["info", "decode"] {
            let error = expectDecodingError {
                if operation == "info" {
                    _ = try ImageDecoder().info(.bytes(bytes))
                } else {
                    _ = try ImageDecoder().decode(.bytes(bytes))
                }
            }
            #expect(error?.reason == .unsupported && error?.format == .heif, "\(operation)")
        }
    }

    @Test("libjxl's failure traces become the typed error's cause, not lines on standard error")
    func jxlDiagnostics() throws {
        // A bit flipped in the entropy-coded data: libjxl's deepest trace names the failure.
        var corrupt = 0
        for (name, bytes) in Fixtures.damagedJXLFiles() {
            let error = expectDecodingError { _ = try ImageDecoder().decode(.bytes(bytes)) }
            guard let error else { continue }  // a flip the decoder shrugs off is not an error
            #expect(error.format == .jxl, "\(name)")
            if error.reason == .corrupt, let message = error.message, message.hasPrefix("libjxl: decoding error: ") {
                corrupt += 1
                #expect(!message.contains(".cc:"), "\(name): \(message)")
            }
        }
        #expect(corrupt >= 3)
        // A capture ends with its decode: the next decode on this thread starts clean.
        let good = Fixtures.bytes("modern/images/jxl-lossy.jxl")
        #expect(try ImageDecoder().decode(.bytes(good)).width > 0)
    }

    @Test(
        "a 24-megapixel JPEG XL photo decodes within the default limits; with alpha it is refused before libjxl allocates"
    )
    func jxlWorkingMemory() throws {
        // A camera's size (5968x3979), encoded by libjxl at its fastest effort.
        let (width, height) = (5968, 3979)
        var row = [UInt8](repeating: 255, count: width * 4)
        for x in 0..<width { (row[x * 4], row[x * 4 + 1], row[x * 4 + 2]) = (UInt8(x & 255), UInt8(x >> 4 & 255), 128) }
        var pixels: [UInt8] = []
        pixels.reserveCapacity(width * height * 4)
        for _ in 0..<height { pixels.append(contentsOf: row) }
        let photo = try #require(RasterImage(width: width, height: height, pixels: pixels, hasAlpha: false))
        let encoded = try JXLEncoder(quality: 80, effort: 1).encode(photo)
        let decoded = try ImageDecoder().decode(.bytes(encoded))
        #expect(decoded.width == width && decoded.height == height)
        // The same photo with alpha makes libjxl 0.7 keep whole float planes.
        let withAlpha = try #require(RasterImage(width: width, height: height, pixels: pixels, hasAlpha: true))
        let translucent = try JXLEncoder(quality: 80, effort: 1).encode(withAlpha)
        let error = expectDecodingError { _ = try ImageDecoder().decode(.bytes(translucent)) }
        guard case .tooMuchWorkingMemory(_, let limit) = error?.reason else {
            Issue.record("\(String(describing: error))")
            return
        }
        #expect(limit == DecodingLimits().maxWorkingBytes)
    }

    @Test("a HEIF file's embedded thumbnail is used only when asked for, and only when large enough")
    func embeddedThumbnail() throws {
        let source = ImageSource.file(path: Self.path("images/heif-thumbnail.heic"))
        var options = ThumbnailOptions(maxPixelSize: 16)
        options.usesEmbeddedThumbnail = true
        let fromEmbedded = try ImageDecoder().thumbnail(source, options: options)
        #expect(fromEmbedded.width == 16 && fromEmbedded.height == 12)
        let main = try ImageDecoder().thumbnail(source, options: ThumbnailOptions(maxPixelSize: 16))
        #expect(difference(fromEmbedded.pixels, main.pixels, width: 16).mean < 8)
        // Larger than the 32-pixel embedded thumbnail: the main image.
        options.width = 60
        options.height = 60
        #expect(try ImageDecoder().thumbnail(source, options: options).width == 60)
    }

    @Test("frames of AVIF and JPEG XL animations can be picked; HEIF has one")
    func frames() throws {
        for name in ["avif-animation", "jxl-animation"] {
            let fixture = Fixtures.named(name)
            let image = try ImageDecoder(options: DecodingOptions(frames: .index(2))).decode(.bytes(fixture.bytes))
            #expect(image.frames.count == 1)
            #expect(
                difference(image.pixels, fixture.expectedFrames[2], width: image.width).maximum <= fixture.tolerance)
            let beyond = expectDecodingError {
                _ = try ImageDecoder(options: DecodingOptions(frames: .index(3))).decode(.bytes(fixture.bytes))
            }
            guard case .frameOutOfRange = beyond?.reason else {
                Issue.record("\(name): \(String(describing: beyond))")
                continue
            }
        }
        let heif = expectDecodingError {
            _ = try ImageDecoder(options: DecodingOptions(frames: .index(1))).decode(
                .file(path: Self.path("images/heif-8bit.heic")))
        }
        #expect(heif?.reason == .frameOutOfRange(index: 1, count: 1))
    }
}
