import Foundation
import ImageLoaderSupport
import Logging
import RasterImage
import TestSupport
import Testing

@testable import ImageLoader

/// Cached bytes that changed after they were written are never served: each entry's
/// checksums are verified on every read, and a stored body that no longer decodes is
/// treated the same way.
@Suite("Integrity of cached bytes")
struct CacheIntegrityTests {
    static let png = ("Content-Type", "image/png")

    /// Ways an entry's file can change after it was written.
    enum Damage: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// One bit of the body, as bit rot would.
        case bodyBit
        /// A 4 KiB page of the body zeroed, as a power loss can leave it.
        case zeroedPage
        /// One byte of the metadata.
        case metadataByte
        /// Another program's bytes over the start of the file.
        case overwritten

        var testDescription: String { rawValue }

        func apply(to path: String) throws {
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            switch self {
            case .bodyBit: bytes[bytes.count - 100] ^= 0x10
            case .zeroedPage:
                let start = bytes.count - 4096 - 10
                for index in start..<(start + 4096) { bytes[index] = 0 }
            case .metadataByte: bytes[ChecksummedEnvelope.headerSize + 5] ^= 0x01
            case .overwritten:
                for (index, byte) in Array("GIF89a, nothing to do with it".utf8).enumerated() { bytes[index] = byte }
            }
            try Data(bytes).write(to: URL(fileURLWithPath: path))
        }
    }

    static var photo: [UInt8] { TestImages.bytes("jpeg-800x600.jpg") }

    func entryPath(_ harness: LoaderHarness, _ url: URL) -> String {
        harness.directory + "/entries/" + DiskCache.hash(of: url.absoluteString) + ".response"
    }

    @Test(
        "a damaged entry is a miss: removed, fetched again, counted, one warning",
        arguments: CachePath.allCases, Damage.allCases)
    func damagedEntry(_ path: CachePath, _ damage: Damage) async throws {
        try await withOrigin { origin, harness in
            origin.serve(
                "/d.jpg",
                .init(headers: [("Content-Type", "image/jpeg"), ("Cache-Control", "max-age=1000")], body: Self.photo))
            let url = origin.url("/d.jpg")
            let first = try harness.loader()
            _ = try await path.fetch(first, url)
            try await first.shutdown()
            try damage.apply(to: entryPath(harness, url))

            let log = LogRecorder()
            let loader = try harness.loader { $0.logger = log.logger }
            let loaded = try await path.fetch(loader, url)
            #expect(loaded.source == .networkToDisk)
            #expect(loaded.matches(Self.photo))
            #expect(origin.count("/d.jpg") == 2)
            #expect(loader.statistics.corruptCacheEntries == 1)
            #expect(loader.diskCache?.statistics.corruptEntriesRemoved == 1)
            #expect(log.messages(at: .warning).filter { $0.contains("damaged") }.count == 1)
            // Stored again, whole: the next load is a hit.
            let again = try await path.fetch(loader, url)
            #expect(again.tier == .cache)
            #expect(origin.count("/d.jpg") == 2)
            try await loader.shutdown()
        }
    }

    @Test(
        "an entry and a failure written before checksums are read once as misses (the entry stored again), not counted as damage"
    )
    func earlierFormat() async throws {
        try await withOrigin { origin, harness in
            origin.serve(
                "/old.png", .init(headers: [Self.png, ("Cache-Control", "max-age=1000")], body: TestImages.png))
            let url = origin.url("/old.png")
            // An entry as the previous version wrote it: "ILC1", the two lengths, JSON, the body.
            let response = StoredResponse(
                url: url.absoluteString, status: 200,
                headers: [HeaderField("Content-Type", "image/png"), HeaderField("Cache-Control", "max-age=1000")],
                requestTime: harness.clock.now, responseTime: harness.clock.now)
            let metadata = [UInt8](try JSONEncoder().encode(response))
            var bytes = Array("ILC1".utf8)
            withUnsafeBytes(of: UInt32(metadata.count).littleEndian) { bytes += $0 }
            withUnsafeBytes(of: UInt64(TestImages.png.count).littleEndian) { bytes += $0 }
            bytes += metadata + TestImages.png
            try FileManager.default.createDirectory(
                atPath: harness.directory + "/entries", withIntermediateDirectories: true)
            try Data(bytes).write(to: URL(fileURLWithPath: entryPath(harness, url)))

            // And a remembered failure as it was written then: bare JSON.
            let failure = Data(
                #"{"url":"\#(url.absoluteString)","status":500,"message":"old","attempts":9,"expires":1e10}"#.utf8)
            let failurePath = harness.directory + "/entries/" + DiskCache.hash(of: url.absoluteString) + ".failure"
            try failure.write(to: URL(fileURLWithPath: failurePath))

            let loader = try harness.loader { $0.maxAttemptsForErrors = 1 }
            #expect(try await loader.image(for: url).source == .networkToDisk)
            #expect(loader.statistics.corruptCacheEntries == 0)
            #expect(!FileManager.default.fileExists(atPath: failurePath))
            let rewritten = [UInt8](try Data(contentsOf: URL(fileURLWithPath: entryPath(harness, url))))
            #expect(rewritten.starts(with: Array("ILC2".utf8)))
            try await loader.shutdown()
        }
    }

    @Test(
        "a stored body that passes its checksums but no longer decodes is removed and fetched again once, never remembered as a failure",
        arguments: CachePath.allCases)
    func undecodableBody(_ path: CachePath) async throws {
        try await withOrigin { origin, harness in
            origin.serve("/u.png", .init(headers: [Self.png, ("Cache-Control", "max-age=1000")], body: TestImages.png))
            let url = origin.url("/u.png")
            // Stored through the cache itself (so its checksums hold), with a body that is
            // a PNG's signature and nothing more: not an image anyone can use.
            let cache = try DiskCache(directory: harness.directory, clock: { harness.clock.now })
            try cache.store(
                StoredResponse(
                    url: url.absoluteString, status: 200,
                    headers: [HeaderField("Content-Type", "image/png"), HeaderField("Cache-Control", "max-age=1000")],
                    requestTime: harness.clock.now, responseTime: harness.clock.now),
                body: path == .image ? Array(TestImages.png.prefix(40)) : Array("not an image at all".utf8))
            cache.flush()

            let loader = try harness.loader { $0.maxAttemptsForErrors = 1 }
            let loaded = try await path.fetch(loader, url)
            #expect(loaded.source == .networkToDisk && loaded.matches(TestImages.png))
            #expect(origin.count("/u.png") == 1)
            #expect(!loader.failedToFetch(url))
            #expect(loader.statistics.corruptCacheEntries == 1)
            try await loader.shutdown()
        }
    }

    @Test("an origin that keeps sending bytes that do not decode is asked once per load, not in a loop")
    func undecodableOrigin() async throws {
        try await withOrigin { origin, harness in
            origin.serve(
                "/bad.png",
                .init(headers: [Self.png, ("Cache-Control", "max-age=1000")], body: Array(TestImages.png.prefix(60))))
            let loader = try harness.loader()
            let url = origin.url("/bad.png")
            let error = await loader.loadError(url)
            guard case .decoding = error?.reason else {
                Issue.record("\(String(describing: error))")
                return
            }
            #expect(origin.count("/bad.png") == 1)
            try await loader.shutdown()
        }
    }

    @Test("verifyAll removes damaged entries and counts them; statistics keep the count across restarts")
    func verifyAll() throws {
        let harness = LoaderHarness()
        defer { Task { await harness.cleanUp() } }
        let cache = try DiskCache(directory: harness.directory, clock: { harness.clock.now })
        for name in ["a", "b", "c"] {
            try cache.store(
                StoredResponse(
                    url: "https://x/\(name)", status: 200, headers: [], requestTime: harness.clock.now,
                    responseTime: harness.clock.now), body: [UInt8](repeating: 7, count: 10_000))
        }
        try Damage.bodyBit.apply(
            to: harness.directory + "/entries/" + DiskCache.hash(of: "https://x/b") + ".response")
        let (checked, removed) = cache.verifyAll()
        #expect(checked == 3 && removed == 1)
        #expect(cache.statistics.entries == 2)
        let reopened = try DiskCache(directory: harness.directory, clock: { harness.clock.now })
        #expect(reopened.statistics.corruptEntriesRemoved == 1)
        #expect(reopened.response(for: "https://x/a")?.body.count == 10_000)
    }
}

/// Records what a logger is given, for tests that check warnings.
final class LogRecorder: Sendable {
    private let entries = Lock<[(Logger.Level, String)]>([])

    var logger: Logger {
        Logger(label: "test") { _ in Handler(recorder: self) }
    }

    func messages(at level: Logger.Level) -> [String] {
        entries.withLock { $0.filter { $0.0 == level }.map(\.1) }
    }

    fileprivate func record(_ level: Logger.Level, _ message: String) {
        entries.withLock { $0.append((level, message)) }
    }

    private struct Handler: LogHandler {
        let recorder: LogRecorder
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(
            level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String, file: String,
            function: String, line: UInt
        ) {
            recorder.record(level, "\(message)")
        }
    }
}
