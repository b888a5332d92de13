import AsyncHTTPClient
import Foundation
import ImageService
import NIOCore
import NIOHTTP1
import RasterImage
import TestSupport
import Testing

/// Each RasterImage program, and words its output must hold (of the 800x600 photo,
/// its 256-px thumbnail, the 5-frame animation).
let rasterImageOutputs: [String: [String]] = [
    "ReadmeRasterImage": ["RasterImage(800x600 jpeg", "ImageInfo(jpeg 800x600, opaque)", "\n5 [", "256x192"],
    "DocRasterImage": ["RasterImage(800x600 jpeg", "RasterImage(256x192 jpeg", "bytes of JPEG"],
    "DocGettingStarted": ["800 600", "\ntrue\n"],
    "DocDecodingAndValidation": ["ImageInfo(jpeg 800x600, opaque) accepted", "answered 422"],
    "DocThumbnails": ["RasterImage(256x192 jpeg", "EncodedImage(png", "5 frames", "[512, 128]"],
    "DocFormatsAndLimits": ["refused before any allocation", "more than the limit of 100000 pixels"],
]

/// The Swift in README.md and the DocC articles: every block is a program the package
/// builds (Examples/, copied from the documents by scripts/sync-examples.py) or a whole
/// `Package.swift`; here each program runs as a reader would run it, and each manifest
/// resolves in a package of its own beside a clone whose folder is not called ImageLoader.
@Suite("Documentation examples", .serialized)
struct DocumentationTests {
    static let repository = RepositoryPaths.root

    /// The documents that hold Swift: README.md and every DocC article.
    static let documents: [URL] = {
        let sources = repository.appendingPathComponent("Sources")
        let articles = (FileManager.default.enumerator(atPath: sources.path)?.compactMap { $0 as? String } ?? [])
            .filter { $0.contains(".docc/") && $0.hasSuffix(".md") }.sorted()
            .map { sources.appendingPathComponent($0) }
        return [repository.appendingPathComponent("README.md")] + articles
    }()

    @Test("README's layout names every folder of Sources and of each target, and every deploy folder")
    func layoutNamesEveryFolder() throws {
        let readme = try String(contentsOf: Self.repository.appendingPathComponent("README.md"), encoding: .utf8)
        let files = FileManager.default
        func folders(_ path: String) -> [String] {
            let url = Self.repository.appendingPathComponent(path)
            return ((try? files.contentsOfDirectory(atPath: url.path)) ?? []).filter { name in
                var isFolder: ObjCBool = false
                return files.fileExists(atPath: url.appendingPathComponent(name).path, isDirectory: &isFolder)
                    && isFolder.boolValue && !name.hasSuffix(".docc") && name != "include"
            }.sorted()
        }
        let targets = folders("Sources")
        #expect(!targets.isEmpty)
        for target in targets {
            #expect(readme.contains(target), "Sources/\(target) is not in README's layout")
            for folder in folders("Sources/" + target) {
                #expect(readme.contains(folder + "/"), "Sources/\(target)/\(folder) is not in README's layout")
            }
        }
        for folder in folders("deploy") { #expect(readme.contains("deploy/\(folder)/"), "deploy/\(folder)") }
    }

    /// A fenced Swift block of a document: its text, and the program it belongs to.
    struct Block {
        let document: String
        let line: Int
        let text: String
        let example: String?
    }

    static func blocks() throws -> [Block] {
        var found: [Block] = []
        for document in documents {
            let lines = try String(contentsOf: document, encoding: .utf8).components(separatedBy: "\n")
            var index = 0
            while index < lines.count {
                if lines[index].trimmingCharacters(in: .whitespaces) == "```swift" {
                    var end = index + 1
                    while end < lines.count, lines[end].trimmingCharacters(in: .whitespaces) != "```" { end += 1 }
                    let previous = index > 0 ? lines[index - 1] : ""
                    let marker = previous.range(of: #"^<!-- example: ([A-Za-z0-9]+) -->"#, options: .regularExpression)
                        .map { String(previous[$0].dropFirst("<!-- example: ".count).dropLast(" -->".count)) }
                    found.append(
                        Block(
                            document: document.lastPathComponent, line: index + 1,
                            text: lines[(index + 1)..<end].joined(separator: "\n") + "\n", example: marker))
                    index = end
                }
                index += 1
            }
        }
        return found
    }

    /// The built example programs sit beside the test bundle.
    static func program(_ name: String) -> URL {
        let candidates = [
            Bundle.main.bundleURL.appendingPathComponent(name),
            Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent(name),
            repository.appendingPathComponent(".build/debug/" + name),
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) } ?? candidates[0]
    }

    @Test("every Swift block is an example program or a whole Package.swift, and Examples/ holds the blocks as written")
    func examplesMatchDocuments() throws {
        let blocks = try Self.blocks()
        #expect(blocks.count > 20)
        var programs: [String: [String]] = [:]
        for block in blocks {
            if let example = block.example {
                programs[example, default: []].append(block.text)
            } else {
                #expect(
                    block.text.hasPrefix("// swift-tools-version:"),
                    "\(block.document):\(block.line): a Swift block that is no example and no manifest")
            }
        }
        let folder = Self.repository.appendingPathComponent("Examples")
        let onDisk = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        #expect(onDisk == programs.keys.sorted(), "Examples/ and the documents' markers differ")
        for (name, texts) in programs {
            let file = folder.appendingPathComponent(name + "/main.swift")
            let written = try String(contentsOf: file, encoding: .utf8)
            let body = written.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).last.map(
                String.init)
            #expect(
                body == texts.joined(separator: "\n"),
                "Examples/\(name) differs from its blocks: run python3 scripts/sync-examples.py")
        }
    }

    /// A folder with what the programs read: a photograph and an animation.
    static func withInputs<R>(_ body: (URL) async throws -> R) async throws -> R {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("examples-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let fixtures = repository.appendingPathComponent("Fixtures/images")
        for (fixture, name) in [("jpeg-800x600.jpg", "photo.jpg"), ("gif-animation.gif", "animation.gif")] {
            try FileManager.default.copyItem(
                at: fixtures.appendingPathComponent(fixture), to: folder.appendingPathComponent(name))
        }
        return try await body(folder)
    }

    /// The environment of a program run here: caches and temporary files in its folder.
    static func environment(_ folder: URL) -> [String: String] {
        ["TMPDIR": folder.path + "/", "XDG_CACHE_HOME": folder.path + "/cache"]
    }

    @Test(
        "the RasterImage programs run in a folder with a photo and an animation",
        arguments: rasterImageOutputs.keys.sorted())
    func rasterImagePrograms(_ name: String) async throws {
        try await Self.withInputs { folder in
            let result = try await ChildProcess.run(
                Self.program(name), environment: Self.environment(folder), directory: folder)
            #expect(result.status == 0 && !result.signaled, "\(name): \(result.stderr)")
            for words in rasterImageOutputs[name] ?? [] {
                #expect(result.stdout.contains(words), "\(name): \(words) not in \(result.stdout)")
            }
            // What they write, they write as images.
            for written in ["square.webp", "thumbnail.jpg", "photo.webp"]
            where FileManager.default.fileExists(atPath: folder.appendingPathComponent(written).path) {
                let info = try ImageDecoder().info(.file(path: folder.appendingPathComponent(written).path))
                #expect(info.width > 0, "\(written)")
            }
        }
    }

    @Test(
        "the loader programs load the URL they are given, through their caches",
        arguments: ["ReadmeImageLoader", "DocImageLoader", "DocLoadingAndHTTPCaching", "DocCachingInDepth"])
    func loaderPrograms(_ name: String) async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        let photo = try [UInt8](
            Data(contentsOf: Self.repository.appendingPathComponent("Fixtures/images/jpeg-800x600.jpg")))
        origin.serve(
            "/photo.jpg",
            .init(
                headers: [("Content-Type", "image/jpeg"), ("Cache-Control", "max-age=600"), ("ETag", "\"p1\"")],
                body: photo))
        try await Self.withInputs { folder in
            let result = try await ChildProcess.run(
                Self.program(name), [origin.url("/photo.jpg").absoluteString], environment: Self.environment(folder),
                directory: folder)
            #expect(result.status == 0 && !result.signaled, "\(name): \(result.stderr)")
            #expect(origin.count("/photo.jpg") >= 1)
            let expected = name == "DocCachingInDepth" ? "LoaderStatistics(" : "networkToDisk"
            #expect(result.stdout.contains(expected), "\(name): \(result.stdout)")
            #expect(!result.stdout.contains("failed"), "\(result.stdout)")
        }
    }

    @Test("the ObjectStorage program reads its object from an S3 store (moto, checking signatures), once")
    func objectStorageProgram() async throws {
        let store = try await StorageServer.start(.s3)
        do {
            let photo = try [UInt8](
                Data(contentsOf: Self.repository.appendingPathComponent("Fixtures/images/jpeg-800x600.jpg")))
            try await store.put("photos", "cat.jpg", photo, type: "image/jpeg", cacheControl: "max-age=600")
            try await Self.withInputs { folder in
                var environment = Self.environment(folder)
                environment["S3_ENDPOINT"] = store.endpoint
                environment["AWS_ACCESS_KEY_ID"] = store.settings["accessKeyID"]
                environment["AWS_SECRET_ACCESS_KEY"] = store.settings["secretAccessKey"]
                environment["HOME"] = folder.path
                let result = try await ChildProcess.run(
                    Self.program("DocObjectStorage"), [], environment: environment, directory: folder)
                #expect(result.status == 0 && !result.signaled, "\(result.stderr)")
                #expect(result.stdout.contains("800 600 networkToDisk"), "\(result.stdout)")
                let again = try await ChildProcess.run(
                    Self.program("DocObjectStorage"), [], environment: environment, directory: folder)
                #expect(again.stdout.contains("800 600 disk"), "\(again.stdout)")
            }
            let reads = try await store.requests().filter { $0.contains("GET /photos/cat.jpg") }
            #expect(reads.count == 1, "\(reads)")
        } catch {
            await store.stop()
            throw error
        }
        await store.stop()
    }

    static let key = "943b421c9eb07c830af81030552c86009268de4e532ba2ee2eab8247c6da0881"
    static let salt = "520f986b998545b4785e0defbc4f3c1203f22de2374a3d53cb7a7fe9fea309c5"

    static func get(_ url: String, method: HTTPMethod = .GET, body: [UInt8]? = nil) async throws -> (Int, [UInt8]) {
        var request = HTTPClientRequest(url: url)
        request.method = method
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(120))
        return (Int(response.status.code), Array(try await response.body.collect(upTo: 64 << 20).readableBytesView))
    }

    /// A server program, its standard output line-buffered (`stdbuf -oL`): printed to a
    /// pipe, its "listening on" line would otherwise wait in the C library's buffer.
    static func server(_ name: String, environment: [String: String], directory: URL) throws -> ChildProcess {
        try ChildProcess(
            URL(fileURLWithPath: "/usr/bin/stdbuf"), ["-oL", program(name).path], environment: environment,
            directory: directory)
    }

    /// The port a server program says it listens on, in a line `... http://127.0.0.1:PORT`.
    static func port(_ line: String?) throws -> Int {
        try #require(line.flatMap { $0.split(separator: ":").last }.flatMap { Int($0) })
    }

    @Test(
        "the service programs serve signed URLs of local images, and stop on SIGTERM",
        arguments: ["ReadmeImageService", "DocImageService"])
    func servicePrograms(_ name: String) async throws {
        try await Self.withInputs { folder in
            var environment = Self.environment(folder)
            environment.merge(["IMGPROXY_KEY": Self.key, "IMGPROXY_SALT": Self.salt, "PORT": "0", "OWN_PORT": "0"]) {
                $1
            }
            let server = try Self.server(name, environment: environment, directory: folder)
            let port = try Self.port(await server.waitForOutput(matching: #"listening on http://127\.0\.0\.1:\d+"#))
            let signature = try URLSignature(hexPairs: [(key: Self.key, salt: Self.salt)])
            let path = "/rs:fit:100:100/f:png/plain/local:///photo.jpg"
            let (status, body) = try await Self.get("http://127.0.0.1:\(port)/\(signature.sign(path))\(path)")
            if name == "ReadmeImageService" {
                #expect(status == 200)
                let info = try ImageDecoder().info(.bytes(body))
                #expect(info.format == .png && info.width == 100 && info.height == 75)
            } else {
                // This one serves only https://images.example.com/: a local source is refused
                // (404, imgproxy's status for a source not allowed).
                #expect(status == 404)
                let own = try Self.port(await server.waitForOutput(matching: #"own router on http://127\.0\.0\.1:\d+"#))
                let (hello, text) = try await Self.get("http://127.0.0.1:\(own)/hello")
                #expect(hello == 200 && String(decoding: text, as: UTF8.self) == "hello")
                #expect(try await Self.get("http://127.0.0.1:\(own)/health").0 == 200)
            }
            let end = await server.terminate()
            #expect(end.status == 0 && !end.signaled, "\(end.stderr)")
        }
    }

    @Test("the server of 'Using the loader in a server' thumbnails uploads and URLs, and stops on SIGTERM")
    func loaderServerProgram() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        let photo = try [UInt8](
            Data(contentsOf: Self.repository.appendingPathComponent("Fixtures/images/jpeg-800x600.jpg")))
        origin.serve("/photo.jpg", .init(headers: [("Content-Type", "image/jpeg")], body: photo))
        try await Self.withInputs { folder in
            var environment = Self.environment(folder)
            environment["PORT"] = "0"
            environment["ORIGIN_TOKEN"] = "secret"
            let server = try Self.server("DocUsingInAServer", environment: environment, directory: folder)
            let port = try Self.port(await server.waitForOutput(matching: #"listening on http://127\.0\.0\.1:\d+"#))
            let (uploaded, thumbnail) = try await Self.get(
                "http://127.0.0.1:\(port)/thumbnail", method: .POST, body: photo)
            #expect(uploaded == 200)
            let info = try ImageDecoder().info(.bytes(thumbnail))
            #expect(info.width == 256 && info.height == 192)
            let address = origin.url("/photo.jpg").absoluteString
            let (loaded, remote) = try await Self.get("http://127.0.0.1:\(port)/thumbnail?url=\(address)")
            #expect(loaded == 200 && (try? ImageDecoder().info(.bytes(remote)).width) == 256)
            #expect(origin.requests("/photo.jpg").first?.header("Authorization") == "Bearer secret")
            let end = await server.terminate()
            #expect(end.status == 0 && !end.signaled, "\(end.stderr)")
        }
    }

    @Test("each whole Package.swift resolves beside a clone whose folder is not called ImageLoader")
    func manifestsResolve() async throws {
        let manifests = try Self.blocks().filter { $0.example == nil }
        #expect(manifests.count >= 2)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("consumer-" + UUID().uuidString)
        defer { try? FileManager.default.removeItem(at: folder) }
        let clone = folder.appendingPathComponent("checkout-of-the-library")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: clone, withDestinationURL: Self.repository)
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map {
            String($0) + "/swift"
        }
        let candidates: [String] = ["/opt/swift/usr/bin/swift", "/usr/bin/swift"] + path
        let swift = try #require(candidates.first { FileManager.default.isExecutableFile(atPath: $0) })
        for (index, manifest) in manifests.enumerated() {
            let package = folder.appendingPathComponent("app\(index)")
            try FileManager.default.createDirectory(
                at: package.appendingPathComponent("Sources/App"), withIntermediateDirectories: true)
            let text = manifest.text.replacingOccurrences(of: "../ImageLoader", with: "../checkout-of-the-library")
            #expect(text != manifest.text, "\(manifest.document):\(manifest.line) names no ../ImageLoader")
            try text.write(to: package.appendingPathComponent("Package.swift"), atomically: true, encoding: .utf8)
            try "print(1)\n".write(
                to: package.appendingPathComponent("Sources/App/main.swift"), atomically: true, encoding: .utf8)
            let result = try await ChildProcess.run(
                URL(fileURLWithPath: swift),
                [
                    "package", "--package-path", package.path, "--scratch-path",
                    folder.appendingPathComponent("build\(index)").path, "describe",
                ])
            #expect(result.status == 0, "\(manifest.document):\(manifest.line): \(result.stderr)")
            #expect(result.stdout.contains("RasterImage"), "\(result.stdout)")
        }
    }
}
