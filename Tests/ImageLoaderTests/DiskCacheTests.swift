import Foundation
import ImageLoaderSupport
import RasterImage
import TestSupport
import Testing

@testable import ImageLoader

@Suite("The disk cache")
struct DiskCacheTests {
    func response(_ url: String, clock: ManualClock, headers: [HeaderField] = []) -> StoredResponse {
        StoredResponse(url: url, status: 200, headers: headers, requestTime: clock.now, responseTime: clock.now)
    }

    @Test("entry files are named by the hex SHA-256 of the key (FIPS 180-2 test vectors)")
    func fileNames() {
        // Names must not change between versions, or every cache would be lost on upgrade.
        #expect(DiskCache.hash(of: "abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(DiskCache.hash(of: "") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test("readers see whole entries only, however many writers replace them")
    func atomicReplacement() async throws {
        let harness = LoaderHarness()
        defer { Task { await harness.cleanUp() } }
        let cache = try DiskCache(directory: harness.directory, clock: { harness.clock.now })
        let bodies = (0..<4).map { n in [UInt8](repeating: UInt8(n), count: 200_000 + n * 1000) }
        let url = "https://example.com/contended.png"
        let clock = harness.clock
        let seen = await withTaskGroup(of: [Int].self) { group in
            for writer in 0..<4 {
                group.addTask {
                    for _ in 0..<25 { try? cache.store(self.response(url, clock: clock), body: bodies[writer]) }
                    return []
                }
            }
            for _ in 0..<4 {
                group.addTask {
                    var lengths: [Int] = []
                    for _ in 0..<100 {
                        if let (_, body) = cache.response(for: url) { lengths.append(body.count) }
                    }
                    return lengths
                }
            }
            var all: [Int] = []
            for await lengths in group { all += lengths }
            return all
        }
        #expect(!seen.isEmpty)
        // Every body read is one that was written, complete.
        #expect(seen.allSatisfy { length in bodies.contains { $0.count == length } })
    }

    @Test("a file cut short, or garbage, is a miss and is removed")
    func tornFiles() throws {
        let harness = LoaderHarness()
        defer { Task { await harness.cleanUp() } }
        let cache = try DiskCache(directory: harness.directory, clock: { harness.clock.now })
        let url = "https://example.com/torn.png"
        try cache.store(response(url, clock: harness.clock), body: TestImages.png)
        let file = harness.directory + "/entries/" + DiskCache.hash(of: url) + ".response"
        let bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        try bytes.prefix(bytes.count - 10).write(to: URL(fileURLWithPath: file))
        #expect(cache.response(for: url) == nil)
        #expect(!FileManager.default.fileExists(atPath: file))
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: file))
        #expect(cache.response(for: url) == nil)
    }

    @Test("least recently used entries are evicted past the limit, and the order survives a restart")
    func eviction() throws {
        let harness = LoaderHarness()
        defer { Task { await harness.cleanUp() } }
        let clock = harness.clock
        let body = [UInt8](repeating: 7, count: 10_000)
        var cache = try DiskCache(directory: harness.directory, maxBytes: 35_000, clock: { clock.now })
        for name in ["a", "b", "c"] {
            try cache.store(response("https://x/\(name)", clock: clock), body: body)
            clock.advance(by: 1)
        }
        _ = cache.response(for: "https://x/a")  // a is now the most recently used
        cache.flush()
        cache = try DiskCache(directory: harness.directory, maxBytes: 35_000, clock: { clock.now })
        clock.advance(by: 1)
        try cache.store(response("https://x/d", clock: clock), body: body)
        // Over 35,000 bytes: b, then c, are the least recently used.
        #expect(cache.response(for: "https://x/b") == nil)
        #expect(cache.response(for: "https://x/a") != nil)
        #expect(cache.response(for: "https://x/d") != nil)
        #expect(cache.statistics.bytes <= 35_000)
    }

    @Test("the index is written for entries written or removed, not for each hit; hits go with the next write")
    func indexWrites() throws {
        let harness = LoaderHarness()
        defer { Task { await harness.cleanUp() } }
        let clock = harness.clock
        let index = harness.directory + "/index.json"
        func saved() throws -> [String: DiskCache.IndexEntry] {
            try JSONDecoder().decode(
                [String: DiskCache.IndexEntry].self, from: Data(contentsOf: URL(fileURLWithPath: index)))
        }
        let cache = try DiskCache(directory: harness.directory, clock: { clock.now })
        for n in 0..<64 { try cache.store(response("https://x/\(n)", clock: clock), body: [UInt8(n)]) }
        // The 64th entry written writes the index.
        #expect(try saved().count == 64)
        let written = try Data(contentsOf: URL(fileURLWithPath: index))
        clock.advance(by: 5)
        for _ in 0..<3 { for n in 0..<64 { #expect(cache.response(for: "https://x/\(n)") != nil) } }
        // 192 hits within 10 seconds of the last write: the file is as it was.
        #expect(try Data(contentsOf: URL(fileURLWithPath: index)) == written)
        // A flush with nothing changed writes nothing; with hits to record, it writes their times.
        cache.flush()
        let hit = DiskCache.hash(of: "https://x/0")
        #expect(try saved()[hit]?.lastAccess == clock.now.timeIntervalSince1970)
        try FileManager.default.removeItem(atPath: index)
        cache.flush()
        #expect(!FileManager.default.fileExists(atPath: index))
        // A hit alone writes the index once the last write is over 10 seconds old.
        clock.advance(by: 11)
        #expect(cache.response(for: "https://x/1") != nil)
        #expect(try saved()[DiskCache.hash(of: "https://x/1")]?.lastAccess == clock.now.timeIntervalSince1970)
    }

    enum RescanMoment: String, CaseIterable, Sendable {
        /// After the folder was listed.
        case afterListing
        /// Also while an entry missing from the listing is looked at again, after the
        /// missing ones were counted and before the index is replaced.
        case beforeMerge
    }

    @Test("an entry written while the folder is read again stays in the index", arguments: RescanMoment.allCases)
    func writeDuringRescan(moment: RescanMoment) throws {
        let harness = LoaderHarness()
        defer { Task { await harness.cleanUp() } }
        let clock = harness.clock
        let folder = FaultyFolder()
        // A rescan after every 62,500 bytes written (a sixteenth of the limit).
        let cache = try DiskCache(
            directory: harness.directory, maxBytes: 1_000_000, clock: { clock.now }, folder: folder)
        let during = response("https://x/during", clock: clock)
        folder.afterListing.withLock { $0 = { try? cache.store(during, body: [1, 2, 3]) } }
        let later = response("https://x/later", clock: clock)
        if moment == .beforeMerge {
            folder.onUnlistedStatus.withLock { $0 = { try? cache.store(later, body: [4, 5]) } }
        }
        try cache.store(response("https://x/big", clock: clock), body: [UInt8](repeating: 7, count: 70_000))
        // The rescan ran, and the writes happened in it.
        #expect(folder.afterListing.withLock { $0 == nil })
        #expect(folder.onUnlistedStatus.withLock { $0 == nil })
        #expect(cache.statistics.entries == (moment == .beforeMerge ? 3 : 2))
        #expect(cache.response(for: "https://x/during")?.body == [1, 2, 3])
        if moment == .beforeMerge { #expect(cache.response(for: "https://x/later")?.body == [4, 5]) }
        // An entry removed behind the cache's back is not kept by the same rule.
        try FileManager.default.removeItem(
            atPath: harness.directory + "/entries/" + DiskCache.hash(of: "https://x/during") + ".response")
        try cache.store(response("https://x/big2", clock: clock), body: [UInt8](repeating: 8, count: 70_000))
        #expect(cache.statistics.entries == (moment == .beforeMerge ? 3 : 2))
        #expect(cache.response(for: "https://x/during") == nil)
    }

    @Test("clean-up by modification or creation date, one URL, or everything")
    func cleanUp() throws {
        let harness = LoaderHarness()
        defer { Task { await harness.cleanUp() } }
        let clock = harness.clock
        let cache = try DiskCache(directory: harness.directory, clock: { clock.now })
        try cache.store(response("https://x/old", clock: clock), body: [1])
        try cache.store(response("https://x/updated", clock: clock), body: [2])
        clock.advance(by: 2 * DiskCache.oneDay)
        try cache.update(response("https://x/updated", clock: clock))  // modified now, created two days ago
        try cache.store(response("https://x/new", clock: clock), body: [3])
        clock.advance(by: 3600)

        #expect(cache.removeEntries(olderThan: DiskCache.oneDay, by: .modified) == 1)
        #expect(cache.response(for: "https://x/old") == nil)
        #expect(cache.response(for: "https://x/updated") != nil)
        #expect(cache.removeEntries(olderThan: DiskCache.oneDay, by: .created) == 1)
        #expect(cache.response(for: "https://x/updated") == nil)
        #expect(cache.response(for: "https://x/new") != nil)

        cache.remove(url: "https://x/new")
        #expect(cache.statistics.entries == 0)
        try cache.store(response("https://x/again", clock: clock), body: [4])
        cache.removeAll()
        #expect(
            cache.statistics
                == DiskCache.Statistics(
                    entries: 0, failures: 0, bytes: 0, maxBytes: cache.maxBytes, corruptEntriesRemoved: 0))
        #expect((try FileManager.default.contentsOfDirectory(atPath: harness.directory + "/entries")).isEmpty)
    }

    @Test("entries written while the index was not saved are found on the next start")
    func reconcilesIndex() throws {
        let harness = LoaderHarness()
        defer { Task { await harness.cleanUp() } }
        let cache = try DiskCache(directory: harness.directory, clock: { harness.clock.now })
        try cache.store(response("https://x/unsaved", clock: harness.clock), body: [9, 9])
        // No flush: as after kill -9.
        let reopened = try DiskCache(directory: harness.directory, clock: { harness.clock.now })
        #expect(reopened.statistics.entries == 1)
        #expect(reopened.response(for: "https://x/unsaved")?.body == [9, 9])
    }

    @Test("the default folder follows XDG_CACHE_HOME, else ~/.cache")
    func defaultDirectory() {
        let saved = ProcessInfo.processInfo.environment["XDG_CACHE_HOME"]
        defer {
            if let saved { setenv("XDG_CACHE_HOME", saved, 1) } else { unsetenv("XDG_CACHE_HOME") }
        }
        setenv("XDG_CACHE_HOME", "/srv/cache", 1)
        #expect(DiskCache.defaultDirectory() == "/srv/cache/imageloader")
        unsetenv("XDG_CACHE_HOME")
        #expect(
            DiskCache.defaultDirectory() == (ProcessInfo.processInfo.environment["HOME"] ?? "") + "/.cache/imageloader")
    }

    @Test("a loader whose disk entry was damaged fetches the image again")
    func damagedEntryRefetched() async throws {
        try await withOrigin { origin, harness in
            origin.serve(
                "/d.png",
                .init(
                    headers: [("Content-Type", "image/png"), ("Cache-Control", "max-age=1000")], body: TestImages.png))
            let loader = try harness.loader()
            _ = try await loader.image(for: origin.url("/d.png"))
            try await loader.shutdown()
            let file =
                harness.directory + "/entries/" + DiskCache.hash(of: origin.url("/d.png").absoluteString) + ".response"
            let bytes = try Data(contentsOf: URL(fileURLWithPath: file))
            try bytes.prefix(bytes.count / 2).write(to: URL(fileURLWithPath: file))
            let restarted = try harness.loader()
            #expect(try await restarted.image(for: origin.url("/d.png")).source == .networkToDisk)
            #expect(origin.count("/d.png") == 2)
            try await restarted.shutdown()
        }
    }
}
