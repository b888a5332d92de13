import AsyncHTTPClient
import Foundation
import ImageLoaderSupport
import RasterImage
import Synchronization
import TestSupport
import Testing

@testable import ImageLoader

/// The audit's findings on the loader's side: dates, keys, redirects, the failure
/// table and the disk cache under faults.
@Suite("Hardening")
struct HardeningTests {
    @Test("HTTP dates with absurd years, fields or signs are no dates, never a trap")
    func httpDates() {
        for text in [
            "Sun, 06 Nov 999999999999 08:49:37 GMT", "Sun, 06 Nov 99999999999999999999999 08:49:37 GMT",
            "Sun, 99999999999999999999 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 99999999999999999999:49:37 GMT", "Sun Nov  6 08:49:37 99999999999999",
            "Sun, 06 Nov 1969 08:49:37 GMT", "Sun, +6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 10000 00:00:00 GMT",
            "Sun, 06 Nov 1994 08:49:37:00 GMT", "Sun, 06 Nov 1994 008:49:37 GMT",
        ] {
            #expect(HTTPDate.parse(text) == nil, "\(text)")
        }
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == Date(timeIntervalSince1970: 784_111_777))
        #expect(HTTPDate.parse("Fri, 31 Dec 9999 23:59:59 GMT") == Date(timeIntervalSince1970: 253_402_300_799))
        // Formatting never traps either, whatever the date.
        #expect(HTTPDate.format(Date(timeIntervalSince1970: 1e15)) == "Fri, 31 Dec 9999 23:59:59 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: .infinity)) == "Fri, 31 Dec 9999 23:59:59 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: -1e300)) == "Thu, 01 Jan 1970 00:00:00 GMT")
    }

    @Test("an Expires with an absurd year is an expired response; Age must be delta-seconds")
    func freshnessFromBadHeaders() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        func response(_ headers: [HeaderField]) -> StoredResponse {
            StoredResponse(url: "u", status: 200, headers: headers, requestTime: now, responseTime: now)
        }
        let policy = HTTPCachePolicy()
        #expect(
            policy.freshnessLifetime(response([HeaderField("Expires", "Sun, 06 Nov 999999999999 08:49:37 GMT")])) == 0)
        let infinite = response([HeaderField("Age", "inf"), HeaderField("Cache-Control", "max-age=60")])
        #expect(policy.evaluate(infinite, now: now).isFresh)
        let huge = response([HeaderField("Age", "99999999999999999999999"), HeaderField("Cache-Control", "max-age=60")])
        #expect(!policy.evaluate(huge, now: now).isFresh)
        #expect(policy.evaluate(huge, now: now).age == TimeInterval(CacheControl.maxDeltaSeconds))
    }

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
            FileManager.default.createFile(atPath: path, contents: Data(bytes))
            #expect(cache.response(for: url) == nil)
            #expect(!FileManager.default.fileExists(atPath: path))
        }
        for garbage in [[UInt8](), [UInt8](repeating: 0, count: 4096), [UInt8](repeating: 0xFF, count: 100)] {
            FileManager.default.createFile(atPath: path, contents: Data(garbage))
            #expect(cache.response(for: url) == nil)
        }
        let stored = StoredResponse(url: url, status: 200, headers: [], requestTime: Date(), responseTime: Date())
        try cache.store(stored, body: [1, 2, 3])
        #expect(cache.response(for: url)?.body == [1, 2, 3])
        // A damaged index is ignored: the entries are found again from the folder.
        FileManager.default.createFile(atPath: directory + "/index.json", contents: Data("{\"x\": [".utf8))
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
        FileManager.default.createFile(atPath: path, contents: nil)
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
            let cache = try DiskCache(directory: harness.directory)
            for code in [ENOSPC, EROFS] {
                cache.writeFault.withLock { $0 = { _ in code } }
                #expect(throws: DiskCacheError.self) {
                    try cache.store(
                        StoredResponse(url: "x", status: 200, headers: [], requestTime: Date(), responseTime: Date()),
                        body: [1])
                }
            }
            let loader = try harness.loader()
            let cached = try #require(loader.diskCache)
            cached.writeFault.withLock { $0 = { _ in ENOSPC } }
            let first = try await loader.image(for: origin.url("/a.png"))
            #expect(first.source == .network)
            let second = try await loader.image(for: origin.url("/a.png"))
            #expect(second.source == .memory)
            #expect(origin.count("/a.png") == 1)
            // Once the disk has room again, the next download is stored.
            cached.writeFault.withLock { $0 = nil }
            let third = try await loader.image(for: origin.url("/a.png"), options: LoadOptions(cachePolicy: .reload))
            #expect(third.source == .networkToDisk)
        }
    }

    @Test("a URL's fragment is not part of its key: U#... cannot reach another product's entry")
    func fragments() async throws {
        try await withOrigin { origin, harness in
            origin.serve(
                "/a.png",
                .init(
                    headers: [("Content-Type", "image/png"), ("Cache-Control", "max-age=3600")], body: TestImages.png))
            let loader = try harness.loader()
            let options = ThumbnailOptions(maxPixelSize: 4)
            let trick = URL(string: origin.url("/a.png").absoluteString + "#thumbnail(" + options.storageName + ")")!
            let original = try await loader.image(for: trick)
            #expect(original.image.width == 16 || original.image.width > 4)
            let thumbnail = try await loader.thumbnail(for: origin.url("/a.png"), options: options)
            #expect(max(thumbnail.image.width, thumbnail.image.height) == 4)
            // The fragment named the same resource: one download for both spellings.
            _ = try await loader.image(for: origin.url("/a.png"))
            #expect(origin.count("/a.png") == 2)  // the original, then the thumbnail's own load
            #expect(loader.peek(trick) != nil)
        }
    }

    @Test("credential header fields go to the first origin only; others follow the redirect")
    func credentialHeadersOnRedirect() async throws {
        try await withOrigin { origin, harness in
            origin.serve("/image.png", .init(headers: [("Content-Type", "image/png")], body: TestImages.png))
            origin.serve("/same", .init(status: 302, headers: [("Location", "/image.png")]))
            origin.serve(
                "/cross",
                .init(status: 302, headers: [("Location", origin.url("/image.png", host: "localhost").absoluteString)]))
            let loader = try harness.loader {
                $0.requestHeaders = [
                    HeaderField("Authorization", "Bearer secret"), HeaderField("Cookie", "session=1"),
                    HeaderField("X-Trace", "t1"),
                ]
                $0.cacheDirectory = nil
            }
            _ = try await loader.image(for: origin.url("/same"))
            let same = try #require(origin.requests("/image.png").last)
            #expect(same.header("Authorization") == "Bearer secret")
            #expect(same.header("Cookie") == "session=1")
            _ = try await loader.image(for: origin.url("/cross"))
            let cross = try #require(origin.requests("/image.png").last)
            #expect(origin.requests("/image.png").count == 2)
            #expect(cross.header("Authorization") == nil)
            #expect(cross.header("Cookie") == nil)
            #expect(cross.header("X-Trace") == "t1")
        }
    }

    @Test("an address filter is checked on every hop, on the address connected to, with a typed error")
    func addressFilter() async throws {
        try await withOrigin { origin, harness in
            origin.serve("/image.png", .init(headers: [("Content-Type", "image/png")], body: TestImages.png))
            // 127.0.0.2 is loopback as well, but not the one address allowed.
            origin.serve(
                "/away",
                .init(status: 302, headers: [("Location", origin.url("/image.png", host: "127.0.0.2").absoluteString)]))
            origin.serve(
                "/named",
                .init(status: 302, headers: [("Location", origin.url("/image.png", host: "localhost").absoluteString)]))
            let seen = Lock([String]())
            let loader = try harness.loader {
                $0.cacheDirectory = nil
                $0.http.addressFilter = { address in
                    seen.withLock { $0.append(address) }
                    return address == "127.0.0.1"
                }
            }
            _ = try await loader.image(for: origin.url("/image.png"))
            #expect(origin.count("/image.png") == 1)
            do {
                _ = try await loader.image(for: origin.url("/away"))
                Issue.record("the redirect to 127.0.0.2 was followed")
            } catch let error as ImageLoadingError {
                guard case .forbiddenAddress(let host, let addresses) = error.reason else {
                    Issue.record("\(error)")
                    return
                }
                #expect(host == "127.0.0.2" && addresses == ["127.0.0.2"])
            }
            #expect(origin.count("/away") == 1 && origin.count("/image.png") == 1)
            // A name is resolved by the loader itself and connected through the address it allowed.
            _ = try await loader.image(for: origin.url("/named"))
            #expect(origin.count("/image.png") == 2)
            #expect(seen.withLock { $0 }.contains("127.0.0.1"))
        }
    }

    @Test(
        "a disk entry is used under an address filter only when it came from addresses the filter allows now"
    )
    func storedEntriesAndTheFilter() async throws {
        try await withOrigin { origin, harness in
            origin.serve(
                "/cached.png",
                .init(headers: [("Content-Type", "image/png"), ("Cache-Control", "max-age=600")], body: TestImages.png))
            let url = origin.url("/cached.png")
            // Given an entry stored by a loader without a filter (a process whose policy was looser),
            let open = try harness.loader()
            #expect(try await open.image(for: url).source == .networkToDisk)
            try await open.shutdown()
            // when a loader on the same folder refuses loopback, it does not serve the stored
            // bytes: it asks again, through its filter, and is refused.
            let strict = try harness.loader { $0.http.addressFilter = { _ in false } }
            let refused = await strict.loadError(url)
            guard case .forbiddenAddress = refused?.reason else {
                Issue.record("\(String(describing: refused))")
                return
            }
            #expect(origin.count("/cached.png") == 1)
            try await strict.shutdown()
            // A loader whose filter allows the address asks once (the entry's addresses
            // were unknown), records them, and from then on answers from disk.
            let allowing = try harness.loader { $0.http.addressFilter = { $0 == "127.0.0.1" } }
            #expect(try await allowing.image(for: url).source == .networkToDisk)
            #expect(origin.count("/cached.png") == 2)
            try await allowing.shutdown()
            let restarted = try harness.loader { $0.http.addressFilter = { $0 == "127.0.0.1" } }
            #expect(try await restarted.image(for: url).source == .disk)
            #expect(origin.count("/cached.png") == 2)
            #expect(harness.storedResponse(url)?.connectedAddresses == ["127.0.0.1"])
            try await restarted.shutdown()
            // And a stricter filter on the entry it recorded refuses it again.
            let stricter = try harness.loader { $0.http.addressFilter = { $0 == "10.0.0.1" } }
            guard case .forbiddenAddress = await stricter.loadError(url)?.reason else {
                Issue.record("a stored entry from 127.0.0.1 was served under a filter refusing it")
                return
            }
            #expect(origin.count("/cached.png") == 2)
        }
    }

    @Test(
        "with an address filter, host names are resolved on the loader's own threads, not NIO's shared pool",
        .timeLimit(.minutes(1)))
    func resolvesOnOwnThreads() async throws {
        try await withOrigin { origin, harness in
            origin.serve("/image.png", .init(headers: [("Content-Type", "image/png")], body: TestImages.png))
            let loader = try harness.loader {
                $0.cacheDirectory = nil
                $0.http.timeout = .seconds(40)  // within the time limit
                $0.http.addressFilter = { $0 == "127.0.0.1" }
            }
            // Given every thread of the shared pool held, as lookups stuck on a silent
            // name server would hold them; when a URL naming a host is loaded
            let loaded = try await BusySharedPool.whileBusy {
                try await loader.image(for: origin.url("/image.png", host: "localhost"))
            }
            // Then the name was resolved and the image fetched (a timeout otherwise)
            let expected = try ImageDecoder().decode(.bytes(TestImages.png))
            #expect(loaded.image.pixels == expected.pixels && loaded.image.width == expected.width)
            #expect(origin.count("/image.png") == 1)
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

/// Shutting the loader's parts down when one of them cannot be.
@Suite("Shutdown of pinned clients")
struct PinnedClientShutdownTests {
    struct StepFailed: Error, Equatable { let step: Int }

    @Test("runEvery runs every step after a failure and rethrows the first error")
    func everyStepRuns() async throws {
        // Given four steps, the second and the fourth failing
        let ran = Mutex<[Int]>([])
        let steps: [() async throws -> Void] = (0..<4).map { index in
            {
                ran.withLock { $0.append(index) }
                if index % 2 == 1 { throw StepFailed(step: index) }
            }
        }
        // When they run, then the first failure is reported and every step ran, in order
        await #expect(throws: StepFailed(step: 1)) { try await runEvery(steps) }
        #expect(ran.withLock { $0 } == [0, 1, 2, 3])
        // And steps that all succeed throw nothing
        try await runEvery([{}, {}])
    }

    @Test("every pinned client and the resolver are shut down even when the first client's shutdown throws")
    func shutdownContinuesPastAFailure() async throws {
        // Given pinned clients, the oldest of them already shut down (its shutdown throws)
        let pinned = PinnedClients(HTTPDataLoader.Configuration())
        let clients = (0..<4).map { pinned.client(host: "host\($0).test", address: "127.0.0.1") }
        try await clients[0].shutdown()
        // When they are all shut down, then the error is reported
        await #expect(throws: HTTPClientError.alreadyShutdown) { try await pinned.shutdown() }
        // and every other client was shut down too (a second shutdown throws), and the resolver
        for client in clients.dropFirst() {
            await #expect(throws: HTTPClientError.alreadyShutdown) { try await client.shutdown() }
        }
        await #expect(throws: (any Error).self) { try await pinned.resolver.run { 1 } }
    }
}
