import Foundation
import RasterImage
import TestSupport
import Testing

@testable import ImageService

/// Every format imgproxy serves, through the service: HEIC, ICO, BMP and TIFF results,
/// ICO and SVG sources, SVG passed through sanitised, and HEIC chosen by `Accept`.
@Suite("Formats through the service")
struct FormatServiceTests {
    typealias References = ProcessingReferenceTests

    /// A source folder with the fixtures these tests ask for, and an SVG with a script.
    static func withSources(_ body: (String) async throws -> Void) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("formats-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let fixtures = FixturePaths.root
        for (source, name) in [
            ("formats/shapes.svg", "shapes.svg"), ("formats/ico-png-sizes.ico", "icon.ico"),
            ("images/png-rgba8.png", "photo.png"), ("images/gif-animation.gif", "animation.gif"),
        ] {
            try FileManager.default.copyItem(atPath: fixtures + "/" + source, toPath: folder.path + "/" + name)
        }
        let hostile =
            #"<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20" onload="alert(1)">"#
            + #"<script>alert(2)</script><rect width="40" height="20" fill="red"/></svg>"#
        try Data(hostile.utf8).write(to: folder.appendingPathComponent("hostile.svg"))
        try await body(folder.path)
    }

    static func configuration(_ root: String) -> ImageService.Configuration {
        var configuration = References.configuration()
        configuration.sources = SourcePolicy(localRoot: root)
        return configuration
    }

    static func result(_ reply: Reply, _ label: String) throws -> ProcessedResult {
        guard case .image(let result) = reply else {
            Issue.record("\(label): \(reply)")
            throw CancellationError()
        }
        return result
    }

    @Test("HEIC, ICO, BMP and TIFF results: their content types, sizes and pixels; ICO fitted to 256")
    func results() async throws {
        try await Self.withSources { root in
            try await References.withService(Self.configuration(root)) { service in
                let source = try ImageDecoder().decode(.file(path: root + "/photo.png"))
                for (format, contentType) in [
                    ("heic", "image/heif"), ("ico", "image/x-icon"), ("bmp", "image/bmp"), ("tiff", "image/tiff"),
                ] {
                    let result = try Self.result(
                        await References.get(service, "/_/plain/local:///photo.png@\(format)"), format)
                    #expect(result.meta.contentType == contentType, "\(format)")
                    let image = try ImageDecoder().decode(.bytes(Array(result.body.readableBytesView)))
                    #expect(image.width == source.width && image.height == source.height, "\(format)")
                    let difference = PixelDifference(image.straightAlpha(), source.straightAlpha())
                    // Lossless but HEIC, whose alpha and colour are coded lossily.
                    #expect(difference.mean <= (format == "heic" ? 6 : 0), "\(format): \(difference)")
                }
                let large = try Self.result(
                    await References.get(service, "/_/rs:fit:600:600:1/plain/local:///photo.png@ico"), "ico")
                let icon = try ImageDecoder().decode(.bytes(Array(large.body.readableBytesView)))
                #expect(max(icon.width, icon.height) == 256)
            }
        }
    }

    @Test(
        "an SVG source: passed through sanitised by default or when SVG is asked for; rasterised at the size asked for")
    func svgSources() async throws {
        try await Self.withSources { root in
            try await References.withService(Self.configuration(root)) { service in
                for path in [
                    "/_/plain/local:///hostile.svg", "/_/plain/local:///hostile.svg@svg",
                    "/_/raw:1/plain/local:///hostile.svg",
                    "/_/skp:svg/plain/local:///hostile.svg",
                ] {
                    let result = try Self.result(await References.get(service, path), path)
                    let text = String(decoding: result.body.readableBytesView, as: UTF8.self)
                    #expect(result.meta.contentType == "image/svg+xml", "\(path)")
                    #expect(
                        text.contains("<rect") && !text.contains("script") && !text.contains("onload"),
                        "\(path): \(text)")
                }
                // Rasterised: drawn at the requested width, not drawn large and shrunk.
                let png = try Self.result(
                    await References.get(service, "/_/w:240/plain/local:///shapes.svg@png"), "png")
                let image = try ImageDecoder().decode(.bytes(Array(png.body.readableBytesView)))
                #expect(image.width == 240 && image.height == 160)
                let reference = try ImageDecoder().decode(.file(path: FixturePaths.root + "/formats/shapes.resvg.png"))
                let small = try ImageDecoder().decode(
                    .bytes(
                        Array(
                            try Self.result(await References.get(service, "/_/plain/local:///shapes.svg@png"), "png")
                                .body
                                .readableBytesView)))
                #expect(PixelDifference(small.straightAlpha(), reference.straightAlpha()).mean < 3)
                // A raster source cannot become an SVG.
                guard case .failure(let error) = await References.get(service, "/_/plain/local:///photo.png@svg") else {
                    Issue.record("a PNG answered as SVG")
                    return
                }
                #expect(error.status == 422)
            }
            var rasterising = Self.configuration(root)
            rasterising.alwaysRasterizeSVG = true
            try await References.withService(rasterising) { service in
                let result = try Self.result(await References.get(service, "/_/plain/local:///shapes.svg"), "svg")
                #expect(result.meta.contentType == "image/png")
            }
        }
    }

    @Test("an ICO source is processed like any image: the entry the size needs")
    func icoSource() async throws {
        try await Self.withSources { root in
            try await References.withService(Self.configuration(root)) { service in
                let result = try Self.result(
                    await References.get(service, "/_/rs:fit:16:16/plain/local:///icon.ico@png"), "ico")
                let image = try ImageDecoder().decode(.bytes(Array(result.body.readableBytesView)))
                let reference = try ImageDecoder().decode(
                    .file(path: FixturePaths.root + "/formats/ico-png-sizes.16.ref.png"))
                #expect(
                    image.width == 16 && PixelDifference(image.straightAlpha(), reference.straightAlpha()).maximum <= 2)
            }
        }
    }

    @Test("HEIC by Accept only with its setting, after JPEG XL and AVIF, never for animations; Vary says Accept")
    func automaticHEIC() async throws {
        try await Self.withSources { root in
            let safari =
                "image/webp,image/avif,image/jxl,image/heic,image/heic-sequence,video/*;q=0.8,image/png,*/*;q=0.5"
            try await References.withService(Self.configuration(root)) { service in
                let plain = try Self.result(
                    await References.get(service, "/_/plain/local:///photo.png", accept: safari), "off")
                #expect(plain.meta.contentType == "image/png")
            }
            var automatic = Self.configuration(root)
            automatic.autoHEIC = true
            try await References.withService(automatic) { service in
                let heic = try Self.result(
                    await References.get(service, "/_/plain/local:///photo.png", accept: safari), "on")
                #expect(heic.meta.contentType == "image/heif" && heic.meta.vary?.contains("Accept") == true)
                let named = try Self.result(
                    await References.get(service, "/_/plain/local:///photo.png@png", accept: safari), "named")
                #expect(named.meta.contentType == "image/png")
                let animated = try Self.result(
                    await References.get(service, "/_/plain/local:///animation.gif", accept: safari), "gif")
                #expect(animated.meta.contentType == "image/gif")
            }
            automatic.autoAVIF = true
            try await References.withService(automatic) { service in
                let avif = try Self.result(
                    await References.get(service, "/_/plain/local:///photo.png", accept: safari), "avif")
                #expect(avif.meta.contentType == "image/avif")
            }
        }
    }
}
