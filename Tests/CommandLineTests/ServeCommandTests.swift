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

/// `imageloader serve` as a real process, driven over HTTP: signatures, options and the
/// routes here; formats, caching and limits in the nested suites (ServeFormatTests.swift,
/// ServeCachingTests.swift, ServeLimitTests.swift), serialized with these: each starts
/// processes whose timing the others would disturb.
@Suite("imageloader serve", .serialized)
struct ServeCommandTests: ServeTesting {
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
