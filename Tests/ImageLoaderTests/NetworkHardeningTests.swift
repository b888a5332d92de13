import AsyncHTTPClient
import Foundation
import ImageLoaderSupport
import RasterImage
import Synchronization
import TestSupport
import Testing

@testable import ImageLoader

/// What strangers' URLs and origins cannot do: reach another product's entry, carry
/// credentials to another origin, or connect past the address filter.
@Suite("Keys, redirects and addresses")
struct NetworkHardeningTests {
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
        // A hang, not a busy machine: with the suite's other tests on both cores, one of
        // its awaits waited over a minute for the cooperative pool (73 s, both cores busy).
        .timeLimit(.minutes(3)))
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
}
