import Foundation
import ImageLoaderSupport
import RasterImage
import TestSupport
import Testing

@testable import ImageLoader

/// A clock the test moves by hand; the loader and the origin's Date headers both read it.
final class ManualClock: Sendable {
    private let current: Lock<Date>

    init(_ start: Date = Date(timeIntervalSince1970: 1_750_000_000)) { current = Lock(start) }

    var now: Date { current.withLock { $0 } }

    func advance(by seconds: TimeInterval) { current.withLock { $0 += seconds } }

    /// The current time as an HTTP date, offset by `seconds`.
    func httpDate(_ seconds: TimeInterval = 0) -> String { HTTPDates.format(now.addingTimeInterval(seconds)) }
}

/// IMF-fixdate for the test origin's headers, written here independently of the library's.
enum HTTPDates {
    static func format(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "GMT")!
        let formatter = DateFormatter()
        formatter.calendar = calendar
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }
}

enum TestImages {
    static let fixtures = URL(fileURLWithPath: FixturePaths.root)

    static func bytes(_ name: String) -> [UInt8] {
        [UInt8](try! Data(contentsOf: fixtures.appendingPathComponent("images/" + name)))
    }

    static let png = bytes("png-rgba8.png")
    static let jpeg = bytes("jpeg-420.jpg")
    static let gif = bytes("gif-still.gif")
    static let otherPNG = bytes("png-rgb8.png")
}

/// A loader on a new temporary cache directory, with the test's clock.
/// (Every loader it makes is shut down by ``cleanUp()``, which ``withOrigin`` calls, even
/// when a test throws: an HTTP client left running would stop the test process.)
struct LoaderHarness: Sendable {
    let directory: String
    let clock: ManualClock
    private let loaders = LoaderList()

    init(clock: ManualClock = ManualClock()) {
        directory =
            FileManager.default.temporaryDirectory.appendingPathComponent("imageloader-" + UUID().uuidString).path
        self.clock = clock
    }

    func shutDownLoaders() async {
        for loader in loaders.all { try? await loader.shutdown() }
    }

    func configuration(_ change: (inout ImageLoader.Configuration) throws -> Void = { _ in }) rethrows
        -> ImageLoader.Configuration
    {
        var configuration = ImageLoader.Configuration()
        configuration.cacheDirectory = directory
        let clock = self.clock
        configuration.clock = { clock.now }
        // Long: a test about a timeout sets its own. The total timeout races a sleep on
        // the cooperative pool, which the whole suite's synchronous work can hold for many
        // seconds on two cores; then a short one ends loads the test is not about.
        configuration.http.timeout = .seconds(120)
        try change(&configuration)
        return configuration
    }

    func loader(
        folder: any CacheFolderAccess = LocalFolder(),
        _ change: (inout ImageLoader.Configuration) throws -> Void = { _ in }
    ) throws -> ImageLoader {
        let loader = try ImageLoader(configuration: try configuration(change), diskCacheFolder: folder)
        loaders.add(loader)
        return loader
    }

    func cleanUp() async {
        await shutDownLoaders()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The response the harness's disk cache holds for `url`, read by a cache of its own.
    func storedResponse(_ url: URL) -> StoredResponse? {
        (try? DiskCache(directory: directory))?.storedResponse(for: url.absoluteString)
    }
}

extension ImageLoader {
    /// Every event of one load, in order.
    func allEvents(for url: URL, options: LoadOptions = LoadOptions()) async -> [ImageLoadEvent] {
        var events: [ImageLoadEvent] = []
        for await event in self.events(for: url, options: options) {
            if case .progress = event { continue }
            events.append(event)
        }
        return events
    }
}

/// A compact, comparable form of events, for assertions.
enum Moment: Equatable, CustomStringConvertible {
    case cached(LoadedImage.Source, LoadedImage.Freshness = .fresh)
    case sending(hadCache: Bool)
    case completed(LoadedImage.Source)
    case failed(ImageLoadingError.Reason)

    init?(_ event: ImageLoadEvent) {
        switch event {
        case .cached(let image): self = .cached(image.source, image.freshness)
        case .sendingRequest(let hadCache): self = .sending(hadCache: hadCache)
        case .completed(let image): self = .completed(image.source)
        case .failed(let error): self = .failed(error.reason)
        case .progress: return nil
        }
    }

    var description: String {
        switch self {
        case .cached(let source, let freshness): "cached(\(source)\(freshness == .fresh ? "" : ", \(freshness)"))"
        case .sending(let hadCache): "sending(hadCache: \(hadCache))"
        case .completed(let source): "completed(\(source))"
        case .failed(let reason): "failed(\(reason))"
        }
    }
}

extension Array where Element == ImageLoadEvent {
    var moments: [Moment] { compactMap(Moment.init) }
}

/// Runs `body` with a started origin and a harness, stopping and cleaning both after.
func withOrigin(
    clock: ManualClock = ManualClock(), _ body: (TestOrigin, LoaderHarness) async throws -> Void
) async throws {
    let origin = try await TestOrigin.start()
    let harness = LoaderHarness(clock: clock)
    do {
        try await body(origin, harness)
    } catch {
        await harness.cleanUp()
        await origin.stop()
        throw error
    }
    await harness.cleanUp()
    await origin.stop()
}

extension ImageLoader {
    /// The error of a load that is expected to fail; records an issue when it succeeds.
    func loadError(
        _ url: URL, options: LoadOptions = LoadOptions(), sourceLocation: SourceLocation = #_sourceLocation
    ) async -> ImageLoadingError? {
        do {
            let loaded = try await image(for: url, options: options)
            Issue.record("expected a failure, got an image from \(loaded.source)", sourceLocation: sourceLocation)
            return nil
        } catch {
            return error
        }
    }
}

final class LoaderList: Sendable {
    private let loaders = Lock<[ImageLoader]>([])

    func add(_ loader: ImageLoader) { loaders.withLock { $0.append(loader) } }

    var all: [ImageLoader] { loaders.withLock { $0 } }
}

/// The two paths a URL's bytes take through the HTTP cache, for tests that must hold
/// for both: an image load, and `data(for:)` (the service's sources).
enum CachePath: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case image, data

    var testDescription: String { rawValue }

    /// What a load gave, in terms both paths share.
    struct Fetched: CustomStringConvertible {
        let source: LoadedImage.Source
        let freshness: LoadedImage.Freshness
        let image: RasterImage?
        let bytes: [UInt8]?

        var description: String {
            "\(source), \(freshness), "
                + (bytes.map { "\($0.count) bytes" } ?? image.map { "\($0.width)x\($0.height)" } ?? "")
        }

        /// Where it came from, with memory and disk as one (`data(for:)` has no memory cache).
        enum Tier: Equatable { case cache, network }
        var tier: Tier { source == .memory || source == .disk ? .cache : .network }

        /// Whether it is `expected`: the same bytes, or the same pixels once decoded.
        func matches(_ expected: [UInt8]) -> Bool {
            if let bytes { return bytes == expected }
            guard let image, let reference = try? ImageDecoder().decode(.bytes(expected)) else { return false }
            return image.width == reference.width && image.pixels == reference.pixels
        }
    }

    func fetch(_ loader: ImageLoader, _ url: URL, _ options: LoadOptions = LoadOptions())
        async throws(ImageLoadingError)
        -> Fetched
    {
        switch self {
        case .image:
            let loaded = try await loader.image(for: url, options: options)
            return Fetched(source: loaded.source, freshness: loaded.freshness, image: loaded.image, bytes: nil)
        case .data:
            let loaded = try await loader.data(for: url, options: options)
            return Fetched(source: loaded.source, freshness: loaded.freshness, image: nil, bytes: loaded.bytes)
        }
    }
}

/// A count several tasks add to.
final class Tally: Sendable {
    private let count = Lock(0)

    func increment() { count.withLock { $0 += 1 } }

    var value: Int { count.withLock { $0 } }
}

/// What the shared-stage and server tests load: an 800x600 JPEG, its type, two
/// thumbnail sizes, and how far two images of one size differ.
protocol PhotoFixtures {}

private let photoBytes = TestImages.bytes("jpeg-800x600.jpg")

extension PhotoFixtures {
    static var jpegType: (String, String) { ("Content-Type", "image/jpeg") }
    static var photo: [UInt8] { photoBytes }
    var large: ThumbnailOptions { ThumbnailOptions(maxPixelSize: 128) }
    var small: ThumbnailOptions { ThumbnailOptions(maxPixelSize: 64) }

    /// The mean absolute difference per channel of two images of the same size.
    static func meanDifference(_ a: RasterImage, _ b: RasterImage) -> Double {
        guard a.width == b.width, a.height == b.height else { return .infinity }
        let (x, y) = (a.pixels, b.pixels)
        var total = 0
        for index in x.indices { total += abs(Int(x[index]) - Int(y[index])) }
        return Double(total) / Double(x.count)
    }
}
