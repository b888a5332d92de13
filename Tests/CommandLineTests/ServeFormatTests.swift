import AsyncHTTPClient
import Foundation
import ImageService
import NIOHTTP1
import RasterImage
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

extension ServeCommandTests {
    /// Source formats judged by their bytes, modern and hostile sources, formats by `Accept`.
    @Suite("imageloader serve: formats")
    struct Formats: ServeTesting {
        @Test("damaged JPEG XL and hostile SVG sources: typed answers, and nothing of libjxl's on the service's output")
        func damagedSources() async throws {
            try await Command.withTemporaryDirectory { directory in
                let source = [UInt8](
                    try Data(
                        contentsOf: Command.repository.appendingPathComponent(
                            "Fixtures/modern/conformance/jxl-lz77_flower.jxl")))
                var flipped = source
                for index in source.count / 2..<source.count / 2 + 16 { flipped[index] ^= 0xFF }
                try Data(flipped).write(to: directory.appendingPathComponent("flipped.jxl"))
                try Data(source.prefix(source.count / 3)).write(to: directory.appendingPathComponent("cut.jxl"))
                let bomb =
                    "<!DOCTYPE svg [<!ENTITY a \"a\"><!ENTITY b \"&a;&a;\">]><svg xmlns=\"http://www.w3.org/2000/svg\"/>"
                try Data(bomb.utf8).write(to: directory.appendingPathComponent("bomb.svg"))
                try await serving(["--allow-unsigned", "--local-root", directory.path]) { server in
                    for name in ["flipped.jxl", "cut.jxl", "bomb.svg"] {
                        let answer = try await server.get("/insecure/w:50/plain/local:///\(name)@png")
                        #expect(answer.status == 422, "\(name)")
                    }
                    #expect(
                        !server.printed.contains("JXL_FAILURE") && !server.printed.contains(".cc:"), "\(server.printed)"
                    )
                }
            }
        }

        @Test("HEIC, AVIF and JPEG XL sources: thumbnails upright, POST /info, and AVIF by Accept with --auto-avif")
        func modernSources() async throws {
            let modern = Command.fixture("modern/images")
            try await serving(["--allow-unsigned", "--local-root", modern, "--auto-avif"]) { server in
                // A HEIF stored on its side (irot) with a clean aperture: 36x50 upright.
                for (name, width, height) in [
                    ("heif-orientation-6.heic", 23, 32), ("avif-irot1.avif", 24, 32), ("jxl-lossy.jxl", 32, 24),
                    ("heif-alpha.heic", 32, 24), ("avif-animation.avif", 32, 24),
                ] {
                    let answer = try await server.get("/insecure/rs:fit:32:32/plain/local:///\(name)@png")
                    #expect(answer.status == 200, "\(name)")
                    let image = try decoded(answer)
                    #expect(image.width == width && image.height == height, "\(name): \(image)")
                }
                let chrome = "image/avif,image/webp,image/apng,*/*;q=0.8"
                let answer = try await server.get(
                    "/insecure/w:32/plain/local:///heif-8bit.heic", headers: [("Accept", chrome)])
                #expect(answer.header("Content-Type") == "image/avif" && answer.header("Vary") == "Accept")
                #expect(try decoded(answer).format == .avif)
                let heic = Array(try Data(contentsOf: URL(fileURLWithPath: modern + "/heif-orientation-6.heic")))
                let info = try await server.post("/info", body: heic)
                let json = try #require(try JSONSerialization.jsonObject(with: Data(info.body)) as? [String: Any])
                #expect(json["format"] as? String == "heif" && json["contentType"] as? String == "image/heif")
                // The header's size is the stored one, as for a JPEG with an EXIF orientation.
                #expect(json["orientation"] as? Int == 6 && json["width"] as? Int == 50 && json["height"] as? Int == 36)
            }
        }

        @Test("with --auto-webp the format follows Accept when the URL names none; every answer then says Vary: Accept")
        func acceptNegotiation() async throws {
            try await serving(["--allow-unsigned", "--local-root", Self.images, "--auto-webp"]) { server in
                let photo = "/insecure/w:64/plain/local:///jpeg-800x600.jpg"
                let alpha = "/insecure/w:64/plain/local:///png-photo-alpha.png"
                let cases: [(String, String?, String, Bool)] = [
                    (photo, "image/avif,image/webp,*/*", "image/webp", true),
                    (photo, "image/webp;q=0, image/*", "image/jpeg", true),
                    (photo, nil, "image/jpeg", true),
                    (alpha, "*/*", "image/png", true),
                    (alpha, "image/webp", "image/webp", true),
                    // The URL's format wins; the answer still says Vary: Accept, as imgproxy's.
                    (photo + "@png", "image/webp", "image/png", true),
                ]
                for (path, accept, contentType, varies) in cases {
                    let answer = try await server.get(path, headers: accept.map { [("Accept", $0)] } ?? [])
                    #expect(answer.header("Content-Type") == contentType, "\(path) \(accept ?? "-")")
                    #expect((answer.header("Vary") == "Accept") == varies, "\(path) \(accept ?? "-")")
                }
                // An animation gives its first frame, still.
                let animated = try await server.get("/insecure/w:32/plain/local:///gif-animation.gif@webp")
                #expect(animated.status == 200)
                #expect(try decoded(animated).frames.count == 1)

                // The ETag is the source's, as imgproxy sends it; Vary: Accept keeps the two apart.
                let webp = try await server.get(photo, headers: [("Accept", "image/webp")])
                let jpeg = try await server.get(photo)
                #expect(webp.header("ETag") == jpeg.header("ETag") && webp.body != jpeg.body)
            }
        }

        @Test("a source is judged by its bytes, not by the Content-Type its origin declares")
        func sourceTypeFromBytes() async throws {
            let origin = try await TestOrigin.start()
            defer { Task { await origin.stop() } }
            let png = TestAssets.png
            let reference = try ImageDecoder().decode(.bytes(png))
            // An object store's default label, a wrong label, none at all, and a page labelled as an image
            origin.serve("/octet", .init(headers: [("Content-Type", "binary/octet-stream")], body: png))
            origin.serve("/wrong.jpg", .init(headers: [Self.jpeg], body: png))
            origin.serve("/none", .init(headers: [], body: png))
            origin.serve(
                "/page.png", .init(headers: [("Content-Type", "image/png")], body: Array("<html></html>".utf8)))
            try await serving(["--allow-unsigned", "--allow-private-networks", "--disk-cache-mb", "0"]) { server in
                for path in ["/octet", "/wrong.jpg", "/none"] {
                    let answer = try await server.get(
                        "/insecure/rs:fit:0:0/f:png/plain/" + origin.url(path).absoluteString)
                    #expect(answer.status == 200, "\(path): \(answer.status) \(answer.text)")
                    let image = try ImageDecoder().decode(.bytes(answer.body))
                    #expect(image.width == reference.width && image.height == reference.height, "\(path)")
                }
                let page = try await server.get("/insecure/w:20/plain/" + origin.url("/page.png").absoluteString)
                #expect(page.status == 422, "\(page.status) \(page.text)")
            }
        }
    }
}
