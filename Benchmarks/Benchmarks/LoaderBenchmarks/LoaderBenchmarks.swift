// The loader's in-process figures: a memory-cache hit and a disk-cache hit through the
// public async API, and 1,000 concurrent loads of 10 URLs against a real HTTP origin in
// this process, with the origin's request count and the loader's decode count recorded
// as metrics (and checked: a run with the wrong counts fails).
//
//     cd Benchmarks && swift package benchmark
import Benchmark
import Foundation
import ImageLoader
import RasterImage
import Synchronization

/// The cache folders this process made, removed when it exits: the stages live as long
/// as the process, and the benchmark runner gives them no other end.
let scratchFolders = Mutex<[String]>([])

/// A new folder under the temporary directory, removed at exit.
func scratchFolder(_ prefix: String) -> String {
    let path = NSTemporaryDirectory() + prefix + UUID().uuidString
    let first = scratchFolders.withLock { folders in
        folders.append(path)
        return folders.count == 1
    }
    if first {
        atexit {
            for folder in scratchFolders.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: folder) }
        }
    }
    return path
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration.maxDuration = .seconds(5)

    Benchmark(
        "Memory-cache hit, image(for:)",
        configuration: .init(
            metrics: [.wallClock, .throughput, .mallocCountTotal], timeUnits: .nanoseconds,
            maxIterations: 1_000_000)
    ) { benchmark in
        let stage = try await Stage.shared.value
        benchmark.startMeasurement()
        let loaded = try await stage.memoryLoader.image(for: stage.urls[0])
        benchmark.stopMeasurement()
        try expect(loaded.source == .memory, "answered from \(loaded.source), not memory")
    }

    Benchmark(
        "Memory-cache hit, image(for:), x1000",
        configuration: .init(
            metrics: [.wallClock, .throughput, .mallocCountTotal], timeUnits: .nanoseconds,
            scalingFactor: .kilo, maxIterations: 1_000_000)
    ) { benchmark in
        let stage = try await Stage.shared.value
        let url = stage.urls[0]
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try await stage.memoryLoader.image(for: url))
        }
        benchmark.stopMeasurement()
    }

    Benchmark(
        "Memory-cache hit, thumbnail(for:) 256 px",
        configuration: .init(
            metrics: [.wallClock, .throughput, .mallocCountTotal], timeUnits: .nanoseconds,
            maxIterations: 1_000_000)
    ) { benchmark in
        let stage = try await Stage.shared.value
        benchmark.startMeasurement()
        let loaded = try await stage.memoryLoader.thumbnail(for: stage.urls[0], options: Stage.thumbnailOptions)
        benchmark.stopMeasurement()
        try expect(loaded.source == .memory, "answered from \(loaded.source), not memory")
    }

    Benchmark(
        "Disk-cache hit, thumbnail(for:) 256 px, memory cache off",
        configuration: .init(
            metrics: [.wallClock, .throughput, .mallocCountTotal], timeUnits: .microseconds, maxIterations: 100_000)
    ) { benchmark in
        let stage = try await Stage.shared.value
        benchmark.startMeasurement()
        let loaded = try await stage.diskLoader.thumbnail(for: stage.urls[0], options: Stage.thumbnailOptions)
        benchmark.stopMeasurement()
        try expect(loaded.source == .disk, "answered from \(loaded.source), not disk")
        try expect(max(loaded.image.width, loaded.image.height) == 256, "a \(loaded.image.width) px thumbnail")
    }

    // The server path: a thumbnail of bytes already in memory (an upload), through the
    // loader's workers and limits, memory cache off so every call decodes. With N
    // worker threads, N requests at a time: an iteration's time is their latency,
    // and N / time the throughput.
    for threads in [1, 2] {
        Benchmark(
            "Server path, thumbnail(of:) bytes 256 px, \(threads) thread\(threads == 1 ? "" : "s"), \(threads) at a time",
            configuration: .init(
                metrics: [.wallClock, .throughput, .peakMemoryResident], timeUnits: .microseconds,
                maxDuration: .seconds(10), maxIterations: 2_000)
        ) { benchmark in
            let stage = try await ServerStage.shared.value
            let loader = stage.loaders[threads - 1]
            let photo = stage.photo
            benchmark.startMeasurement()
            let made = await withTaskGroup(of: Int.self) { group in
                for _ in 0..<threads {
                    group.addTask {
                        (try? await loader.thumbnail(of: photo, options: Stage.thumbnailOptions))?.encoded?.bytes.count
                            ?? 0
                    }
                }
                return await group.reduce(0) { $0 + ($1 > 0 ? 1 : 0) }
            }
            benchmark.stopMeasurement()
            try expect(made == threads, "\(threads - made) thumbnails failed")
        }
    }

    // The same work without the loader, for its overhead: decode-and-resize, then encode,
    // on the benchmark's own task.
    Benchmark(
        "Server path baseline, ImageDecoder.thumbnail + encode, no loader",
        configuration: .init(
            metrics: [.wallClock, .throughput], timeUnits: .microseconds, maxDuration: .seconds(10),
            maxIterations: 2_000)
    ) { benchmark in
        let photo = try await ServerStage.shared.value.photo
        benchmark.startMeasurement()
        let thumbnail = try ImageDecoder().thumbnail(.bytes(photo), options: Stage.thumbnailOptions)
        let encoded = try thumbnail.encoded(as: Stage.thumbnailOptions.outputFormat)
        benchmark.stopMeasurement()
        try expect(!encoded.bytes.isEmpty, "nothing encoded")
    }

    // The header read the service makes before a thumbnail (for the pixel limit, the
    // format and the 304), beside the thumbnail above that reads it again to decode.
    Benchmark(
        "ImageDecoder.info, 1600x1200 JPEG",
        configuration: .init(metrics: [.wallClock, .throughput], timeUnits: .microseconds, maxIterations: 100_000)
    ) { benchmark in
        let photo = try await ServerStage.shared.value.photo
        benchmark.startMeasurement()
        let info = try ImageDecoder().info(.bytes(photo))
        benchmark.stopMeasurement()
        try expect(info.width == 1600, "a \(info.width) px wide header")
    }

    for product in ConcurrentProduct.allCases {
        Benchmark(
            "1000 concurrent loads of 10 URLs, \(product.rawValue), cold cache",
            configuration: .init(
                metrics: [.wallClock, .peakMemoryResident, .origin, .decodes, .resamples],
                timeUnits: .milliseconds, maxDuration: .seconds(10), maxIterations: 30)
        ) { benchmark in
            let stage = try await Stage.shared.value
            let loader = try stage.coldLoader()
            let before = stage.origin.requests
            benchmark.startMeasurement()
            let failures = await loadConcurrently(loader, stage.urls, count: 1000, product: product)
            benchmark.stopMeasurement()
            let statistics = loader.statistics
            let requests = stage.origin.requests - before
            try await loader.shutdown()
            try? FileManager.default.removeItem(atPath: loader.configuration.cacheDirectory ?? "")
            benchmark.measurement(.origin, requests)
            benchmark.measurement(.decodes, statistics.decodes)
            benchmark.measurement(.resamples, statistics.thumbnailsMade)
            try expect(failures == 0, "\(failures) loads failed")
            try expect(requests == stage.urls.count, "\(requests) origin requests for \(stage.urls.count) URLs")
            try expect(statistics.decodes == stage.urls.count, "\(statistics.decodes) decodes")
            let resamples = product == .thumbnail ? stage.urls.count : 0
            try expect(statistics.thumbnailsMade == resamples, "\(statistics.thumbnailsMade) resamples")
        }
    }
    // Disk hits on a cache of 10,000 entries (memory cache off): each hit records its
    // access in the disk cache's index, which is written to disk whole. When every 64th
    // hit rewrote it, a hit-heavy process re-encoded the 10,000-entry index constantly.
    Benchmark(
        "Disk-cache hits on 10,000 entries, image(for:) x1000, memory cache off",
        configuration: .init(
            metrics: [.wallClock, .throughput], timeUnits: .milliseconds, maxDuration: .seconds(10),
            maxIterations: 30)
    ) { benchmark in
        let stage = try await DiskHitStage.shared.value
        var sources: [LoadedImage.Source] = []
        benchmark.startMeasurement()
        for index in 0..<1_000 {
            sources.append(
                try await stage.loader.image(for: stage.urls[(stage.next() + index) % stage.urls.count]).source)
        }
        benchmark.stopMeasurement()
        try expect(sources.allSatisfy { $0 == .disk }, "answered from \(Set(sources.map { "\($0)" })), not only disk")
    }

    // A burst of prefetches behind one load slot: 10,000 distinct URLs queue at the
    // loader's scheduler and are released one at a time. The bytes come from memory
    // (a DataLoading that answers at once), so the time is the pipeline's and the
    // scheduler's own: a release that looked at every waiter made this quadratic.
    Benchmark(
        "10,000 prefetches through 1 load slot, bytes from memory",
        configuration: .init(
            metrics: [.wallClock, .peakMemoryResident], timeUnits: .milliseconds, maxDuration: .seconds(20),
            maxIterations: 10)
    ) { benchmark in
        let loader = try PrefetchStage.loader()
        let urls = (0..<10_000).map { URL(string: "http://prefetch.invalid/\($0).png")! }
        benchmark.startMeasurement()
        loader.prefetch(urls)
        await loader.waitForBackgroundWork()
        benchmark.stopMeasurement()
        let statistics = loader.statistics
        try await loader.shutdown()
        try expect(statistics.decodes == urls.count, "\(statistics.decodes) decodes for \(urls.count) prefetches")
    }
}

extension BenchmarkMetric {
    static var origin: BenchmarkMetric { .custom("origin requests", useScalingFactor: false) }
    static var decodes: BenchmarkMetric { .custom("decodes", useScalingFactor: false) }
    static var resamples: BenchmarkMetric { .custom("resamples", useScalingFactor: false) }
}

enum ConcurrentProduct: String, CaseIterable, Sendable {
    case image = "image(for:)"
    case thumbnail = "thumbnail(for:) 256 px"
}

/// Starts `count` loads at once, cycling through `urls`; returns how many failed.
func loadConcurrently(_ loader: ImageLoader, _ urls: [URL], count: Int, product: ConcurrentProduct) async -> Int {
    await withTaskGroup(of: Bool.self) { group in
        for index in 0..<count {
            let url = urls[index % urls.count]
            group.addTask {
                switch product {
                case .image: (try? await loader.image(for: url)) != nil
                case .thumbnail: (try? await loader.thumbnail(for: url, options: Stage.thumbnailOptions)) != nil
                }
            }
        }
        var failures = 0
        for await succeeded in group where !succeeded { failures += 1 }
        return failures
    }
}

/// The server path's loaders (no caches; 1 and 2 worker threads) and its input, made
/// only when a server-path benchmark runs: their threads would otherwise add malloc
/// arenas to the other benchmarks' peak RSS (measured: 164 MB became 250 MB).
final class ServerStage: Sendable {
    static let shared = Task { try ServerStage() }

    let loaders: [ImageLoader]
    /// The first origin image's bytes (1600x1200 JPEG).
    let photo: [UInt8]

    private init() throws {
        photo = try Stage.photo(0)
        loaders = try [1, 2].map { threads in
            var configuration = ImageLoader.Configuration()
            configuration.cacheDirectory = nil
            configuration.cacheImagesInMemory = false
            configuration.decodingThreads = threads
            return try ImageLoader(configuration: configuration)
        }
    }
}

struct BenchmarkFailure: Error, CustomStringConvertible {
    let description: String
}

func expect(_ condition: Bool, _ message: @autoclosure () -> String) throws {
    guard condition else {
        // Also on standard error: run on its own, the runner ends without saying why.
        let description = message()
        FileHandle.standardError.write(Data("benchmark failed: \(description)\n".utf8))
        throw BenchmarkFailure(description: description)
    }
}

/// What every benchmark shares: the origin, its ten images, and loaders made warm once.
final class Stage: Sendable {
    static let shared = Task { try await Stage() }
    static let thumbnailOptions = ThumbnailOptions(maxPixelSize: 256)

    let origin: Origin
    let urls: [URL]
    /// Memory cache on; `urls[0]` and its thumbnail already loaded.
    let memoryLoader: ImageLoader
    /// Memory cache off; the thumbnail of `urls[0]` already on its disk.
    let diskLoader: ImageLoader
    private let root: String

    private init() async throws {
        root = scratchFolder("imageloader-benchmarks-")
        // Ten photo-sized JPEGs, 1600x1200, q85, 4:2:0, made with the library's encoder.
        var bodies: [String: [UInt8]] = [:]
        for index in 0..<10 {
            bodies["/image-\(index).jpg"] = try Stage.photo(index)
        }
        let origin = try await Origin.start(serving: bodies)
        self.origin = origin
        urls = (0..<10).map { URL(string: "http://127.0.0.1:\(origin.port)/image-\($0).jpg")! }

        memoryLoader = try ImageLoader(configuration: Stage.configuration(root + "/memory"))
        _ = try await memoryLoader.image(for: urls[0])
        _ = try await memoryLoader.thumbnail(for: urls[0], options: Stage.thumbnailOptions)

        var disk = Stage.configuration(root + "/disk")
        disk.cacheImagesInMemory = false
        diskLoader = try ImageLoader(configuration: disk)
        _ = try await diskLoader.thumbnail(for: urls[0], options: Stage.thumbnailOptions)
    }

    /// The JPEG the origin serves as image `index` (1600x1200, q85, 4:2:0).
    static func photo(_ index: Int) throws -> [UInt8] {
        try JPEGEncoder(quality: 85).encode(Stage.picture(seed: index))
    }

    /// A loader on a new, empty cache folder.
    func coldLoader() throws -> ImageLoader {
        try ImageLoader(configuration: Stage.configuration(root + "/cold-" + UUID().uuidString))
    }

    private static func configuration(_ directory: String) -> ImageLoader.Configuration {
        var configuration = ImageLoader.Configuration()
        configuration.cacheDirectory = directory
        return configuration
    }

    /// Smooth gradients with some texture, so the JPEG is neither trivial nor noise.
    static func picture(seed: Int) -> RasterImage {
        let (width, height) = (1600, 1200)
        var pixels = [UInt8](repeating: 255, count: width * height * 4)
        for y in 0..<height {
            for x in 0..<width {
                let offset = (y * width + x) * 4
                let wave = (x * (seed + 3) / 7 + y * 5 / (seed + 2)) & 63
                pixels[offset] = UInt8((x * 255 / width + wave) & 255)
                pixels[offset + 1] = UInt8((y * 255 / height + seed * 20) & 255)
                pixels[offset + 2] = UInt8(((x + y) * 255 / (width + height) + wave / 2) & 255)
            }
        }
        return RasterImage(width: width, height: height, pixels: pixels, hasAlpha: false)!
    }
}

/// A loader with one load slot whose bytes come from memory: a 1x1 PNG for every URL.
enum PrefetchStage {
    struct MemoryBytes: DataLoading {
        let body: [UInt8]

        func load(_ request: DataRequest, progress: @escaping @Sendable (Int, Int?) -> Void) async throws
            -> DataResponse
        {
            let now = Date()
            return DataResponse(
                url: request.url, status: 200,
                headers: [HeaderField("Content-Type", "image/png"), HeaderField("Cache-Control", "max-age=86400")],
                body: body, requestTime: now,
                responseTime: now)
        }

        func shutdown() async throws {}
    }

    static func loader() throws -> ImageLoader {
        var configuration = ImageLoader.Configuration()
        configuration.cacheDirectory = nil
        configuration.concurrentLoads = 1
        configuration.dataLoader = MemoryBytes(
            body: try PNGEncoder().encode(RasterImage(width: 1, height: 1, pixels: [9, 8, 7, 255], hasAlpha: false)!))
        return try ImageLoader(configuration: configuration)
    }
}

/// A loader whose disk cache holds 10,000 entries (1x1 PNGs from memory), memory cache off.
final class DiskHitStage: Sendable {
    static let shared = Task { try await DiskHitStage() }

    let loader: ImageLoader
    let urls: [URL]
    private let cursor = Mutex(0)

    /// Where the next iteration starts, so iterations hit different entries.
    func next() -> Int {
        cursor.withLock {
            $0 += 1_000
            return $0
        }
    }

    private init() async throws {
        var configuration = try PrefetchStage.loader().configuration
        configuration.concurrentLoads = 8
        configuration.cacheImagesInMemory = false
        configuration.cacheDirectory = scratchFolder("imageloader-disk-hits-")
        loader = try ImageLoader(configuration: configuration)
        urls = (0..<10_000).map { URL(string: "http://disk-hits.invalid/\($0).png")! }
        loader.prefetch(urls)
        await loader.waitForBackgroundWork()
        loader.diskCache?.flush()
        let entries = loader.diskCache?.statistics.entries ?? 0
        try expect(entries == urls.count, "\(entries) entries on disk for \(urls.count) URLs")
    }
}
