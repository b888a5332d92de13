import AsyncHTTPClient
import Foundation
import ImageLoaderSupport
import RasterImage
import Synchronization
import TestSupport
import Testing

@testable import ImageLoader

/// The disk cache against damaged, foreign and shared folders and a full or read-only disk.
@Suite("The disk cache under damage and faults")
struct DiskCacheHardeningTests {
    @Test("a corrupted entry whose lengths add up past Int.max is a miss, and is replaced")
    func corruptedEntryLengths() throws {
        let directory = NSTemporaryDirectory() + "imageloader-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache = try DiskCache(directory: directory)
        let url = "https://example.com/a.png"
        let path = directory + "/entries/" + DiskCache.hash(of: url) + ".response"
        for lengths in [(UInt32.max, UInt64(Int.max)), (UInt32(2), UInt64.max), (UInt32(20), UInt64(Int.max - 10))] {
            var bytes = Array("ILC2".utf8)
            withUnsafeBytes(of: lengths.0.littleEndian) { bytes += $0 }
            withUnsafeBytes(of: lengths.1.littleEndian) { bytes += $0 }
            bytes += [UInt8](repeating: 0, count: 8)  // the two checksums
            bytes += Array("{}".utf8)
            _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
            #expect(cache.response(for: url) == nil)
            #expect(!FileManager.default.fileExists(atPath: path))
        }
        for garbage in [[UInt8](), [UInt8](repeating: 0, count: 4096), [UInt8](repeating: 0xFF, count: 100)] {
            _ = FileManager.default.createFile(atPath: path, contents: Data(garbage))
            #expect(cache.response(for: url) == nil)
        }
        let stored = StoredResponse(url: url, status: 200, headers: [], requestTime: Date(), responseTime: Date())
        try cache.store(stored, body: [1, 2, 3])
        #expect(cache.response(for: url)?.body == [1, 2, 3])
        // A damaged index is ignored: the entries are found again from the folder.
        _ = FileManager.default.createFile(atPath: directory + "/index.json", contents: Data("{\"x\": [".utf8))
        #expect(try DiskCache(directory: directory).response(for: url)?.body == [1, 2, 3])
    }

    @Test("an entry that is a link, a device or larger than the cache is a miss, never read")
    func oddEntryFiles() throws {
        let directory = NSTemporaryDirectory() + "imageloader-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache = try DiskCache(directory: directory, maxBytes: 1 << 20)
        let url = "https://example.com/a.png"
        let path = directory + "/entries/" + DiskCache.hash(of: url) + ".response"
        // /dev/zero never ends: read whole, it would exhaust memory.
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: "/dev/zero")
        #expect(cache.response(for: url) == nil)
        try? FileManager.default.removeItem(atPath: path)
        // A sparse file of 4 GiB: far more than the cache may hold.
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.truncate(atOffset: 4 << 30)
        try handle.close()
        #expect(cache.response(for: url) == nil)
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test("entries and their folders are readable by this user only")
    func permissions() throws {
        let directory = NSTemporaryDirectory() + "imageloader-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache = try DiskCache(directory: directory)
        let url = "https://example.com/a.png"
        try cache.store(
            StoredResponse(url: url, status: 200, headers: [], requestTime: Date(), responseTime: Date()), body: [1])
        cache.flush()
        for path in [directory + "/entries/" + DiskCache.hash(of: url) + ".response", directory + "/index.json"] {
            let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
            #expect(mode == 0o600, "\(path)")
        }
        for path in [directory, directory + "/entries", directory + "/tmp"] {
            let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
            #expect(mode == 0o700, "\(path)")
        }
    }

    @Test("two processes sharing a folder keep maxBytes between them, oldest entries first")
    func sharedFolder() throws {
        let directory = NSTemporaryDirectory() + "imageloader-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // Two caches on one folder stand for two processes: neither sees the other's index.
        let clock = ManualClock()
        let a = try DiskCache(directory: directory, maxBytes: 100_000, clock: { clock.now })
        let b = try DiskCache(directory: directory, maxBytes: 100_000, clock: { clock.now })
        let body = [UInt8](repeating: 7, count: 9_000)
        func store(_ cache: DiskCache, _ n: Int) throws {
            clock.advance(by: 1)
            try cache.store(
                StoredResponse(
                    url: "https://example.com/\(n)", status: 200, headers: [], requestTime: clock.now,
                    responseTime: clock.now),
                body: body)
        }
        for n in 0..<40 {
            try store(n % 2 == 0 ? a : b, n)
            let files = try FileManager.default.contentsOfDirectory(atPath: directory + "/entries")
            let bytes = try files.reduce(0) {
                $0
                    + (try FileManager.default.attributesOfItem(atPath: directory + "/entries/" + $1)[.size] as? Int
                        ?? 0)
            }
            #expect(bytes <= 100_000 + 9_500, "after \(n + 1) stores: \(bytes) bytes on disk")
        }
        // The newest entries of both are still there; the oldest went first.
        #expect(a.response(for: "https://example.com/39") != nil)
        #expect(b.response(for: "https://example.com/38") != nil)
        #expect(a.response(for: "https://example.com/0") == nil)
    }

    @Test("a full or read-only disk is a typed error, and the loader goes on from memory and network")
    func diskFaults() async throws {
        try await withOrigin { origin, harness in
            origin.serve(
                "/a.png",
                .init(
                    headers: [("Content-Type", "image/png"), ("Cache-Control", "max-age=3600")], body: TestImages.png))
            let faulty = FaultyFolder()
            let cache = try DiskCache(directory: harness.directory, folder: faulty)
            for code in [ENOSPC, EROFS] {
                faulty.writeFault.withLock { $0 = { _ in code } }
                #expect(throws: DiskCacheError.self) {
                    try cache.store(
                        StoredResponse(url: "x", status: 200, headers: [], requestTime: Date(), responseTime: Date()),
                        body: [1])
                }
            }
            let full = FaultyFolder()
            let loader = try harness.loader(folder: full)
            full.writeFault.withLock { $0 = { _ in ENOSPC } }
            let first = try await loader.image(for: origin.url("/a.png"))
            #expect(first.source == .network)
            let second = try await loader.image(for: origin.url("/a.png"))
            #expect(second.source == .memory)
            #expect(origin.count("/a.png") == 1)
            // Once the disk has room again, the next download is stored.
            full.writeFault.withLock { $0 = nil }
            let third = try await loader.image(for: origin.url("/a.png"), options: LoadOptions(cachePolicy: .reload))
            #expect(third.source == .networkToDisk)
        }
    }

    @Test("the remembered-failure table forgets the oldest failures past its capacity")
    func failureTableBounded() {
        let failures = RecentFailures(capacity: 100)
        for n in 0..<1000 {
            failures.record(ImageLoadingError(.httpStatus(404), url: "u\(n)"), for: "u\(n)")
            #expect(failures.count <= 100)
        }
        #expect(failures.failure(for: "u999") != nil)
        #expect(failures.failure(for: "u0") == nil)
    }
}
