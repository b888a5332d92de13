import RasterImage
import Testing

@Suite("The format table: every view of a format derives from its one entry")
struct FormatTableTests {
    @Test("each writable format has an encoder writing that format, and only those")
    func writableFormatsHaveEncoders() throws {
        let image = try #require(RasterImage(width: 2, height: 2, pixels: [UInt8](repeating: 200, count: 16)))
        for format in ImageFormat.allCases {
            let output = OutputFormat(format)
            #expect((output != nil) == format.traits.isWritable, "\(format)")
            if let output { #expect(output.encoder(for: image).format == format, "\(format)") }
        }
        #expect(!ImageFormat.writable.contains(.svg))
    }

    @Test("names, media types and extensions lead back to their format")
    func namesRoundTrip() {
        var extensions: [String: ImageFormat] = [:]
        for format in ImageFormat.allCases {
            let traits = format.traits
            #expect(!traits.fileExtensions.isEmpty && !traits.contentTypes.isEmpty, "\(format)")
            #expect(format.fileExtension == traits.fileExtensions[0])
            #expect(format.contentType == traits.contentTypes[0])
            for type in traits.contentTypes {
                #expect(ImageFormat(contentType: type.uppercased()) == format, "\(type)")
            }
            for name in traits.fileExtensions {
                // One extension names one format.
                #expect(extensions.updateValue(format, forKey: name) == nil, "\(name)")
                #expect(ImageFormat(fileExtension: name.uppercased()) == format)
                if traits.isWritable { #expect(OutputFormat(fileExtension: name) != nil, "\(name)") }
            }
        }
        #expect(ImageFormat(fileExtension: "txt") == nil && OutputFormat(fileExtension: "svg") == nil)
        // What the extensions were before the table: each still names its format.
        let earlier: [String: ImageFormat] = [
            "jpg": .jpeg, "jpeg": .jpeg, "png": .png, "webp": .webp, "avif": .avif, "jxl": .jxl, "gif": .gif,
            "heic": .heif, "heif": .heif, "ico": .ico, "bmp": .bmp, "tif": .tiff, "tiff": .tiff, "svg": .svg,
        ]
        #expect(extensions == earlier)
    }

    @Test("messages and help list every format the table has")
    func listsDeriveFromTheTable() {
        let unrecognised = ImageDecodingError(.unrecognizedFormat).description
        for format in ImageFormat.allCases { #expect(unrecognised.contains(format.displayName), "\(format)") }
        #expect(unrecognised.contains("ICO or SVG"))
        for name in ImageFormat.writable.flatMap(\.traits.fileExtensions) {
            #expect(OutputFormat.fileExtensionList.contains("." + name))
        }
        #expect(ImageFormat.list(["A"]) == "A" && ImageFormat.list(["A", "B", "C"]) == "A, B or C")
    }

    @Test("a box within the side limits but past the pixel limit says so, with the limit")
    func pixelLimitMessage() throws {
        var options = ThumbnailOptions(width: 8192, height: 8192, fit: .fill)
        options.allowsUpscaling = true
        var limits = DecodingLimits()
        limits.maxPixelsPerFrame = 50_000_000
        let error = #expect(throws: ImageDecodingError.self) {
            _ = try options.resultSize(sourceWidth: 100, sourceHeight: 100, limits: limits)
        }
        #expect(error?.reason == .invalidThumbnailSize(width: 8192, height: 8192))
        #expect(error?.description.contains("more pixels than the decoding limits allow") == true)
        #expect(error?.description.contains("50000000") == true)
        #expect(error?.description.contains("is not possible") == false)
        // A side out of range keeps its own message.
        let side = #expect(throws: ImageDecodingError.self) {
            _ = try ThumbnailOptions(width: 20_000, height: 10).resultSize(sourceWidth: 100, sourceHeight: 100)
        }
        #expect(side?.description.contains("each side 1...16384") == true)
    }
}
