import Foundation
import ImageLoaderSupport
import RasterImage
import TestSupport
import Testing

@testable import ImageLoader

@Suite("imageloader batch, demo and cache")
struct BatchCommandTests {
    static let png = ("Content-Type", "image/png")

    @Test(
        "batch takes URLs, files, directories and lists; writes thumbnails, a sheet, and a summary of sources and failures"
    )
    func batch() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        try await Command.withTemporaryDirectory { directory in
            origin.serve(
                "/remote.png", .init(headers: [Self.png, ("Cache-Control", "max-age=600")], body: TestAssets.photo))
            origin.serve("/missing.png", .init(status: 404))
            // A folder of three images, and a list naming a URL, a file and nonsense.
            let folder = directory.appendingPathComponent("in")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            for name in ["jpeg-orientation6.jpg", "gif-animation.gif", "png-photo-alpha.png"] {
                try Data(TestAssets.bytes(name)).write(to: folder.appendingPathComponent(name))
            }
            let list = directory.appendingPathComponent("list.txt")
            try """
            # inputs
            \(origin.url("/missing.png").absoluteString)
            \(Command.fixture("images/webp-lossy.webp"))

            /nonexistent/picture.png
            """.write(to: list, atomically: true, encoding: .utf8)
            let out = directory.appendingPathComponent("out").path
            let sheet = directory.appendingPathComponent("sheet.png").path
            let arguments = [
                "batch", folder.path, origin.url("/remote.png").absoluteString, list.path, "--size", "64", "--out", out,
                "--sheet", sheet, "--cache-dir", directory.appendingPathComponent("cache").path,
            ]
            let first = try await Command.run(arguments)
            #expect(first.status == 1)  // two inputs failed
            #expect(first.stdout.contains("5 of 7 thumbnails"), "\(first.stdout)")
            #expect(
                first.stdout.contains("from memory 0, disk 0, network 1 (downloaded 1, not modified 0), files 4"),
                "\(first.stdout)")
            #expect(first.stdout.contains("1 x HTTP status 404"))
            #expect(first.stdout.contains("1 x no such file or directory: /nonexistent/picture.png"))
            let written = try FileManager.default.contentsOfDirectory(atPath: out).sorted()
            #expect(
                written == [
                    "gif-animation.jpg", "jpeg-orientation6.jpg", "png-photo-alpha.png", "remote.jpg", "webp-lossy.jpg",
                ])
            // Thumbnails get the umask's permissions, as any file the user writes (the
            // cache's own files are 0600); the umask is read from /proc, not set.
            let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
            let umaskLine = status.split(separator: "\n").first { $0.hasPrefix("Umask:") }
            let mask = try #require(
                umaskLine.flatMap { Int($0.dropFirst(6).trimmingCharacters(in: .whitespaces), radix: 8) })
            let attributes = try FileManager.default.attributesOfItem(atPath: out + "/remote.jpg")
            #expect(attributes[.posixPermissions] as? Int == 0o666 & ~mask)
            let turned = try ImageDecoder().info(.file(path: out + "/jpeg-orientation6.jpg"))
            #expect((turned.width, turned.height) == (32, 48))
            let sheetInfo = try ImageDecoder().info(.file(path: sheet))
            #expect(sheetInfo.format == .png && sheetInfo.width > 64 * 2)

            // Again: the URL comes from the disk cache, the files from their cached thumbnails.
            let second = try await Command.run(arguments)
            #expect(second.stdout.contains("from memory 0, disk 5"), "\(second.stdout)")
            #expect(origin.count("/remote.png") == 1)
        }
    }

    @Test(
        "cache verbs remove exactly what their names say; --dry-run lists it and removes nothing; other options are refused"
    )
    func cache() async throws {
        try await Command.withTemporaryDirectory { directory in
            let folder = directory.appendingPathComponent("cache").path
            // Entries written at chosen moments: a clock the cache reads, set back in time.
            let day: TimeInterval = 86_400
            let now = Date()
            let moment = Lock(now)
            let writer = try DiskCache(directory: folder, clock: { moment.withLock { $0 } })
            func store(_ name: String, daysAgo: Double) throws {
                moment.withLock { $0 = now.addingTimeInterval(-daysAgo * day) }
                let url = "https://example.com/\(name)"
                let response = StoredResponse(
                    url: url, status: 200, headers: [HeaderField("Content-Type", "image/png")],
                    requestTime: moment.withLock { $0 }, responseTime: moment.withLock { $0 })
                try writer.store(response, body: TestAssets.png)
            }
            try store("old.png", daysAgo: 10)
            try store("week.png", daysAgo: 6)
            try store("new.png", daysAgo: 0)
            // First stored 10 days ago, written again (revalidated) a day ago.
            try store("revalidated.png", daysAgo: 10)
            moment.withLock { $0 = now.addingTimeInterval(-1 * day) }
            let first = try #require(writer.storedResponse(for: "https://example.com/revalidated.png"))
            try writer.update(first)
            moment.withLock { $0 = now.addingTimeInterval(-9 * day) }
            try writer.store(
                FailureRecord(
                    url: "https://example.com/gone.png", status: 404, message: "404", attempts: 1,
                    expires: now.addingTimeInterval(60)))
            writer.flush()
            let all = [
                "https://example.com/old.png", "https://example.com/week.png", "https://example.com/new.png",
                "https://example.com/revalidated.png", "https://example.com/gone.png",
            ]
            /// The URLs the cache still holds, read by a new cache on the folder.
            func held() throws -> Set<String> {
                Set(try DiskCache(directory: folder).entries().compactMap(\.url))
            }
            #expect(try held() == Set(all))

            // A dry run lists exactly what would go, and removes nothing.
            let dry = try await Command.run([
                "cache", "prune", "--older-than", "7d", "--dry-run", "--cache-dir", folder,
            ])
            #expect(dry.status == 0, "\(dry.stderr)")
            let listed = Set(
                dry.stdout.split(separator: "\n").compactMap { $0.split(separator: " ").last.map(String.init) })
            #expect(listed.isSuperset(of: ["https://example.com/old.png", "https://example.com/gone.png"]))
            #expect(!dry.stdout.contains("week.png") && !dry.stdout.contains("new.png"))
            #expect(!dry.stdout.contains("revalidated.png"))  // written a day ago
            #expect(dry.stdout.contains("prune would remove 2 entries"), "\(dry.stdout)")
            #expect(try held() == Set(all))

            // Options a verb does not honour are refused, and nothing is removed.
            for refused in [
                ["cache", "purge", "--older-than", "7d"], ["cache", "remove-all", "--older-than", "7d"],
                ["cache", "clear", "--older-than", "7d"], ["cache", "prune"],
                ["cache", "prune", "--older-than", "soon"],
                ["cache", "stats", "--older-than", "7d"], ["cache", "verify", "--by", "created"],
            ] {
                let result = try await Command.run(refused + ["--cache-dir", folder])
                #expect(result.status == 64, "\(refused): \(result.status) \(result.stderr)")
                #expect(try held() == Set(all), "\(refused)")
            }
            let renamed = try await Command.run(["cache", "purge", "--cache-dir", folder])
            #expect(renamed.stderr.contains("remove-all") && renamed.stderr.contains("prune --older-than"))

            // By last write: the two older than a week, and only those.
            let pruned = try await Command.run(["cache", "prune", "--older-than", "7d", "--cache-dir", folder])
            #expect(pruned.stdout.contains("removed 2 entries modified more than 7d ago"), "\(pruned.stdout)")
            #expect(
                try held()
                    == [
                        "https://example.com/week.png", "https://example.com/new.png",
                        "https://example.com/revalidated.png",
                    ])
            // By first store: the revalidated one too.
            let created = try await Command.run([
                "cache", "prune", "--older-than", "7d", "--by", "created", "--cache-dir", folder,
            ])
            #expect(created.stdout.contains("removed 1 entry created more than 7d ago"), "\(created.stdout)")
            #expect(try held() == ["https://example.com/week.png", "https://example.com/new.png"])

            let stats = try await Command.run(["cache", "stats", "--cache-dir", folder])
            let json = try #require(try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Any])
            #expect(json["entries"] as? Int == 2 && json["failures"] as? Int == 0)

            let dryAll = try await Command.run(["cache", "remove-all", "--dry-run", "--cache-dir", folder])
            #expect(dryAll.stdout.contains("remove-all would remove 2 entries"), "\(dryAll.stdout)")
            #expect(try held().count == 2)
            let removed = try await Command.run(["cache", "remove-all", "--cache-dir", folder])
            #expect(removed.stdout.contains("removed 2 entries"))
            #expect(try held().isEmpty)
        }
    }

    @Test("cache verify removes a damaged entry; stats count it; the next load fetches it again")
    func cacheVerify() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        try await Command.withTemporaryDirectory { directory in
            origin.serve("/v.png", .init(headers: [Self.png, ("Cache-Control", "max-age=600")], body: TestAssets.png))
            origin.serve("/w.png", .init(headers: [Self.png, ("Cache-Control", "max-age=600")], body: TestAssets.png))
            let cache = directory.appendingPathComponent("cache").path
            for path in ["/v.png", "/w.png"] {
                _ = try await Command.run(["load", origin.url(path).absoluteString, "--cache-dir", cache])
            }
            // One bit of one entry's body flips on disk.
            let file = cache + "/entries/" + DiskCache.hash(of: origin.url("/v.png").absoluteString) + ".response"
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
            bytes[bytes.count - 10] ^= 0x04
            try Data(bytes).write(to: URL(fileURLWithPath: file))

            // A dry run names the damaged entry's file, and removes and counts nothing.
            let name = DiskCache.hash(of: origin.url("/v.png").absoluteString) + ".response"
            let dry = try await Command.run(["cache", "verify", "--dry-run", "--cache-dir", cache])
            #expect(dry.stdout.contains("damaged: \(name)") && dry.stdout.contains("verify would remove 1 entry"))
            #expect(FileManager.default.fileExists(atPath: file))
            let verify = try await Command.run(["cache", "verify", "--cache-dir", cache])
            #expect(verify.status == 0, "\(verify.stderr)")
            let report = try JSONSerialization.jsonObject(with: Data(verify.stdout.utf8)) as! [String: Any]
            #expect(report["checked"] as? Int == 2 && report["removed"] as? Int == 1)
            let stats = try await Command.run(["cache", "stats", "--cache-dir", cache])
            let json = try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as! [String: Any]
            #expect(json["entries"] as? Int == 1)
            #expect(json["corruptEntriesRemoved"] as? Int == 1)
            let again = try await Command.run(["load", origin.url("/v.png").absoluteString, "--cache-dir", cache])
            #expect(again.status == 0 && again.stdout.contains("networkToDisk"), "\(again.stdout)")
            #expect(origin.count("/v.png") == 2 && origin.count("/w.png") == 1)
        }
    }

    @Test("the demo serves the fixtures, downloads them cold and reads them from disk warm")
    func demo() async throws {
        try await Command.withTemporaryDirectory { directory in
            let out = directory.appendingPathComponent("demo").path
            let result = try await Command.run([
                "demo", "--images", Command.fixture("images"), "--out", out, "--size", "48",
            ])
            #expect(result.status == 0, "\(result.stderr)")
            let count = try FileManager.default.contentsOfDirectory(atPath: Command.fixture("images")).count
            #expect(result.stdout.contains("pass 1, cold: \(count) of \(count) thumbnails"))
            #expect(result.stdout.contains("network \(count) (downloaded \(count)"))
            #expect(result.stdout.contains("pass 2, warm: \(count) of \(count) thumbnails"))
            #expect(result.stdout.contains("from memory 0, disk \(count)"))
            #expect(result.stdout.contains("requests the server answered: \(count)"))
            // Each file's thumbnail timed, its format and size named; the sheet holds them all.
            #expect(result.stdout.contains("each thumbnail from its file's bytes"))
            #expect(result.stdout.contains("gif-animation.gif"), "\(result.stdout)")
            #expect(result.stdout.contains("GIF 48×32, 5 frames"), "\(result.stdout)")
            // Stored on its side (orientation 6): the thumbnail is upright.
            #expect(result.stdout.contains(#/jpeg-orientation6\.jpg +JPEG 48×32, 1 KB -> 32×48 in /#))
            let sheet = try ImageDecoder().info(.file(path: out + "/sheet.png"))
            #expect(sheet.format == .png && sheet.width > 48 * 4 && sheet.height > 48 * 4)
            #expect(try FileManager.default.contentsOfDirectory(atPath: out + "/warm").count == count)
        }
    }

    @Test("the demo reports an image too large for the limits and goes on: its table and sheet have the others")
    func demoSkipsTooLarge() async throws {
        try await Command.withTemporaryDirectory { directory in
            let images = directory.appendingPathComponent("images")
            try FileManager.default.createDirectory(at: images, withIntermediateDirectories: true)
            for name in ["images/png-rgb8.png", "images/jpeg-420.jpg", "hostile/png-30000x30000.png"] {
                try FileManager.default.copyItem(
                    atPath: Command.fixture(name),
                    toPath: images.appendingPathComponent((name as NSString).lastPathComponent).path)
            }
            let out = directory.appendingPathComponent("demo").path
            let result = try await Command.run(["demo", "--images", images.path, "--out", out, "--size", "48"])
            #expect(result.status == 0, "\(result.stderr)")
            // The 900-megapixel PNG is named with the reason; the other two are timed and on the sheet.
            #expect(result.stdout.contains(#/png-30000x30000\.png +skipped: .*30000x30000/#), "\(result.stdout)")
            #expect(result.stdout.contains(#/png-rgb8\.png +PNG /#) && result.stdout.contains(#/jpeg-420\.jpg +JPEG /#))
            let sheet = try ImageDecoder().info(.file(path: out + "/sheet.png"))
            #expect(sheet.format == .png)
        }
    }

    @Test("batch makes each distinct input once: one file, one request, and the summary counts the repeats")
    func repeatedInputs() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        try await Command.withTemporaryDirectory { directory in
            for n in 0..<3 {
                origin.serve(
                    "/r\(n).png", .init(headers: [Self.png, ("Cache-Control", "max-age=600")], body: TestAssets.photo))
            }
            let file = directory.appendingPathComponent("local.png")
            try Data(TestAssets.photo).write(to: file)
            // Each URL three times (once with a fragment), the file by two spellings.
            var lines: [String] = []
            for _ in 0..<3 { lines += (0..<3).map { origin.url("/r\($0).png").absoluteString } }
            lines.append(origin.url("/r0.png").absoluteString + "#again")
            lines += [file.path, directory.appendingPathComponent("./local.png").path]
            let list = directory.appendingPathComponent("list.txt")
            try lines.joined(separator: "\n").write(to: list, atomically: true, encoding: .utf8)
            let out = directory.appendingPathComponent("out").path
            let result = try await Command.run([
                "batch", list.path, "--size", "32", "--out", out, "--cache-dir",
                directory.appendingPathComponent("cache").path,
            ])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.contains("4 of 4 thumbnails"), "\(result.stdout)")
            #expect(result.stdout.contains("repeated inputs 8"), "\(result.stdout)")
            let written = try FileManager.default.contentsOfDirectory(atPath: out).sorted()
            #expect(written == ["local.jpg", "r0.jpg", "r1.jpg", "r2.jpg"], "\(written)")
            for n in 0..<3 { #expect(origin.count("/r\(n).png") == 1) }
        }
    }
}
