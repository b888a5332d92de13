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
    /// Conditional requests, sources kept across restarts, and the answers to failures.
    @Suite("imageloader serve: validators, stored sources and failures")
    struct Caching: ServeTesting {
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
                #expect(
                    try await status(refusing.url("/a.jpg").absoluteString).text == "source refused the connection\n")
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

        @Test("a source stating no freshness is fresh for --source-ttl: twenty requests of other sizes read it once")
        func sourceWithoutFreshness() async throws {
            let origin = try await TestOrigin.start()
            defer { Task { await origin.stop() } }
            // As a bucket's object just uploaded: validators, no Cache-Control, no Expires (the
            // heuristic, a tenth of the time since Last-Modified, would give it no freshness).
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
            origin.serve(
                "/object.jpg",
                .init(
                    headers: [Self.jpeg, ("ETag", "\"o\""), ("Last-Modified", formatter.string(from: Date()))],
                    body: TestAssets.bytes("jpeg-800x600.jpg")))
            try await serving(["--allow-unsigned", "--allow-private-networks"]) { server in
                for width in 40..<60 {
                    let answer = try await server.get(
                        "/insecure/w:\(width)/plain/" + origin.url("/object.jpg").absoluteString)
                    #expect(answer.status == 200)
                }
                #expect(origin.count("/object.jpg") == 1)
            }
        }

        @Test("an origin that cannot be reached: the stored source answers, unless must-revalidate or turned off")
        func storedSourceWhileUnreachable() async throws {
            let origin = try await TestOrigin.start()
            let photo = TestAssets.bytes("jpeg-800x600.jpg")
            // Stale at once, no stale-if-error: only the service's setting lets them answer.
            origin.serve("/plain.jpg", .init(headers: [Self.jpeg, ("Cache-Control", "max-age=0")], body: photo))
            origin.serve(
                "/strict.jpg",
                .init(headers: [Self.jpeg, ("Cache-Control", "max-age=0, must-revalidate")], body: photo))
            let (plain, strict) = (origin.url("/plain.jpg").absoluteString, origin.url("/strict.jpg").absoluteString)
            try await Command.withTemporaryDirectory { directory in
                let arguments = ["--allow-unsigned", "--allow-private-networks", "--cache-dir", directory.path]
                try await serving(arguments) { server in
                    #expect(try await server.get("/insecure/w:80/plain/" + plain).status == 200)
                    #expect(try await server.get("/insecure/w:80/plain/" + strict).status == 200)
                    await origin.stop()
                    let stored = try await server.get("/insecure/w:60/plain/" + plain)
                    #expect(stored.status == 200, "\(stored.text)")
                    #expect(try decoded(stored).width == 60)
                    #expect(try await server.get("/insecure/w:60/plain/" + strict).status == 502)
                    #expect(server.printed.contains("the stored copy answers"))
                }
                try await serving(arguments + ["--stale-when-unreachable", "0"]) { server in
                    let refused = try await server.get("/insecure/w:50/plain/" + plain)
                    #expect(refused.status == 502)
                }
            }
        }

        @Test(
            "Cache-Control passed through says what remains of the source's freshness: max-age less Age and time kept")
        func passedThroughFreshness() async throws {
            let origin = try await TestOrigin.start()
            defer { Task { await origin.stop() } }
            origin.serve(
                "/aged.jpg",
                .init(
                    headers: [Self.jpeg, ("Cache-Control", "public, max-age=1000, s-maxage=2000"), ("Age", "400")],
                    body: TestAssets.bytes("jpeg-800x600.jpg")))
            try await serving(["--allow-unsigned", "--allow-private-networks", "--cache-control-passthrough"]) {
                server in
                let answer = try await server.get("/insecure/w:50/plain/" + origin.url("/aged.jpg").absoluteString)
                let control = try #require(answer.header("Cache-Control"))
                let maxAge = try #require(Int(control.firstMatch(of: /(?:^|[ ,])max-age=(\d+)/)?.output.1 ?? ""))
                let shared = try #require(Int(control.firstMatch(of: /s-maxage=(\d+)/)?.output.1 ?? ""))
                // 1000 - 400, less the seconds this test took (a few at most, even instrumented).
                #expect((540...600).contains(maxAge) && shared == maxAge + 1000, "\(control)")
                #expect(control.hasPrefix("public"))
            }
        }
    }
}
