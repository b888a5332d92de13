import Foundation
import RasterImage
import TestSupport
import Testing

@testable import ImageLoader

@Suite("imageloader load, across separate runs")
struct LoadCommandTests {
    static let png = ("Content-Type", "image/png")

    func events(_ result: CommandResult) throws -> [[String: Any]] {
        try result.stdout.split(separator: "\n").map {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any]
        }
    }

    func summary(_ events: [[String: Any]]) -> [String] {
        events.map { event in
            let name = event["event"] as! String
            switch name {
            case "sendingRequest": return "sendingRequest(\(event["hadCache"] as! Bool))"
            case "failed": return "failed(\(event["status"] as? Int ?? 0))"
            default:
                let freshness = event["freshness"] as? String ?? "fresh"
                return "\(name)(\(event["source"] as! String)\(freshness == "fresh" ? "" : ", \(freshness)"))"
            }
        }
    }

    @Test("thumbnail of a URL: the loader's, shrunk while decoding and kept on disk for the next run")
    func thumbnailOfURL() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        let photo = TestAssets.bytes("jpeg-800x600.jpg")
        origin.serve(
            "/photo.jpg",
            .init(
                headers: [("Content-Type", "image/jpeg"), ("ETag", "\"p\""), ("Cache-Control", "max-age=600")],
                body: photo))
        try await Command.withTemporaryDirectory { directory in
            let url = origin.url("/photo.jpg").absoluteString
            let first = directory.appendingPathComponent("first.png").path
            let second = directory.appendingPathComponent("second.png").path
            let cache = ["--cache-dir", directory.appendingPathComponent("cache").path]
            let made = try await Command.run(["thumbnail", url, "--size", "100", "-o", first] + cache)
            #expect(made.status == 0, "\(made.stderr)")
            // The loader's thumbnail is the library's, from the same bytes: shrink-on-load and all.
            let expected = try ImageDecoder().thumbnail(.bytes(photo), options: ThumbnailOptions(maxPixelSize: 100))
            let image = try ImageDecoder().decode(.file(path: first))
            #expect(image.width == 100 && image.height == 75)
            #expect(image.pixels == expected.pixels)
            // The next run finds the thumbnail on disk: no request, the same bytes.
            let again = try await Command.run(["thumbnail", url, "--size", "100", "-o", second] + cache)
            #expect(again.status == 0, "\(again.stderr)")
            #expect(origin.count("/photo.jpg") == 1)
            #expect(FileManager.default.contents(atPath: first) == FileManager.default.contents(atPath: second))
            let thumbnails = try FileManager.default.subpathsOfDirectory(
                atPath: directory.appendingPathComponent("cache").path)
            #expect(!thumbnails.isEmpty)
        }
    }

    @Test("runs share the disk cache: download, then disk, then a 304 once stale")
    func separateRuns() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        try await Command.withTemporaryDirectory { directory in
            // Fresh for long enough that the second run finds it fresh however slow the machine.
            origin.serve(
                "/a.png",
                .init(headers: [Self.png, ("ETag", "\"a\""), ("Cache-Control", "max-age=600")], body: TestAssets.png))
            origin.route("/b.png") { request, _ in
                request.header("If-None-Match") == "\"b\""
                    ? .init(status: 304, headers: [("ETag", "\"b\""), ("Cache-Control", "max-age=0")])
                    : .init(
                        headers: [Self.png, ("ETag", "\"b\""), ("Cache-Control", "max-age=0")], body: TestAssets.png)
            }
            let cache = ["--json", "--cache-dir", directory.path]
            let first = try await Command.run(["load", origin.url("/a.png").absoluteString] + cache)
            #expect(first.status == 0, "\(first.stderr)")
            #expect(summary(try events(first)) == ["sendingRequest(false)", "completed(networkToDisk)"])
            let completed = try #require(try events(first).last)
            #expect(completed["width"] as? Int == 48 && completed["format"] as? String == "png")

            let second = try await Command.run(["load", origin.url("/a.png").absoluteString] + cache)
            #expect(summary(try events(second)) == ["cached(disk)"])
            #expect(origin.count("/a.png") == 1)

            _ = try await Command.run(["load", origin.url("/b.png").absoluteString] + cache)
            let stale = try await Command.run(["load", origin.url("/b.png").absoluteString] + cache)
            #expect(
                summary(try events(stale)) == [
                    "cached(disk, needsRevalidation)", "sendingRequest(true)", "completed(networkNotModified)",
                ])
            #expect(origin.requests("/b.png").last?.header("If-None-Match") == "\"b\"")
        }
    }

    @Test("a failure exits 1 with the status; remembered failures skip the request in the next run")
    func failures() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        try await Command.withTemporaryDirectory { directory in
            origin.serve("/gone.png", .init(status: 404))
            let arguments = [
                "load", origin.url("/gone.png").absoluteString, "--json", "--cache-dir", directory.path,
                "--max-error-attempts", "1", "--error-max-age", "100",
            ]
            let first = try await Command.run(arguments)
            #expect(first.status == 1)
            #expect(summary(try events(first)) == ["sendingRequest(false)", "failed(404)"])
            #expect(first.stderrLines.count == 1)
            let second = try await Command.run(arguments)
            #expect(second.status == 1)
            #expect(summary(try events(second)) == ["failed(404)"])
            #expect(origin.count("/gone.png") == 1)
        }
    }

    @Test(
        "a stale image whose revalidation fails (must-revalidate, or past stale-if-error) prints but exits 1",
        arguments: ["max-age=0, must-revalidate, stale-if-error=100", "max-age=0"])
    func staleWithoutUsableImage(cacheControl: String) async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        try await Command.withTemporaryDirectory { directory in
            origin.route("/r.png") { _, count in
                count == 1
                    ? .init(
                        headers: [Self.png, ("ETag", "\"r\""), ("Cache-Control", cacheControl)], body: TestAssets.png)
                    : .init(status: 503)
            }
            let arguments = ["load", origin.url("/r.png").absoluteString, "--json", "--cache-dir", directory.path]
            #expect(try await Command.run(arguments).status == 0)
            let stale = try await Command.run(arguments)
            #expect(
                summary(try events(stale)) == [
                    "cached(disk, needsRevalidation)", "sendingRequest(true)", "failed(503)",
                ])
            #expect(stale.status == 1)
            #expect(stale.stderrLines.count == 1)
        }
    }

    @Test("a stale-while-revalidate revalidation finishes before the command exits")
    func backgroundRevalidation() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        try await Command.withTemporaryDirectory { directory in
            origin.route("/s.png") { _, count in
                count == 1
                    ? .init(
                        headers: [
                            Self.png, ("ETag", "\"s\""), ("Cache-Control", "max-age=0, stale-while-revalidate=100"),
                        ], body: TestAssets.png)
                    : .init(status: 304, headers: [("ETag", "\"s\"")], delay: 0.5)
            }
            let arguments = ["load", origin.url("/s.png").absoluteString, "--json", "--cache-dir", directory.path]
            _ = try await Command.run(arguments)
            let stale = try await Command.run(arguments)
            #expect(stale.status == 0)
            #expect(
                summary(try events(stale)) == [
                    "cached(disk, staleWhileRevalidate)", "sendingRequest(true)", "completed(networkNotModified)",
                ])
            #expect(origin.count("/s.png") == 2)  // answered before the process ended
        }
    }

    @Test("the loader options reach the loader")
    func options() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        try await Command.withTemporaryDirectory { directory in
            origin.serve("/zero.png", .init(headers: [Self.png, ("Cache-Control", "max-age=0")], body: TestAssets.png))
            origin.serve("/g.gif", .init(headers: [("Content-Type", "image/gif")], body: TestAssets.gif))
            origin.serve("/auth.png", .init(headers: [Self.png], body: TestAssets.png))
            let cache = ["--cache-dir", directory.path, "--json"]
            for _ in 0..<2 {
                _ = try await Command.run(
                    ["load", origin.url("/zero.png").absoluteString, "--ignore-server-cache-policy"] + cache)
            }
            #expect(origin.count("/zero.png") == 1)

            let refused = try await Command.run(
                ["load", origin.url("/g.gif").absoluteString, "--accept", "image/png"] + cache)
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("image/gif is not accepted"))

            #expect(
                try await Command.run(
                    ["load", origin.url("/auth.png").absoluteString, "--user", "u", "--password", "p"] + cache
                ).status == 0)
            #expect(
                origin.requests("/auth.png").first?.header("Authorization") == "Basic "
                    + Data("u:p".utf8).base64EncodedString())
        }
    }

    @Test("info, decode and thumbnail take URLs, through the cache")
    func urlInputs() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        try await Command.withTemporaryDirectory { directory in
            origin.serve(
                "/p.png", .init(headers: [Self.png, ("Cache-Control", "max-age=100")], body: TestAssets.photo))
            let url = origin.url("/p.png").absoluteString
            let cache = ["--cache-dir", directory.path]
            let info = try await Command.run(["info", url] + cache)
            #expect(info.stdout.contains("\"width\":400"))
            let thumb = directory.appendingPathComponent("t.jpg").path
            #expect(try await Command.run(["thumbnail", url, "--size", "50", "-o", thumb] + cache).status == 0)
            #expect(try ImageDecoder().info(.file(path: thumb)).width == 50)
            let decoded = directory.appendingPathComponent("d.png").path
            #expect(try await Command.run(["decode", url, "-o", decoded] + cache).status == 0)
            #expect(try ImageDecoder().info(.file(path: decoded)).height == 300)
            // The original's entry served info and decode; the thumbnail is an entry of its
            // own (the loader keeps thumbnails, not their originals), made once and reused.
            #expect(try await Command.run(["thumbnail", url, "--size", "50", "-o", thumb] + cache).status == 0)
            #expect(origin.count("/p.png") == 2)
        }
    }

    @Test("kill -9 during a load never leaves half an entry in the cache")
    func killDuringWrite() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        // A large PNG (stored, level 0): its write takes a while.
        var generator = SystemRandomNumberGenerator()
        let side = 1500
        let pixels = (0..<side * side * 4).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let big = try PNGEncoder(compressionLevel: 0).encode(RasterImage(width: side, height: side, pixels: pixels)!)
        try await Command.withTemporaryDirectory { directory in
            for n in 0..<8 {
                origin.serve("/big\(n).png", .init(headers: [Self.png, ("Cache-Control", "max-age=100")], body: big))
                let process = Process()
                process.executableURL = Command.executable
                process.arguments = ["load", origin.url("/big\(n).png").absoluteString, "--cache-dir", directory.path]
                process.standardOutput = FileHandle.nullDevice
                process.standardError = FileHandle.nullDevice
                try process.run()
                try await Task.sleep(for: .milliseconds(40 + n * 40))
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
            let entries = directory.appendingPathComponent("entries").path
            let files = try FileManager.default.contentsOfDirectory(atPath: entries).filter {
                $0.hasSuffix(".response")
            }
            for file in files {
                let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: entries + "/" + file)))
                guard case .valid = EntryFile.decode(bytes, kind: .response) else {
                    Issue.record("\(file) is not whole")
                    continue
                }
            }
            // And the cache opens and serves what it holds.
            let cache = try DiskCache(directory: directory.path)
            #expect(cache.statistics.entries == files.count)
        }
    }
}

enum TestAssets {
    static func bytes(_ name: String) -> [UInt8] {
        [UInt8](try! Data(contentsOf: URL(fileURLWithPath: Command.fixture("images/" + name))))
    }

    static let png = bytes("png-rgba8.png")
    static let gif = bytes("gif-still.gif")
    static let photo = bytes("png-photo.png")
}
