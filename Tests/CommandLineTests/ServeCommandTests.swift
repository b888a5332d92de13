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

/// `imageloader serve` as a real process, driven over HTTP: signatures, options, format
/// negotiation, validators, errors, address checks, overload and shutdown.
@Suite("imageloader serve", .serialized)
struct ServeCommandTests {
    static let key = "943b421c9eb07c830af81030552c86009268de4e532ba2ee2eab8247c6da0881"
    static let salt = "520f986b998545b4785e0defbc4f3c1203f22de2374a3d53cb7a7fe9fea309c5"
    static let images = Command.fixture("images")
    static let jpeg = ("Content-Type", "image/jpeg")

    /// Starts a server, runs `body`, and stops the server whatever happens.
    func serving(_ arguments: [String], _ body: (ServedProcess) async throws -> Void) async throws {
        let server = try await ServedProcess.start(arguments)
        defer { server.kill() }
        try await body(server)
    }

    func decoded(_ answer: ServedProcess.Answer) throws -> RasterImage {
        try ImageDecoder().decode(.bytes(answer.body))
    }

    /// base64url of `text`, as imgproxy's URL builders write it.
    func encoded(_ text: String) -> String {
        Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    @Test(
        "URLs made by the imgproxy package from PyPI are served; bad, unsigned and rotated signatures answer as they should"
    )
    func signedURLs() async throws {
        // The second pair stands for a key being rotated in.
        let newKey = String(repeating: "ab", count: 32)
        let newSalt = String(repeating: "cd", count: 16)
        try await serving([
            "--key", Self.key, "--salt", Self.salt, "--key", newKey, "--salt", newSalt, "--local-root", Self.images,
        ]) { server in
            // Made by `imgproxy` 1.0.0 from PyPI (scripts/imgproxy-urls.py), with the key and salt above.
            let clientURLs: [(String, Int, Int, ImageFormat)] = [
                (
                    "/hZFrgZXo0Vc8PmsN_vbSUwLkJbPMFjJSUMM9xQTa098/g:ce/rs:fill:300:200:0/bG9jYWw6Ly8vanBlZy04MDB4NjAwLmpwZw.webp",
                    300, 200, .webp
                ),
                (
                    "/Oi8Y2ZvCUepZnE2oEnav8jqAb8jkypOm7J7fNjijm1Q/q:70/g:sowe/rs:auto:64:64:0/bG9jYWw6Ly8vcG5nLXBob3RvLWFscGhhLnBuZw",
                    64, 64, .png
                ),
            ]
            for (path, width, height, format) in clientURLs {
                let answer = try await server.get(path)
                #expect(answer.status == 200, "\(path): \(answer.text)")
                let image = try decoded(answer)
                #expect(image.width == width && image.height == height && image.format == format)
            }
            var tampered = clientURLs[0].0
            tampered.replace("rs:fill:300", with: "rs:fill:301")
            #expect(try await server.get(tampered).status == 403)
            let unsigned = "/insecure/g:ce/rs:fit:120:0:0/bG9jYWw6Ly8vanBlZy04MDB4NjAwLmpwZw"
            let refused = try await server.get(unsigned)
            #expect(refused.status == 403 && refused.header("Cache-Control") == "no-store")

            // The signature covers the path as sent, percent-encoding included.
            let percent = "/w:40/plain/local%3A%2F%2F%2Fjpeg-800x600.jpg@png"
            let signedPercent = try await server.get(
                "/" + URLSignature(hexPairs: [(Self.key, Self.salt)]).sign(percent) + percent)
            #expect(signedPercent.status == 200, "\(signedPercent.text)")
            #expect(try decoded(signedPercent).format == .png)

            let rotated = try URLSignature(hexPairs: [(newKey, newSalt)])
            let path = "/w:50/" + encoded("local:///jpeg-800x600.jpg")
            let answer = try await server.get("/" + rotated.sign(path) + path)
            #expect(answer.status == 200)
            #expect(try decoded(answer).width == 50)
        }
        try await serving(["--allow-unsigned", "--local-root", Self.images]) { server in
            let answer = try await server.get("/insecure/g:ce/rs:fit:120:0:0/bG9jYWw6Ly8vanBlZy04MDB4NjAwLmpwZw")
            #expect(answer.status == 200)
            let image = try decoded(answer)
            #expect(image.width == 120 && image.height == 90)
        }
    }

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
                    !server.printed.contains("JXL_FAILURE") && !server.printed.contains(".cc:"), "\(server.printed)")
            }
        }
    }

    @Test(
        "URLs with every kind of option, made by the imgproxy package from PyPI, are served at the sizes imgproxy gives"
    )
    func clientOptionURLs() async throws {
        let watermark = Command.repository.appendingPathComponent("Fixtures/processing/sources/watermark.png").path
        try await serving([
            "--key", Self.key, "--salt", Self.salt, "--local-root", Self.images, "--watermark-path", watermark,
        ]) { server in
            // scripts/imgproxy-urls.py: crop, background, sharpen; padding, blur; rotate, flip, auto-rotate,
            // cache buster, focus point; extend with gravity, min-width, format quality, max bytes, gravity
            // offsets; trim, pixelate, zoom, dpr, file name, attachment, expiry; watermark, metadata, profile.
            let urls: [(String, Int, Int, ImageFormat)] = [
                (
                    "/UYlKMGvJMPi4g7RQABeR7le4yCdF_lnhnwsqAdZD1Yw/c:400:300:nowe/bg:ffffff/sh:0.5/g:ce/rs:fill:200:150:0/bG9jYWw6Ly8vanBlZy04MDB4NjAwLmpwZw.jpg",
                    200, 150, .jpeg
                ),
                (
                    "/dEtIKmshjdWQE_fSdBBblw1ScP-IIq08OFfnUsGQiK0/pd:10:20/bg:255:0:0/bl:1.5/g:ce/rs:fit:160:160:0/bG9jYWw6Ly8vanBlZy04MDB4NjAwLmpwZw.png",
                    200, 140, .png
                ),
                (
                    "/X2i7NJ1x-pOYCyqPn8QUxACoMsPuNpTa4lTR9OZnpnc/rot:90/fl:1:0/ar:0/cb:v2/g:fp:0.3:0.7/rs:fill:90:120:0/bG9jYWw6Ly8vanBlZy04MDB4NjAwLmpwZw.webp",
                    90, 120, .webp
                ),
                (
                    "/Liz3ZQQ7FBA4m2_1gQ6H1vSrbtXJEfd6NsXtfq27Xl0/ex:1:so/exar:0/mw:50/fq:webp:60:jpeg:70/mb:20000/g:ea:10:0.1/rs:fit:300:300:0/bG9jYWw6Ly8vanBlZy04MDB4NjAwLmpwZw.webp",
                    300, 300, .webp
                ),
                (
                    "/jnJ3M5l_diJVrVVqZ6NHV3scrqqdYwnqdi-FpuVLgmg/t:10:ffffff:1:0/pix:4/z:0.5/dpr:2/fn:photo/att:1/exp:4102444800/g:ce/rs:auto:100:0:0/bG9jYWw6Ly8vanBlZy04MDB4NjAwLmpwZw",
                    100, 75, .jpeg
                ),
                (
                    "/rUfEM_YkA7PZliRVpNO9ejb-yC3THoZQZTH7gksduEo/wm:0.5:soea:5:5:0.2/sm:1/kcr:1/scp:0/eth:0/g:ce/rs:fill-down:120:80:0/bG9jYWw6Ly8vanBlZy04MDB4NjAwLmpwZw.png",
                    120, 80, .png
                ),
            ]
            for (path, width, height, format) in urls {
                let answer = try await server.get(path)
                #expect(answer.status == 200, "\(path): \(answer.text)")
                let image = try decoded(answer)
                #expect(image.width == width && image.height == height && image.format == format, "\(path)")
            }
            let named = try await server.get(urls[4].0)
            #expect(named.header("Content-Disposition") == "attachment; filename=\"photo.jpg\"")
        }
    }

    @Test("every option changes the result as imgproxy documents it")
    func options() async throws {
        try await Command.withTemporaryDirectory { directory in
            // Left half red, right half blue, top row of the right half green: where a
            // crop lands shows in its colours.
            var pixels: [UInt8] = []
            for y in 0..<100 {
                for x in 0..<200 {
                    pixels += x < 100 ? [255, 0, 0, 255] : (y < 10 ? [0, 255, 0, 255] : [0, 0, 255, 255])
                }
            }
            let halves = try RasterImage(width: 200, height: 100, pixels: pixels, hasAlpha: false)!
                .encoded(as: .png(PNGEncoder()))
            try Data(halves.bytes).write(to: directory.appendingPathComponent("halves.png"))
            let photo = "/plain/local:///jpeg-800x600.jpg"
            let halvesSource = "/plain/local:///halves.png"
            try FileManager.default.copyItem(
                atPath: Self.images + "/jpeg-800x600.jpg",
                toPath: directory.appendingPathComponent("jpeg-800x600.jpg").path)
            try await serving(["--allow-unsigned", "--local-root", directory.path, "--max-result-size", "2000"]) {
                server in
                let sizes: [(String, Int, Int)] = [
                    ("rs:fill:300:200", 300, 200), ("resize:fit:300:300", 300, 225), ("w:100", 100, 75),
                    ("width:100/height:30", 40, 30), ("s:50:50", 50, 38), ("size:50:0", 50, 38),
                    ("rs:force:50:50", 50, 50), ("rt:force/w:10/h:90", 10, 90), ("resizing_type:fill/s:90:90", 90, 90),
                    ("w:100/dpr:2", 200, 150), ("w:1600", 800, 600), ("w:1600/el:1", 1600, 1200),
                    ("w:1600/enlarge:t", 1600, 1200), ("rs:fill-down:1600:1200", 800, 600),
                    ("rs:fill-down:1000:500", 800, 400), ("rs:auto:100:300", 100, 75), ("rs:auto:300:100", 300, 100),
                ]
                for (options, width, height) in sizes {
                    let answer = try await server.get("/insecure/\(options)\(photo)")
                    #expect(answer.status == 200, "\(options): \(answer.text)")
                    let image = try decoded(answer)
                    #expect(
                        image.width == width && image.height == height, "\(options): \(image.width)x\(image.height)")
                }
                // Gravity: a square crop of the 2:1 image keeps one half.
                for (gravity, expected) in [("we", (255, 0, 0)), ("ea", (0, 0, 255)), ("noea", (0, 255, 0))] {
                    let answer = try await server.get("/insecure/rs:fill:40:40/g:\(gravity)/f:png\(halvesSource)")
                    let image = try decoded(answer)
                    let pixel = try #require(image.pixel(x: 20, y: gravity == "noea" ? 1 : 20))
                    let distance = [
                        abs(Int(pixel.r) - expected.0), abs(Int(pixel.g) - expected.1), abs(Int(pixel.b) - expected.2),
                    ].max()!
                    #expect(distance < 48, "g:\(gravity) \(pixel)")
                }
                // Quality, and the format from f:, ext:, the extension and @.
                let low = try await server.get("/insecure/w:400/q:10/f:jpg\(photo)")
                let high = try await server.get("/insecure/w:400/quality:95/format:jpeg\(photo)")
                #expect(low.body.count * 2 < high.body.count)
                for (path, format) in [
                    ("/insecure/w:64/ext:png\(photo)", ImageFormat.png),
                    ("/insecure/w:64\(photo)@webp", .webp),
                    ("/insecure/w:64/f:avif\(photo)", .avif),
                    ("/insecure/w:64\(photo)@jxl", .jxl),
                    ("/insecure/w:64/" + encoded("local:///jpeg-800x600.jpg") + ".png", .png),
                ] {
                    let answer = try await server.get(path)
                    #expect(answer.header("Content-Type") == "image/\(format.rawValue)", "\(path)")
                    #expect(try decoded(answer).format == format)
                }
                for bad in ["rs:wrong:10:10", "w:-1", "q:101", "nope:1", "dpr:9", "g:up", "f:xyz", "w:10:20"] {
                    let answer = try await server.get("/insecure/\(bad)\(photo)")
                    #expect(answer.status == 404 && answer.header("Cache-Control") == "no-store", "\(bad)")
                }
                // SVG from a raster source: imgproxy's 422 for "cannot save".
                #expect(try await server.get("/insecure/f:svg\(photo)").status == 422)
            }
            // Past --max-result-size: scaled down to it, as imgproxy (a small limit, so the
            // check costs a thumbnail, not a 3-megapixel debug encode on a busy machine).
            try await serving(["--allow-unsigned", "--local-root", directory.path, "--max-result-size", "64"]) {
                server in
                let capped = try decoded(try await server.get("/insecure/w:2001/el:1\(photo)"))
                #expect(capped.width == 64 && capped.height == 48)
            }
        }
    }

    @Test("IMGPROXY_* variables configure serve; options win over them; /metrics on its own address")
    func imgproxyEnvironment() async throws {
        try await Command.withTemporaryDirectory { directory in
            for name in ["jpeg-800x600.jpg", "gif-animation.gif"] {
                try FileManager.default.copyItem(
                    atPath: Self.images + "/" + name, toPath: directory.appendingPathComponent(name).path)
            }
            let environment = [
                "IMGPROXY_KEY": Self.key, "IMGPROXY_SALT": Self.salt, "IMGPROXY_SIGNATURE_SIZE": "16",
                "IMGPROXY_LOCAL_FILESYSTEM_ROOT": directory.path, "IMGPROXY_PATH_PREFIX": "/img",
                "IMGPROXY_PRESETS": "default=q:90,tiny=rs:fill:30:20", "IMGPROXY_MAX_RESULT_DIMENSION": "300",
                "IMGPROXY_ALLOWED_SOURCES": "local:///jpeg*,local:///gif-*", "IMGPROXY_AUTO_WEBP": "false",
                "IMGPROXY_MAX_ANIMATION_FRAMES": "50", "IMGPROXY_PROMETHEUS_BIND": "127.0.0.1:0",
                "IMGPROXY_FORMAT_QUALITY": "jpeg=20",
            ]
            let server = try await ServedProcess.start([], environment: environment)
            defer { server.kill() }
            let signature = try URLSignature(hexPairs: [(Self.key, Self.salt)], size: 16)
            func get(_ path: String, accept: String? = nil) async throws -> ServedProcess.Answer {
                try await server.get(
                    "/img/" + signature.sign(path) + path, headers: accept.map { [("Accept", $0)] } ?? [])
            }
            // A preset, under the prefix, signed with 16 bytes.
            let tiny = try await get("/pr:tiny/plain/local:///jpeg-800x600.jpg", accept: "image/webp,*/*")
            #expect(tiny.status == 200, "\(tiny.text)")
            let tinyImage = try decoded(tiny)
            // IMGPROXY_AUTO_WEBP=false: JPEG although Accept lists WebP.
            #expect(tinyImage.width == 30 && tinyImage.height == 20 && tinyImage.format == .jpeg)
            // IMGPROXY_MAX_RESULT_DIMENSION scales down; the default preset's q:90 beats IMGPROXY_FORMAT_QUALITY.
            let capped = try await get("/w:600/el:1/plain/local:///jpeg-800x600.jpg")
            #expect(try decoded(capped).width == 300)
            let low = try await get("/w:300/q:20/plain/local:///jpeg-800x600.jpg")
            #expect(low.body.count * 2 < capped.body.count)
            // Sources outside IMGPROXY_ALLOWED_SOURCES are refused.
            try FileManager.default.copyItem(
                atPath: directory.appendingPathComponent("jpeg-800x600.jpg").path,
                toPath: directory.appendingPathComponent("other.jpg").path)
            #expect(try await get("/w:10/plain/local:///other.jpg").status == 404)
            // IMGPROXY_MAX_ANIMATION_FRAMES: an animated GIF stays animated as WebP.
            let animated = try await get("/w:20/plain/local:///gif-animation.gif@webp")
            #expect(try decoded(animated).frames.count > 1)
            // /metrics on its own address only.
            let line = try #require(
                server.printed.range(of: #"metrics on http://127\.0\.0\.1:(\d+)"#, options: .regularExpression))
            let port = try #require(Int(server.printed[line].split(separator: ":").last!))
            let metrics = try await ServedProcess.request(port: port, "/metrics")
            #expect(metrics.status == 200 && metrics.text.contains("imageservice_requests_total"))
            #expect(try await server.get("/img/metrics").status != 200)
        }
        // A value that is not what the variable takes stops the start with a message.
        let bad = try await Command.run(
            ["serve", "--allow-unsigned", "--port", "0"], environment: ["IMGPROXY_MAX_SRC_RESOLUTION": "lots"])
        #expect(bad.status != 0 && (bad.stderr + bad.stdout).contains("IMGPROXY_MAX_SRC_RESOLUTION"))
        // An option beats its variable: --port 0 although IMGPROXY_BIND names another port.
        let server = try await ServedProcess.start(["--allow-unsigned"], environment: ["IMGPROXY_BIND": "127.0.0.1:1"])
        defer { server.kill() }
        #expect(try await server.get("/health").status == 200)
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

    @Test("ETag and Last-Modified: conditional requests get 304, without processing after a restart")
    func validators() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        let photo = TestAssets.bytes("jpeg-800x600.jpg")
        origin.serve(
            "/p.jpg",
            .init(
                headers: [
                    Self.jpeg, ("ETag", "\"v1\""), ("Last-Modified", "Tue, 03 Nov 2026 10:00:00 GMT"),
                    ("Cache-Control", "max-age=600"),
                ], body: photo))
        try await Command.withTemporaryDirectory { directory in
            let arguments = ["--allow-unsigned", "--allow-private-networks", "--cache-dir", directory.path]
            let path = "/insecure/rs:fit:100:100/plain/" + origin.url("/p.jpg").absoluteString
            var tag = ""
            try await serving(arguments) { server in
                let first = try await server.get(path)
                #expect(first.status == 200)
                tag = try #require(first.header("ETag"))
                #expect(tag == "\"v1\"")  // the source's, as imgproxy passes it on
                #expect(first.header("Last-Modified") == "Tue, 03 Nov 2026 10:00:00 GMT")
                #expect(first.header("Cache-Control") == "max-age=31536000, public")  // IMGPROXY_TTL's default

                let head = try await ServedProcess.request(port: server.port, path, method: .HEAD)
                #expect(head.status == 200 && head.body.isEmpty && head.header("ETag") == tag)
                #expect(head.header("Content-Length") == String(first.body.count))

                let again = try await server.get(path, headers: [("If-None-Match", tag)])
                #expect(again.status == 304 && again.body.isEmpty && again.header("ETag") == tag)
                let since = try await server.get(
                    path, headers: [("If-Modified-Since", "Wed, 04 Nov 2026 10:00:00 GMT")])
                #expect(since.status == 304)
                let older = try await server.get(
                    path, headers: [("If-Modified-Since", "Mon, 02 Nov 2026 10:00:00 GMT")])
                #expect(older.status == 200)
                let otherTag = try await server.get(path, headers: [("If-None-Match", "\"other\"")])
                #expect(otherTag.status == 200)
            }
            // A new process has no results in memory: the source comes from the disk
            // cache, its tag matches, and nothing is processed.
            try await serving(arguments) { server in
                let answer = try await server.get(path, headers: [("If-None-Match", tag)])
                #expect(answer.status == 304)
                #expect(try await server.metric("imageservice_processing_seconds_count") == 0)
                #expect(origin.count("/p.jpg") == 1)
            }
        }
    }

    @Test("a stored source within stale-if-error is served while its origin fails, after a restart too")
    func staleSourceWhileOriginFails() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        let photo = TestAssets.bytes("jpeg-800x600.jpg")
        origin.route("/s.jpg") { _, count in
            count == 1
                ? .init(
                    headers: [Self.jpeg, ("ETag", "\"s\""), ("Cache-Control", "max-age=0, stale-if-error=600")],
                    body: photo)
                : .init(status: 503)
        }
        try await Command.withTemporaryDirectory { directory in
            let arguments = ["--allow-unsigned", "--allow-private-networks", "--cache-dir", directory.path]
            let source = origin.url("/s.jpg").absoluteString
            try await serving(arguments) { server in
                #expect(try await server.get("/insecure/w:80/plain/" + source).status == 200)
                // Another size: no stored result, so the (stale) source is asked for again.
                let stale = try await server.get("/insecure/w:60/plain/" + source)
                #expect(stale.status == 200, "\(stale.status) \(stale.text)")
                #expect(try decoded(stale).width == 60)
                #expect(origin.count("/s.jpg") == 2)
                #expect(origin.requests("/s.jpg")[1].header("If-None-Match") == "\"s\"")
            }
            try await serving(arguments) { server in
                let restarted = try await server.get("/insecure/w:40/plain/" + source)
                #expect(restarted.status == 200, "\(restarted.status) \(restarted.text)")
                #expect(origin.count("/s.jpg") == 3)
            }
        }
    }

    @Test("a 304 naming another entity tag is not trusted: the source is fetched again, unconditionally")
    func mismatchedNotModifiedSource() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        let photo = TestAssets.bytes("jpeg-800x600.jpg")
        let png = TestAssets.png
        origin.route("/t.jpg") { _, count in
            switch count {
            case 1: .init(headers: [Self.jpeg, ("ETag", "\"one\""), ("Cache-Control", "max-age=0")], body: photo)
            case 2: .init(status: 304, headers: [("ETag", "\"two\"")])
            default: .init(headers: [("Content-Type", "image/png"), ("ETag", "\"two\"")], body: png)
            }
        }
        try await Command.withTemporaryDirectory { directory in
            try await serving(["--allow-unsigned", "--allow-private-networks", "--cache-dir", directory.path]) {
                server in
                let source = origin.url("/t.jpg").absoluteString
                #expect(try await server.get("/insecure/w:80/plain/" + source).status == 200)
                let again = try await server.get("/insecure/w:30/plain/" + source)
                #expect(again.status == 200, "\(again.status) \(again.text)")
                // The new representation (the 48x32 PNG: 30x20), not the stored 800x600 JPEG (30x23).
                let image = try decoded(again)
                #expect(image.width == 30 && image.height == 20)
                #expect(origin.count("/t.jpg") == 3)
                #expect(origin.requests("/t.jpg")[2].header("If-None-Match") == nil)
            }
        }
    }

    @Test("each failure answers with its status, a short text and no-store; a missing source may be cached briefly")
    func errors() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        let photo = TestAssets.bytes("jpeg-800x600.jpg")
        origin.serve("/missing.jpg", .init(status: 404))
        origin.serve("/broken.jpg", .init(status: 500))
        origin.serve("/text.jpg", .init(headers: [("Content-Type", "text/plain")], body: Array("hello".utf8)))
        // The header cut off before the first scan.
        origin.serve("/corrupt.jpg", .init(headers: [Self.jpeg], body: Array(photo.prefix(300))))
        // Held until the origin stops: past any timeout.
        origin.serve("/slow.jpg", .init(headers: [Self.jpeg], body: photo, gate: Gate()))
        origin.serve("/large.jpg", .init(headers: [Self.jpeg], body: photo))
        let refusing = try RefusingPort()
        defer { refusing.close() }
        try await serving([
            "--allow-unsigned", "--allow-private-networks", "--timeout", "1", "--max-src-bytes", "150000",
            "--max-src-pixels", "400000", "--local-root", Self.images, "--disk-cache-mb", "0",
        ]) { server in
            func status(_ source: String) async throws -> ServedProcess.Answer {
                try await server.get("/insecure/w:50/plain/" + source)
            }
            let missing = try await status(origin.url("/missing.jpg").absoluteString)
            #expect(missing.status == 404 && missing.header("Cache-Control") == "public, max-age=60")
            #expect(missing.text == "source not found\n")
            // imgproxy's statuses (the missing source's 404 alone may be cached).
            let expected: [(String, Int)] = [
                (origin.url("/broken.jpg").absoluteString, 502),
                (origin.url("/text.jpg").absoluteString, 422),
                (origin.url("/corrupt.jpg").absoluteString, 422),
                // Past the request's --timeout (the download's own is longer): 503.
                (origin.url("/slow.jpg").absoluteString, 503),
                (origin.url("/large.jpg").absoluteString, 422),  // 173,777 bytes
                ("local:///jpeg-800x600.jpg", 422),  // 480,000 pixels
                ("local:///../CommandLineTests/ServeCommandTests.swift", 404),
                ("local:///nothing-here.jpg", 404),
                ("ftp://example.com/a.jpg", 404),
                // No connection can be made: a 502 at once (within the 1 s timeout, or it
                // would be a 504), the cause in the log only.
                (refusing.url("/a.jpg").absoluteString, 502),
                ("http://no-such-host.invalid/a.jpg", 502),
            ]
            for (source, code) in expected {
                let answer = try await status(source)
                #expect(answer.status == code, "\(source): \(answer.status) \(answer.text)")
                #expect(answer.header("Content-Type") == "text/plain; charset=utf-8")
                let cacheable = source.hasSuffix("nothing-here.jpg")
                #expect(cacheable || answer.header("Cache-Control") == "no-store", "\(source)")
                #expect(answer.body.count < 200 && !answer.text.contains("Swift"), "\(source): \(answer.text)")
            }
            #expect(try await status(refusing.url("/a.jpg").absoluteString).text == "source refused the connection\n")
            // The access log's line says why, with the source: what an operator needs.
            let log = server.printed.split(separator: "\n")
            #expect(
                log.contains {
                    $0.contains(" 502") && $0.contains("connection refused by 127.0.0.1:\(refusing.port)")
                }, "\(server.printed)")
            #expect(log.contains { $0.contains(" 502") && $0.contains("cannot resolve no-such-host.invalid") })
            #expect(log.contains { $0.contains(" 502") && $0.contains("HTTP status 500") })
        }
        try await serving([
            "--allow-unsigned", "--allow-private-networks", "--allow-source", "https://images.example.com/",
        ]) {
            server in
            let answer = try await server.get("/insecure/w:50/plain/" + origin.url("/large.jpg").absoluteString)
            #expect(answer.status == 404 && answer.text == "source not allowed\n")
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
        origin.serve("/page.png", .init(headers: [("Content-Type", "image/png")], body: Array("<html></html>".utf8)))
        try await serving(["--allow-unsigned", "--allow-private-networks", "--disk-cache-mb", "0"]) { server in
            for path in ["/octet", "/wrong.jpg", "/none"] {
                let answer = try await server.get("/insecure/rs:fit:0:0/f:png/plain/" + origin.url(path).absoluteString)
                #expect(answer.status == 200, "\(path): \(answer.status) \(answer.text)")
                let image = try ImageDecoder().decode(.bytes(answer.body))
                #expect(image.width == reference.width && image.height == reference.height, "\(path)")
            }
            let page = try await server.get("/insecure/w:20/plain/" + origin.url("/page.png").absoluteString)
            #expect(page.status == 422, "\(page.status) \(page.text)")
        }
    }

    @Test("sources on loopback, private and link-local addresses are refused, also after a redirect")
    func networkSafety() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        origin.serve(
            "/a.png",
            .init(headers: [("Content-Type", "image/png"), ("Cache-Control", "max-age=3600")], body: TestAssets.png))
        // 127.0.0.2 is loopback too, but not the address allowed below.
        origin.serve("/hop", .init(status: 302, headers: [("Location", "http://127.0.0.2:\(origin.port)/a.png")]))
        // (A refused source answers at once; the timeout only keeps a regression from hanging.)
        try await serving(["--allow-unsigned", "--timeout", "30"]) { server in
            let port = origin.port
            for source in [
                "http://127.0.0.1:\(port)/a.png", "http://localhost:\(port)/a.png", "http://[::1]:\(port)/a.png",
                "http://[::ffff:127.0.0.1]:\(port)/a.png", "http://10.0.0.1/a.png", "http://169.254.169.254/a.png",
                "http://192.168.1.1/a.png", "http://100.64.0.1/a.png", "http://[fd00::1]/a.png",
                "http://0.0.0.0:\(port)/a.png",
            ] {
                let answer = try await server.get("/insecure/w:10/plain/" + source)
                #expect(answer.status == 404, "\(source): \(answer.status) \(answer.text)")
                // The answer names the settings that allow such a source.
                #expect(answer.text.contains("--allow-address") && answer.text.contains("--allow-private-networks"))
            }
            #expect(origin.count("/a.png") == 0)
        }
        try await Command.withTemporaryDirectory { directory in
            let cache = ["--cache-dir", directory.path]
            try await serving(["--allow-unsigned", "--allow-address", "127.0.0.1"] + cache) { server in
                let direct = try await server.get("/insecure/w:10/plain/" + origin.url("/a.png").absoluteString)
                #expect(direct.status == 200)
                let redirected = try await server.get("/insecure/w:10/plain/" + origin.url("/hop").absoluteString)
                #expect(redirected.status == 404, "\(redirected.status) \(redirected.text)")
                #expect(origin.count("/hop") == 1 && origin.count("/a.png") == 1)
            }
            // An instance that refuses loopback does not serve what one that allowed it
            // stored in the cache folder they share.
            try await serving(["--allow-unsigned"] + cache) { server in
                let cached = try await server.get("/insecure/w:11/plain/" + origin.url("/a.png").absoluteString)
                #expect(cached.status == 404, "\(cached.status) \(cached.text)")
                #expect(origin.count("/a.png") == 1)
            }
        }
    }

    @Test(
        "past the workers, the fetches ahead and the queue the answer is an immediate 429 with Retry-After (imgproxy's status); a fetch does not hold the worker; identical requests share one run"
    )
    func overload() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        let photo = TestAssets.bytes("jpeg-800x600.jpg")
        // The origin holds every source until the test lets it answer: what the service
        // does meanwhile is seen, whatever the machine's speed.
        let (first, burstGate) = (Gate(), Gate())
        for index in 0..<8 {
            origin.serve(
                "/slow\(index).jpg",
                .init(headers: [Self.jpeg, ("Cache-Control", "max-age=60")], body: photo, gate: first))
            origin.serve(
                "/held\(index).jpg",
                .init(headers: [Self.jpeg, ("Cache-Control", "max-age=60")], body: photo, gate: burstGate))
        }
        func atOrigin(_ prefix: String) -> Int { origin.arrivalOrder.filter { $0.hasPrefix(prefix) }.count }
        try await serving([
            "--allow-unsigned", "--allow-private-networks", "--workers", "1", "--fetches-ahead", "1", "--queue", "1",
        ]) { server in
            let (answers, fetchedTogether) = try await withThrowingTaskGroup(of: (Int, String?).self) { group in
                for index in 0..<8 {
                    group.addTask {
                        let answer = try await server.get(
                            "/insecure/w:50/plain/" + origin.url("/slow\(index).jpg").absoluteString)
                        return (answer.status, answer.header("Retry-After"))
                    }
                }
                // Five are answered while the origin still holds every source: refused at once.
                var answers: [(Int, String?)] = []
                while answers.count < 5, let next = try await group.next() { answers.append(next) }
                // The worker's request and the one ahead of it download side by side (a
                // fetch does not hold the worker); the waiting one is not at the origin.
                try await waitUntil("both admitted requests at the origin") { atOrigin("/slow") == 2 }
                let fetchedTogether = atOrigin("/slow")
                first.open()
                while let next = try await group.next() { answers.append(next) }
                return (answers, fetchedTogether)
            }
            #expect(answers.prefix(5).allSatisfy { $0.0 == 429 && $0.1 == "1" }, "\(answers)")
            #expect(fetchedTogether == 2)
            #expect(answers.filter { $0.0 == 200 }.count == 3, "\(answers)")
            #expect(answers.filter { $0.0 == 429 }.count == 5, "\(answers)")

            // A burst of 200 more, its sources held: the refused ones hold nothing, so memory
            // stays where one worker, one fetch ahead and one waiter put it (a debug build's
            // own size included).
            let burst = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<200 {
                    group.addTask {
                        try await server.get(
                            "/insecure/w:\(40 + index)/plain/" + origin.url("/held\(index % 7).jpg").absoluteString
                        ).status
                    }
                }
                var statuses: [Int] = []
                while statuses.count < 197, let next = try await group.next() { statuses.append(next) }
                burstGate.open()
                while let next = try await group.next() { statuses.append(next) }
                return statuses
            }
            #expect(burst.prefix(197).allSatisfy { $0 == 429 } && burst.filter { $0 == 200 }.count == 3, "\(burst)")
            // Nothing waits any more, and the gauge says so (it is not left at its last arrival's value).
            #expect(try await server.metric("imageservice_queue_depth") == 0)
            #expect(server.peakMemoryKiB < 160_000, "peak RSS \(server.peakMemoryKiB) KiB")

            // Ten identical requests: one fetch, one processing.
            let processedBefore = try await server.metric("imageservice_processing_seconds_count")
            let shared = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<10 {
                    group.addTask {
                        try await server.get("/insecure/w:60/plain/" + origin.url("/slow7.jpg").absoluteString).status
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(shared.allSatisfy { $0 == 200 }, "\(shared)")
            #expect(origin.count("/slow7.jpg") <= 1)
            #expect(try await server.metric("imageservice_processing_seconds_count") == processedBefore + 1)
        }
    }

    @Test(
        "a client that leaves stops its request: its download and its place are freed at once, and it is counted as 499"
    )
    func clientDeparture() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        let photo = TestAssets.bytes("jpeg-800x600.jpg")
        // Held until the origin stops: the service can only end them by noticing the departures.
        let never = Gate()
        for index in 0..<3 {
            origin.serve("/slow\(index).jpg", .init(headers: [Self.jpeg], body: photo, gate: never))
        }
        origin.serve("/fast.jpg", .init(headers: [Self.jpeg], body: photo))
        try await serving([
            "--allow-unsigned", "--allow-private-networks", "--workers", "1", "--fetches-ahead", "1", "--queue", "1",
        ]) { server in
            // Three requests fill the service (a worker's download, one ahead, one waiting);
            // their clients give up after 0.3 s and close their connections.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<3 {
                    group.addTask {
                        let path = "/insecure/w:50/plain/" + origin.url("/slow\(index).jpg").absoluteString
                        await #expect(throws: HTTPClientError.self) {
                            _ = try await server.get(path, timeout: .milliseconds(300))
                        }
                    }
                }
                try await group.waitForAll()
            }
            // The service notices (its sources never answer), ends them as 499 ...
            try await waitUntil("the three were counted as 499") {
                try await server.metric("imageservice_requests_total{status=\"499\"}") == 3
            }
            #expect(origin.count("/slow0.jpg") + origin.count("/slow1.jpg") + origin.count("/slow2.jpg") >= 2)
            // ... gives their places back (the work they shared unwinds after the answer) ...
            try await waitUntil("the departed requests gave their places back") {
                let active = try await server.metric("imageservice_requests_active")
                let queued = try await server.metric("imageservice_queue_depth")
                return active == 0 && queued == 0
            }
            // ... and their places are free: three more are all served, where a service still
            // working for the departed would refuse them with 503.
            let answers = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<3 {
                    group.addTask {
                        try await server.get(
                            "/insecure/w:\(60 + index)/plain/" + origin.url("/fast.jpg").absoluteString
                        )
                        .status
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers == [200, 200, 200], "\(answers)")
            #expect(server.printed.contains(" 499"))
        }
    }

    @Test("the workers run --worker-niceness below the event loops")
    func workerNiceness() async throws {
        try await serving(["--allow-unsigned", "--local-root", Self.images, "--workers", "1", "--worker-niceness", "7"])
        {
            server in
            // Given a served thumbnail (a worker has run)
            let answer = try await server.get("/insecure/w:50/plain/local:///jpeg-800x600.jpg")
            #expect(answer.status == 200)
            // Then, read from /proc: a thread runs 7 below the main thread, and the event loops at its level
            let pid = server.process.processIdentifier
            let threads = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task").map { tid in
                let comm = try String(contentsOfFile: "/proc/\(pid)/task/\(tid)/comm", encoding: .utf8)
                let stat = try String(contentsOfFile: "/proc/\(pid)/task/\(tid)/stat", encoding: .utf8)
                // The fields after the name (which may hold spaces): state is the 3rd field, nice the 19th.
                let fields = stat[stat.range(of: ")", options: .backwards)!.upperBound...].split(separator: " ")
                return (
                    tid: Int(tid)!, name: comm.trimmingCharacters(in: .whitespacesAndNewlines), nice: Int(fields[16])!
                )
            }
            let main = try #require(threads.first { $0.tid == Int(pid) })
            #expect(threads.contains { $0.nice == main.nice + 7 }, "\(threads)")
            let loops = threads.filter { $0.name.hasPrefix("NIO-") }
            #expect(!loops.isEmpty && loops.allSatisfy { $0.nice == main.nice }, "\(threads)")
        }
    }

    @Test(
        "connections: past --max-connections one is closed when accepted; silent, half-sent and idle keep-alive ones after --idle-timeout; one whose body trickles after --timeout; a request that takes longer is not cut"
    )
    func connectionBounds() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        origin.serve(
            "/slow.jpg", .init(headers: [Self.jpeg], body: TestAssets.bytes("jpeg-800x600.jpg"), delay: 2.5))
        let arguments = [
            "--allow-unsigned", "--allow-private-networks", "--idle-timeout", "1", "--max-connections", "3",
            "--timeout", "4",
        ]
        try await serving(arguments) { server in
            let silent = try RawConnection(port: server.port)
            let halfSent = try RawConnection(port: server.port)
            halfSent.send("GET /health HTTP/1.1\r\nHo")
            let keptAlive = try RawConnection(port: server.port)
            keptAlive.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            let answer = try await keptAlive.read(for: 10) {
                String(decoding: $0, as: UTF8.self).hasSuffix("\r\n\r\nimgproxy is running")
            }
            #expect(String(decoding: answer.bytes, as: UTF8.self).hasPrefix("HTTP/1.1 200"), "\(answer)")
            #expect(!answer.closed)

            // A fourth connection finds no place: closed when accepted, nothing written;
            // the count of refusals tells it apart from the idle timeout.
            let extra = try RawConnection(port: server.port)
            let refused = try await extra.read(for: 10)
            #expect(refused.closed && refused.bytes.isEmpty)

            // The three are closed once idle for a second, each without an answer.
            for connection in [silent, halfSent, keptAlive] {
                let rest = try await connection.read(for: 10)
                #expect(rest.closed && rest.bytes.isEmpty, "\(rest)")
            }
            // A GET whose body trickles in keeps resetting the idle timeout. It is answered,
            // and the connection closed once the request has not arrived in full within
            // --timeout (and a second).
            let trickle = try RawConnection(port: server.port)
            trickle.send("GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
            let (received, closedAfter) = await trickle.trickle(every: 0.2, for: 20)
            #expect(String(decoding: received, as: UTF8.self).hasPrefix("HTTP/1.1 200"))
            let closed = try #require(closedAfter)
            #expect(closed > .seconds(2) && closed < .seconds(12), "\(closed)")

            // Their places are free again. A request whose source takes 2.5 s, longer
            // than the idle timeout, is answered in full.
            let slow = try await server.get("/insecure/w:50/plain/" + origin.url("/slow.jpg").absoluteString)
            #expect(slow.status == 200)
            #expect(try decoded(slow).width == 50)
            #expect(try await server.metric("imageservice_connections_refused_total") == 1)
        }
    }

    @Test(
        "request bodies: a declared length over the limit is a 413 before reading, bad chunking a 400, 100 Continue when expected, and slow bodies wait in places of their own, not in those of image requests"
    )
    func requestBodies() async throws {
        let arguments = [
            "--allow-unsigned", "--local-root", Self.images, "--max-src-bytes", "100000", "--workers", "1",
            "--fetches-ahead", "0", "--queue", "0",
        ]
        try await serving(arguments) { server in
            func answer(_ connection: RawConnection) async throws -> String {
                let read = try await connection.read(for: 10) {
                    String(decoding: $0, as: UTF8.self).contains("\r\n\r\n")
                }
                return String(decoding: read.bytes, as: UTF8.self)
            }
            // No body is sent: the declared length alone is refused.
            let declared = try RawConnection(port: server.port)
            declared.send("POST /info HTTP/1.1\r\nHost: x\r\nContent-Length: 100001\r\n\r\n")
            #expect(try await answer(declared).hasPrefix("HTTP/1.1 413"))
            let chunked = try RawConnection(port: server.port)
            chunked.send("POST /info HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n")
            #expect(try await answer(chunked).hasPrefix("HTTP/1.1 400"))
            // A client that expects 100 Continue is told to send its body, then answered.
            let png = TestAssets.bytes("png-rgb8.png")
            let expecting = try RawConnection(port: server.port)
            expecting.send(
                "POST /info HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: \(png.count)\r\n\r\n")
            #expect(try await answer(expecting) == "HTTP/1.1 100 Continue\r\n\r\n")
            expecting.send(png)
            #expect(try await answer(expecting).hasPrefix("HTTP/1.1 200"))

            // Two bodies that never end: one holds the only place for bodies, the other
            // finds none (429, queue 0).
            let slow = try (0..<2).map { _ in try RawConnection(port: server.port) }
            for connection in slow {
                connection.send("POST /info HTTP/1.1\r\nHost: x\r\nContent-Length: 50000\r\n\r\n0123456789")
            }
            let first = try await slow[0].read(for: 3) { !$0.isEmpty }
            let second = try await slow[1].read(for: 3) { !$0.isEmpty }
            let answers = [first, second].map { String(decoding: $0.bytes, as: UTF8.self) }
            #expect(answers.filter { $0.hasPrefix("HTTP/1.1 429") }.count == 1, "\(answers)")
            #expect(answers.filter(\.isEmpty).count == 1, "\(answers)")
            // The one worker's place is free: an image request is answered at once.
            let image = try await server.get("/insecure/rs:fit:40:40/plain/local:///png-rgb8.png@png")
            #expect(image.status == 200)
        }
    }

    @Test("SIGTERM: requests in flight finish, then the process exits 0")
    func gracefulShutdown() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        let sourceAnswer = Gate()
        origin.serve(
            "/slow.jpg", .init(headers: [Self.jpeg], body: TestAssets.bytes("jpeg-800x600.jpg"), gate: sourceAnswer))
        let server = try await ServedProcess.start(["--allow-unsigned", "--allow-private-networks"])
        defer { server.kill() }
        let inFlight = Task {
            try await server.get("/insecure/w:50/plain/" + origin.url("/slow.jpg").absoluteString)
        }
        try await waitUntil("the request reached the origin") { origin.count("/slow.jpg") == 1 }
        kill(server.process.processIdentifier, SIGTERM)
        // The source answers once the shutdown has begun (the server no longer accepts).
        try await waitUntil("the listening socket closed") { (try? RawConnection(port: server.port)) == nil }
        sourceAnswer.open()
        let status = await server.exitStatus()
        let answer = try await inFlight.value
        #expect(answer.status == 200)
        #expect(try decoded(answer).width == 50)
        #expect(status == 0, "\(server.printed)")
    }

    @Test(
        "POST /info describes the body; uploads only when enabled; /health; /metrics; one access-log line per request")
    func infoUploadHealthMetrics() async throws {
        let photo = TestAssets.bytes("jpeg-800x600.jpg")
        try await serving(["--allow-unsigned", "--max-src-bytes", "400000"]) { server in
            let info = try await server.post("/info", body: TestAssets.bytes("png-photo-alpha.png"))
            let json = try #require(try JSONSerialization.jsonObject(with: Data(info.body)) as? [String: Any])
            #expect(json["format"] as? String == "png" && json["width"] as? Int == 400 && json["height"] as? Int == 300)
            #expect(
                json["hasAlpha"] as? Bool == true && json["frames"] as? Int == 1 && json["orientation"] as? Int == 1)
            #expect(json["contentType"] as? String == "image/png")
            #expect(try await server.post("/info", body: Array("not an image".utf8)).status == 422)
            #expect(try await server.post("/info", body: photo + photo + photo).status == 413)
            #expect(try await server.post("/upload/w:10", body: photo).status == 404)

            let health = try await server.get("/health")
            #expect(health.status == 200 && health.text == "imgproxy is running")
            let metrics = try await server.get("/metrics")
            #expect(metrics.text.contains("imageservice_requests_total{status=\"200\"}"))
            #expect(metrics.text.contains("imageservice_requests_total{status=\"422\"}"))
            #expect(metrics.header("Content-Type")?.hasPrefix("text/plain") == true)
            let id = try #require(health.header("X-Request-Id"))
            try await waitUntil("the access log has the request") {
                server.printed.split(separator: "\n").contains { $0.contains(id) && $0.contains("GET /health 200") }
            }
        }
        try await serving(["--allow-unsigned", "--allow-uploads"]) { server in
            let answer = try await server.post("/upload/rs:fill:32:32/f:webp", body: photo)
            #expect(answer.status == 200 && answer.header("Cache-Control") == "no-store")
            let image = try decoded(answer)
            #expect(image.width == 32 && image.height == 32 && image.format == .webp)
            #expect(try await server.post("/upload/bogus", body: photo).status == 404)
        }
    }
}
