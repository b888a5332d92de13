import ArgumentParser
import Foundation
import HTTPTypes
import Hummingbird
import ImageLoader
import ImageLoaderSupport
import Logging
import RasterImage

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "The main job on a folder of images: serve them over HTTP, thumbnail them twice, cold then warm.",
        discussion: """
            Serves the images (scripts/demo.sh gives photographs in every format; by default the \
            repository's Fixtures/images) from an HTTP server inside this process, with ETags and \
            max-age, then runs the batch against it twice: cold (every image downloaded) and warm (a \
            new loader on the same cache folder, as after a restart). Prints what came from where and \
            how long each pass took, then how long each file's thumbnail takes from its bytes, and \
            writes the thumbnails and a contact sheet to --out.
            """
    )

    @Option(
        help: "The folder of images to serve (default: Fixtures/images, looked for from here and from the executable).")
    var images: String?

    @Option(help: "The longest side of the thumbnails.")
    var size = 256

    @Option(help: "Where the thumbnails and the contact sheet go.")
    var out = "demo-output"

    @Option(help: "The cache folder (default: a new temporary one, so the first pass is cold).")
    var cacheDir: String?

    func run() async throws {
        let folder = try images ?? DemoCommand.findFixtures()
        let names = try FileManager.default.contentsOfDirectory(atPath: folder)
            .filter { !$0.hasPrefix(".") }.sorted()
        guard !names.isEmpty else { throw CommandFailure("\(folder): no images") }
        let cacheDirectory = cacheDir ?? NSTemporaryDirectory() + "imageloader-demo-" + UUID().uuidString
        defer { if cacheDir == nil { try? FileManager.default.removeItem(atPath: cacheDirectory) } }

        let server = try await DemoServer.start(serving: folder)
        defer { server.stop() }
        print("serving \(names.count) images from \(folder) at http://127.0.0.1:\(server.port)/images/")
        let items = names.map { name in
            BatchItem(input: name, url: URL(string: "http://127.0.0.1:\(server.port)/images/\(name)")!)
        }
        var options = ThumbnailOptions(maxPixelSize: size)
        options.outputFormat = .automatic(quality: 85)
        var configuration = ImageLoader.Configuration()
        configuration.cacheDirectory = cacheDirectory

        var last = BatchSummary()
        for (pass, label) in [(1, "cold"), (2, "warm")] {
            let loader = try ImageLoader(configuration: configuration)
            let summary: BatchSummary
            do {
                summary = try await BatchRunner(
                    loader: loader, options: options, outputDirectory: out + "/" + label, concurrency: 16,
                    keepsImages: pass == 2
                ).run(items)
                try await loader.shutdown()
            } catch {
                try? await loader.shutdown()
                throw error
            }
            print("pass \(pass), \(label): " + BatchReport.text(summary, outputDirectory: out + "/" + label))
            last = summary
        }
        print("requests the server answered: \(server.requests) (\(server.notModified) with 304)")
        let timed = try timings(folder: folder, names: names, options: options)
        print("each thumbnail from its file's bytes, in this process (median of \(DemoCommand.rounds)):")
        for entry in timed { print("  " + entry.line) }
        let sheet = out + "/sheet.png"
        let tiles = timed.compactMap(\.entry)
        let heading =
            "\(tiles.count) images, thumbnails of \(size) px: upright, sRGB, times from the bytes in memory"
        guard let picture = ContactSheet(cellSize: size, heading: heading).render(tiles) else {
            throw CommandFailure("\(folder): no thumbnails for the contact sheet")
        }
        try Terminal.write(try PNGEncoder().encode(picture), to: sheet)
        print("contact sheet: \(sheet)")
        _ = last
    }

    /// Runs of each thumbnail timed; the median is reported.
    static let rounds = 3

    /// Each file's thumbnail made from its bytes, timed, for the table and the sheet. A
    /// file that cannot be made into one (too large for the limits, damaged) gets a line
    /// saying why and no tile; the others go on.
    func timings(folder: String, names: [String], options: ThumbnailOptions) throws -> [(
        line: String, entry: SheetEntry?
    )] {
        let decoder = ImageDecoder()
        var rows: [(line: String, entry: SheetEntry?)] = []
        let width = names.map(\.count).max() ?? 0
        for name in names {
            guard let data = FileManager.default.contents(atPath: folder + "/" + name),
                let info = try? decoder.info(.data(data))
            else { continue }
            var times: [Duration] = []
            var thumbnail: RasterImage?
            let padded = name + String(repeating: " ", count: width - name.count)
            do {
                for _ in 0..<DemoCommand.rounds {
                    let start = ContinuousClock.now
                    thumbnail = try decoder.thumbnail(.data(data), options: options)
                    times.append(ContinuousClock.now - start)
                }
            } catch {
                rows.append(("\(padded)  skipped: \(error)", nil))
                continue
            }
            guard let thumbnail else { continue }
            let median = times.sorted()[times.count / 2]
            let milliseconds = Double(median.components.attoseconds) / 1e15 + Double(median.components.seconds) * 1000
            let frames = info.frameCount > 1 ? ", \(info.frameCount) frames" : ""
            let source =
                "\(info.format.displayName) \(info.width)×\(info.height)\(frames), \(DemoCommand.size(data.count))"
            let made = "\(thumbnail.width)×\(thumbnail.height) in \(String(format: "%.1f", milliseconds)) ms"
            rows.append(
                ("\(padded)  \(source) -> \(made)", SheetEntry(title: name, details: [source, made], image: thumbnail)))
        }
        return rows
    }

    /// Bytes in words: 812 B, 76 KB, 1.2 MB.
    static func size(_ bytes: Int) -> String {
        if bytes < 1000 { return "\(bytes) B" }
        if bytes < 1_000_000 { return "\(bytes / 1000) KB" }
        return String(format: "%.1f MB", Double(bytes) / 1e6)
    }

    /// Fixtures/images, from the current folder up, or from the executable's folder up.
    static func findFixtures() throws -> String {
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent()
        for start in [URL(fileURLWithPath: FileManager.default.currentDirectoryPath), executable] {
            var folder = start
            for _ in 0..<6 {
                let candidate = folder.appendingPathComponent("Fixtures/images").path
                if FileManager.default.fileExists(atPath: candidate) { return candidate }
                folder.deleteLastPathComponent()
            }
        }
        throw CommandFailure("cannot find Fixtures/images; give --images")
    }
}

/// A static image server for the demo: content type from the bytes, an ETag from the
/// file's size and date, max-age of an hour, 304 for a matching If-None-Match.
final class DemoServer: Sendable {
    let port: Int
    private let task: Task<Void, any Error>
    private let counters: DemoCounters

    var requests: Int { counters.requests }
    var notModified: Int { counters.notModified }

    private init(port: Int, task: Task<Void, any Error>, counters: DemoCounters) {
        self.port = port
        self.task = task
        self.counters = counters
    }

    static func start(serving folder: String) async throws -> DemoServer {
        let counters = DemoCounters()
        let router = Router()
        router.get("images/:name") { request, context -> Response in
            let name = try context.parameters.require("name")
            counters.count(notModified: false)
            guard !name.contains("/"), !name.hasPrefix("."),
                let bytes = FileManager.default.contents(atPath: folder + "/" + name),
                let attributes = try? FileManager.default.attributesOfItem(atPath: folder + "/" + name)
            else { return Response(status: .notFound) }
            let modified = (attributes[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
            let etag = "\"\(bytes.count)-\(Int(modified))\""
            var headers: HTTPFields = [.eTag: etag, .cacheControl: "max-age=3600"]
            if request.headers[.ifNoneMatch] == etag {
                counters.count(notModified: true)
                return Response(status: .notModified, headers: headers)
            }
            headers[.contentType] = ImageFormat.sniff(bytes.prefix(32))?.contentType ?? "application/octet-stream"
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
        }
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                continuation.yield(channel.localAddress?.port ?? 0)
                continuation.finish()
            },
            logger: Logger(label: "demo-server", factory: { _ in SwiftLogNoOpLogHandler() }))
        let task = Task { try await app.runService(gracefulShutdownSignals: []) }
        var port = 0
        for await value in ports { port = value }
        guard port != 0 else { throw CommandFailure("the demo server did not start") }
        return DemoServer(port: port, task: task, counters: counters)
    }

    func stop() { task.cancel() }
}

final class DemoCounters: Sendable {
    private let values = Lock((requests: 0, notModified: 0))

    func count(notModified: Bool) {
        values.withLock {
            if notModified { $0.notModified += 1 } else { $0.requests += 1 }
        }
    }

    var requests: Int { values.withLock { $0.requests } }
    var notModified: Int { values.withLock { $0.notModified } }
}
