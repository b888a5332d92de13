import Foundation
import RasterImage
import Testing

@Suite("The imageloader command")
struct CommandLineTests {
    @Test("info prints one JSON object with the header's facts")
    func info() async throws {
        let result = try await Command.run(["info", Command.fixture("images/jpeg-orientation6.jpg")])
        #expect(result.status == 0)
        #expect(result.stdout.split(separator: "\n").count == 1)
        let json = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as! [String: Any]
        #expect(json["format"] as? String == "jpeg")
        #expect(json["width"] as? Int == 48)
        #expect(json["height"] as? Int == 32)
        #expect(json["frames"] as? Int == 1)
        #expect(json["hasAlpha"] as? Bool == false)
        #expect(json["orientation"] as? Int == 6)
        #expect(json["contentType"] as? String == "image/jpeg")
    }

    @Test("info --placeholders adds the profile, EXIF, colours and both hashes; GPS only with --gps")
    func infoPlaceholders() async throws {
        let file = Command.fixture("placeholders/exif.jpg")
        let expected = try ImageDecoder().describe(Array(try Data(contentsOf: URL(fileURLWithPath: file))))
        let result = try await Command.run(["info", "--placeholders", file])
        #expect(result.status == 0, "\(result.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(json["blurhash"] as? String == expected.blurhash && json["thumbhash"] as? String == expected.thumbhash)
        #expect((json["exif"] as? [String: Any])?["model"] as? String == "Model X-1")
        #expect((json["exif"] as? [String: Any])?["latitude"] == nil)
        let located = try await Command.run(["info", "--placeholders", "--gps", file])
        let exif = try #require(
            (try JSONSerialization.jsonObject(with: Data(located.stdout.utf8)) as? [String: Any])?["exif"]
                as? [String: Any])
        #expect(exif["latitude"] as? Double != nil && exif["longitude"] as? Double != nil)
    }

    @Test("info counts frames and sees transparency")
    func infoAnimation() async throws {
        let result = try await Command.run(["info", Command.fixture("images/gif-animation.gif")])
        let json = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as! [String: Any]
        #expect(json["frames"] as? Int == 5)
        #expect(json["hasAlpha"] as? Bool == true)
    }

    @Test("decode writes the chosen frame as an 8-bit RGBA PNG with the reference's pixels")
    func decodeFrame() async throws {
        try await Command.withTemporaryDirectory { directory in
            let output = directory.appendingPathComponent("frame2.png").path
            let result = try await Command.run([
                "decode", Command.fixture("images/gif-animation.gif"), "-o", output, "--frame", "2",
            ])
            #expect(result.status == 0, "\(result.stderr)")
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: output)))
            #expect(bytes[24] == 8 && bytes[25] == 6)  // IHDR: 8 bits, RGBA
            let decoded = try ImageDecoder().decode(.bytes(bytes))
            let expected = [UInt8](
                try Data(contentsOf: URL(fileURLWithPath: Command.fixture("expected/gif-animation.f2.rgba"))))
            #expect(decoded.pixels == expected)
        }
    }

    @Test("decode keeps the pixels as stored: no orientation applied")
    func decodeKeepsOrientation() async throws {
        try await Command.withTemporaryDirectory { directory in
            let output = directory.appendingPathComponent("page.png").path
            #expect(
                try await Command.run(["decode", Command.fixture("images/tiff-orientation6.tif"), "-o", output]).status
                    == 0)
            let decoded = try ImageDecoder().decode(.file(path: output))
            #expect(decoded.width == 48 && decoded.height == 32)
            let expected = [UInt8](
                try Data(contentsOf: URL(fileURLWithPath: Command.fixture("expected/tiff-orientation6.rgba"))))
            #expect(decoded.pixels == expected)
        }
    }

    @Test("decode picks TIFF pages")
    func decodePage() async throws {
        try await Command.withTemporaryDirectory { directory in
            let output = directory.appendingPathComponent("page1.png").path
            let result = try await Command.run([
                "decode", Command.fixture("images/tiff-pages-sizes.tif"), "-o", output, "--frame", "1",
            ])
            #expect(result.status == 0)
            let decoded = try ImageDecoder().decode(.file(path: output))
            #expect(decoded.width == 24 && decoded.height == 40)
        }
    }

    @Test("validate accepts good files and reports each bad one on its own line")
    func validate() async throws {
        try await Command.withTemporaryDirectory { directory in
            let good = [
                "png-rgba8.png", "jpeg-420.jpg", "gif-animation.gif", "tiff-multipage.tif", "webp-animation.webp",
                "bmp-rle4.bmp",
            ]
            .map { Command.fixture("images/" + $0) }
            #expect(try await Command.run(["validate"] + good).status == 0)

            let cut = directory.appendingPathComponent("cut.png").path
            let bytes = try Data(contentsOf: URL(fileURLWithPath: good[0]))
            try bytes.prefix(bytes.count / 2).write(to: URL(fileURLWithPath: cut))
            let text = directory.appendingPathComponent("notes.png").path
            try Data("not an image".utf8).write(to: URL(fileURLWithPath: text))
            let result = try await Command.run(["validate", good[0], cut, text, good[1]])
            #expect(result.status == 1)
            #expect(result.stderrLines.count == 2)
            #expect(
                result.stderrLines.first?.contains("cut.png") == true
                    && result.stderrLines.first?.contains("truncated") == true)
            #expect(result.stderrLines.last?.contains("notes.png") == true)
        }
    }

    @Test("damaged JPEG XL files: one line each on standard error, nothing of libjxl's own")
    func jxlDiagnostics() async throws {
        try await Command.withTemporaryDirectory { directory in
            let folder = Command.fixture("modern/conformance")
            var paths: [String] = []
            for name in try FileManager.default.contentsOfDirectory(atPath: folder).sorted()
            where name.hasSuffix(".jxl") {
                let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: folder + "/" + name)))
                // Cut at a third, and with a run of bytes inverted in the middle of the coded data.
                var flipped = bytes
                for index in bytes.count / 2..<min(bytes.count, bytes.count / 2 + 16) { flipped[index] ^= 0xFF }
                for (suffix, damaged) in [("cut", Array(bytes.prefix(bytes.count / 3))), ("flipped", flipped)] {
                    let path = directory.appendingPathComponent("\(name)-\(suffix).jxl").path
                    try Data(damaged).write(to: URL(fileURLWithPath: path))
                    paths.append(path)
                }
            }
            let validate = try await Command.run(["validate"] + paths)
            #expect(validate.status == 1)
            #expect(validate.stderrLines.count >= paths.count / 2)
            for line in validate.stderrLines {
                #expect(line.hasPrefix("imageloader: ") && line.contains("JPEG XL"), "\(line)")
            }
            for path in paths {
                let info = try await Command.run(["info", path])
                #expect(info.stderrLines.count <= 1, "\(path): \(info.stderr)")
                let decode = try await Command.run([
                    "decode", path, "-o", directory.appendingPathComponent("out.png").path,
                ])
                #expect(decode.stderrLines.count == (decode.status == 0 ? 0 : 1), "\(path): \(decode.stderr)")
            }
        }
    }

    @Test("validate checks the declared content type")
    func validateContentType() async throws {
        let png = Command.fixture("images/png-rgb8.png")
        #expect(try await Command.run(["validate", png, "--content-type", "image/png"]).status == 0)
        let mismatch = try await Command.run(["validate", png, "--content-type", "image/jpeg"])
        #expect(mismatch.status == 1)
        #expect(mismatch.stderr.contains("declared as image/jpeg"))
        let refused = try await Command.run(["validate", png, "--accept", "image/gif"])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("not accepted"))
    }

    @Test("thumbnail writes the format its extension names, fitted or filled, upright")
    func thumbnail() async throws {
        try await Command.withTemporaryDirectory { directory in
            let cases: [(input: String, arguments: [String], output: String, format: ImageFormat, size: (Int, Int))] = [
                ("images/png-photo.png", ["--size", "100"], "a.jpg", .jpeg, (100, 75)),
                ("images/png-photo-alpha.png", ["--size", "100"], "b.png", .png, (100, 75)),
                ("images/png-photo.png", ["--size", "64", "--fill", "--quality", "70"], "c.webp", .webp, (64, 64)),
                ("images/jpeg-orientation6.jpg", ["--size", "24"], "d.png", .png, (16, 24)),
                (
                    "images/jpeg-800x600.jpg", ["--width", "50", "--height", "200", "--kernel", "mitchell"], "e.jpg",
                    .jpeg,
                    (50, 38)
                ),
            ]
            for (input, arguments, output, format, size) in cases {
                let path = directory.appendingPathComponent(output).path
                let result = try await Command.run(["thumbnail", Command.fixture(input)] + arguments + ["-o", path])
                #expect(result.status == 0, "\(result.stderr)")
                let info = try ImageDecoder().info(.file(path: path))
                #expect(info.format == format, "\(output)")
                #expect(info.width == size.0 && info.height == size.1, "\(output): \(info.width)x\(info.height)")
                #expect(info.orientation == .up)
            }
        }
    }

    @Test("thumbnail --all-frames keeps an animation animated in GIF and WebP, with the source's frames and durations")
    func thumbnailAllFrames() async throws {
        let source = try ImageDecoder().decode(.file(path: Command.fixture("images/gif-animation.gif")))
        try await Command.withTemporaryDirectory { directory in
            for output in ["all.gif", "all.webp"] {
                let path = directory.appendingPathComponent(output).path
                let result = try await Command.run([
                    "thumbnail", Command.fixture("images/gif-animation.gif"), "--size", "24", "--all-frames", "-o",
                    path,
                ])
                #expect(result.status == 0, "\(result.stderr)")
                let written = try ImageDecoder().decode(.file(path: path))
                #expect(written.frames.count == source.frames.count, "\(output)")
                // (WebP keeps a GIF's zero delay as 10 ms, its shortest.)
                for (made, original) in zip(written.frames, source.frames) {
                    let difference = made.duration - original.duration
                    #expect(difference <= .milliseconds(10) && difference >= .milliseconds(-10), "\(output)")
                }
                #expect(written.width == 24, "\(output)")
            }
            // Without --all-frames, the first frame only.
            let still = directory.appendingPathComponent("still.gif").path
            _ = try await Command.run([
                "thumbnail", Command.fixture("images/gif-animation.gif"), "--size", "24", "-o", still,
            ])
            #expect(try ImageDecoder().info(.file(path: still)).frameCount == 1)
        }
    }

    @Test("thumbnail --gravity keeps the side it names; --force stretches; the two box modes exclude each other")
    func thumbnailGravityAndForce() async throws {
        try await Command.withTemporaryDirectory { directory in
            var made: [String: RasterImage] = [:]
            for gravity in ["west", "center", "east"] {
                let path = directory.appendingPathComponent("\(gravity).png").path
                let result = try await Command.run([
                    "thumbnail", Command.fixture("images/png-photo.png"), "--width", "90", "--height", "90", "--fill",
                    "--gravity", gravity, "-o", path,
                ])
                #expect(result.status == 0, "\(result.stderr)")
                made[gravity] = try ImageDecoder().decode(.file(path: path))
            }
            // The same crops of the upright decode, independently of the command.
            let full = try ImageDecoder().decode(.file(path: Command.fixture("images/png-photo.png")))
            for (gravity, x) in [("west", 0), ("center", 15), ("east", 30)] {
                let reference = try full.resized(width: 120, height: 90).cropped(x: x, y: 0, width: 90, height: 90)
                let image = try #require(made[gravity])
                var total = 0
                for index in image.pixels.indices {
                    total += abs(Int(image.pixels[index]) - Int(reference.pixels[index]))
                }
                #expect(Double(total) / Double(image.pixels.count) < 2, "\(gravity)")
            }
            let forced = directory.appendingPathComponent("forced.png").path
            #expect(
                try await Command.run([
                    "thumbnail", Command.fixture("images/png-photo.png"), "--width", "200", "--height", "60", "--force",
                    "-o", forced,
                ]).status == 0)
            let info = try ImageDecoder().info(.file(path: forced))
            #expect((info.width, info.height) == (200, 60))
            let both = try await Command.run([
                "thumbnail", Command.fixture("images/png-photo.png"), "--size", "60", "--fill", "--force", "-o", forced,
            ])
            #expect(both.status != 0 && both.stderr.contains("exclude each other"))
        }
    }

    @Test(
        "thumbnail refuses a side outside 1...16384 in one line, instead of making another size",
        arguments: [
            ["--size", "0"], ["--size", "16385"], ["--width", "20000", "--height", "10"],
            ["--width", "10", "--height", "0"],
        ])
    func thumbnailSizeOutOfRange(_ size: [String]) async throws {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("size-\(UUID().uuidString).png").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        let result = try await Command.run(
            ["thumbnail", Command.fixture("images/png-rgb8.png")] + size + ["-o", output])
        #expect(result.status != 0)
        #expect(result.stderr.contains("between 1 and 16384"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: output))
    }

    @Test("thumbnail refuses an output it cannot write")
    func thumbnailBadOutput() async throws {
        let result = try await Command.run([
            "thumbnail", Command.fixture("images/png-rgb8.png"), "--size", "10", "-o", "/tmp/x.svg",
        ])
        #expect(result.status != 0)
        // Every extension of every format the library writes, from the format table.
        for name in ["jpg", "jpeg", "png", "webp", "avif", "jxl", "heic", "heif", "ico", "bmp", "tif", "tiff", "gif"] {
            #expect(result.stderr.contains(".\(name)"), "\(name) not in \(result.stderr)")
        }
        #expect(!result.stderr.contains(".svg,"))
    }

    @Test(
        "failures exit 1 with one line on stderr, never a crash",
        arguments: [
            ["decode", "/nonexistent.png"],
            ["info", "/etc/hostname"],
            ["decode", "hostile/png-30000x30000.png"],
            ["decode", "hostile/jpeg-50000x50000.jpg"],
            ["decode", "hostile/gif-65535x65535.gif"],
            ["decode", "hostile/tiff-absurd-strips.tif"],
            ["decode", "hostile/bmp-width-2^31.bmp"],
            ["decode", "hostile/webp-16383x16383.webp"],
            ["decode", "images/gif-animation.gif", "--frame", "9"],
            ["thumbnail", "hostile/jpeg-50000x50000.jpg", "--size", "64", "-o", "/tmp/never.jpg"],
            ["thumbnail", "hostile/tiff-absurd-strips.tif", "--size", "64", "-o", "/tmp/never.png"],
        ])
    func failures(_ arguments: [String]) async throws {
        let resolved = arguments.map { $0.hasPrefix("hostile/") || $0.hasPrefix("images/") ? Command.fixture($0) : $0 }
        let result = try await Command.run(resolved)
        #expect(!result.crashed)
        #expect(result.status == 1)
        #expect(result.stderrLines.count == 1, "\(result.stderr)")
        #expect(result.stderr.hasPrefix("imageloader: "))
        #expect(!result.stderr.contains("Fatal") && !result.stderr.contains("Backtrace"))
        #expect(result.stdout.isEmpty)
    }
}

/// The errors a person meets first: one line on stderr that says what happened to what
/// (the file, folder, port, option or variable) and, where there is something to do, what.
@Suite("Errors that say what to do")
struct ErrorMessageTests {
    /// A mistake, the words its one line must hold, and the words it must not.
    struct Case: Sendable, CustomTestStringConvertible {
        let arguments: [String]
        var environment: [String: String] = [:]
        let says: [String]
        var neverSays: [String] = []
        var status: Int32 = 1
        var testDescription: String { arguments.prefix(2).joined(separator: " ") + " " + says[0] }
    }

    static let notAnImage = Command.repository.appendingPathComponent("README.md").path

    static let cases: [Case] = [
        Case(arguments: ["info", notAnImage], says: [notAnImage, "not a supported image format"]),
        Case(
            arguments: [
                "thumbnail", Command.fixture("images/png-rgb8.png"), "--size", "8", "-o", "/nonexistent/out/t.png",
            ],
            says: ["cannot write /nonexistent/out/t.png", "the folder /nonexistent/out does not exist"]),
        Case(
            arguments: ["decode", Command.fixture("images/png-rgb8.png"), "-o", "/nonexistent/out/t.png"],
            says: ["the folder /nonexistent/out does not exist"]),
        Case(
            arguments: ["batch", Command.fixture("images/png-rgb8.png"), "--size", "8", "--out", "/proc/no/out"],
            says: ["cannot create the output folder /proc/no/out", "no such file or directory"]),
        Case(
            arguments: ["serve"], environment: ["IMGPROXY_KEY": "abc", "IMGPROXY_SALT": "0123"],
            says: ["IMGPROXY_KEY is not hexadecimal", "openssl rand -hex 32"], neverSays: ["abc"]),
        Case(
            arguments: ["serve", "--key", "00ff", "--salt", "0x12"], says: ["--salt is not hexadecimal"],
            neverSays: ["0x12"]),
        Case(
            arguments: ["serve"], environment: ["IMGPROXY_KEY": "00ff"],
            says: ["IMGPROXY_KEY and IMGPROXY_KEYS give 1 key", "give a salt for each key"]),
        Case(
            arguments: ["serve", "--allow-unsigned", "--local-root", "/nonexistent/images"],
            says: ["--local-root /nonexistent/images does not exist"], status: 64),
        Case(
            arguments: ["serve", "--allow-unsigned", "--preset", "thumbnail"],
            says: ["preset thumbnail is not NAME=OPTIONS"], status: 64),
        Case(
            arguments: ["load", "http://127.0.0.1:9/a.png", "--cache-dir", "/proc/no/cache"],
            says: ["cannot open the cache in /proc/no/cache", "--cache-dir"]),
        Case(arguments: ["cache", "purge", "--older-than", "7d"], says: ["remove-all", "prune"], status: 64),
        // A PNG is never written under another format's name.
        Case(
            arguments: ["decode", Command.fixture("images/png-rgb8.png"), "-o", "/tmp/never-written.jpg"],
            says: ["/tmp/never-written.jpg names a JPEG file", "decode writes PNG"], status: 64),
        // A value from a variable is reported under the variable's name, not an option nobody typed.
        Case(
            arguments: ["serve", "--allow-unsigned"], environment: ["IMGPROXY_TTL": "-5"],
            says: ["IMGPROXY_TTL must be 0 or more"], neverSays: ["--ttl"], status: 64),
        Case(
            arguments: ["serve", "--allow-unsigned"], environment: ["IMGPROXY_QUALITY": "101"],
            says: ["IMGPROXY_QUALITY must be between 1 and 100"], neverSays: ["--quality"], status: 64),
        Case(
            arguments: ["serve", "--allow-unsigned"], environment: ["IMGPROXY_MAX_ANIMATION_FRAMES": "0"],
            says: ["IMGPROXY_MAX_ANIMATION_FRAMES must be 1 or more"], neverSays: ["--max-animation-frames"],
            status: 64),
        Case(
            arguments: ["serve", "--allow-unsigned", "--timeout", "0"], environment: ["IMGPROXY_TIMEOUT": "5"],
            says: ["--timeout must be between 0.001 and 3600"], neverSays: ["IMGPROXY_TIMEOUT"], status: 64),
    ]

    @Test("each mistake is one line naming what is at fault, with what to do", arguments: cases)
    func messages(_ mistake: Case) async throws {
        let result = try await Command.run(mistake.arguments, environment: mistake.environment)
        #expect(!result.crashed && result.status == mistake.status, "\(result.status) \(result.stderr)")
        let line = result.stderrLines.first.map(String.init) ?? ""
        if mistake.status == 1 {
            #expect(result.stderrLines.count == 1 && line.hasPrefix("imageloader: "), "\(result.stderr)")
        }
        for words in mistake.says { #expect(result.stderr.contains(words), "\(words) not in \(result.stderr)") }
        for words in mistake.neverSays + ["Error Domain", "errno", "NSCocoaErrorDomain", "(error set)"] {
            #expect(!result.stderr.contains(words), "\(words) in \(result.stderr)")
        }
    }

    @Test("serve on a port in use names the port and the option that changes it")
    func busyPort() async throws {
        let first = try await ServedProcess.start(["--allow-unsigned"])
        defer { first.process.terminate() }
        let second = try await Command.run(["serve", "--allow-unsigned", "--port", String(first.port)])
        #expect(second.status == 1)
        #expect(
            second.stderr.contains("cannot listen on 0.0.0.0:\(first.port): the port is in use"), "\(second.stderr)")
        #expect(second.stderr.contains("--port") && !second.stderr.contains("errno"))
        let metrics = try await Command.run([
            "serve", "--allow-unsigned", "--port", "0", "--metrics-bind", "127.0.0.1:\(first.port)",
        ])
        #expect(metrics.status == 1)
        #expect(metrics.stderr.contains("127.0.0.1:\(first.port)") && metrics.stderr.contains("--metrics-bind"))
    }
}

/// Hostile files through the command as a whole process: a typed error or a result,
/// never a crash, and never more memory than a small constant past the process's own.
@Suite("Hostile files as a process")
struct HostileProcessTests {
    static let hostile: [String] = {
        let folder = Command.fixture("hostile")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        return names.filter { !$0.hasSuffix(".py") }.sorted()
    }()

    @Test("decode and fill thumbnails of every hostile file stay within a bounded peak RSS", arguments: hostile)
    func boundedMemory(_ name: String) async throws {
        try await Command.withTemporaryDirectory { directory in
            let input = Command.fixture("hostile/" + name)
            // The process's own baseline: a thumbnail of a small, ordinary image.
            let baseline = try await Command.peakMemory([
                "thumbnail", Command.fixture("images/png-rgb8.png"), "--size", "64", "-o", directory.path + "/base.png",
            ])
            for arguments in [
                ["thumbnail", input, "--size", "256", "--fill", "-o", directory.path + "/t.png"],
                ["thumbnail", input, "--size", "256", "--fill", "--upscale", "-o", directory.path + "/u.png"],
                ["decode", input, "-o", directory.path + "/d.png"],
            ] {
                let run = try await Command.peakMemory(arguments)
                #expect(!run.signaled, "\(name) \(arguments[0]) crashed")
                #expect(run.status == 0 || run.status == 1, "\(name) \(arguments[0]): exit \(run.status)")
                // Every file here either fails before allocating or is small: 64 MiB past the baseline is
                // far below what any of them once asked for (1 to 200 GB). Under a sanitizer, whose
                // shadow memory grows with every allocation, only the absence of a crash is checked.
                if ProcessInfo.processInfo.environment["IMAGELOADER_SANITIZER"] == nil {
                    #expect(run.maxRSSKiB < baseline.maxRSSKiB + 64 << 10, "\(name) \(arguments): \(run.maxRSSKiB) KiB")
                }
            }
        }
    }
}
