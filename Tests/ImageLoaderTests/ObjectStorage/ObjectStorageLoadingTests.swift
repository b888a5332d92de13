import Foundation
import ImageLoader
import ImageLoaderSupport
import RasterImage
import TestSupport
import Testing

@testable import ObjectStorage

/// `s3://`, `gs://` and `abs://` URLs through the loader, against real stores
/// (scripts/storage-server.py: moto's S3 server checking signatures, fake-gcs-server,
/// an Azure Blob endpoint checking Shared Key with the SDK's code). Request counts come
/// from the store's own log.
@Suite("Object storage loading", .serialized)
struct ObjectStorageLoadingTests {
    static let kinds: [StorageServer.Kind] = [.s3, .gcs, .azure]

    static func scheme(_ kind: StorageServer.Kind) -> String {
        switch kind {
        case .s3: "s3"
        case .gcs: "gs"
        case .azure: "abs"
        }
    }

    /// The loader's settings for `server`; `wrongKey` signs with a key the store does not know.
    static func storage(_ server: StorageServer, wrongKey: Bool = false) -> ObjectStorageConfiguration {
        let endpoint = URL(string: server.endpoint)!
        var storage = ObjectStorageConfiguration()
        switch server.kind {
        case .s3:
            var s3 = S3Configuration(region: "us-east-1", endpoint: endpoint)
            s3.credentials = .fixed(
                AWSCredentials(
                    accessKeyID: server.settings["accessKeyID"]!,
                    secretAccessKey: wrongKey ? "not-the-secret" : server.settings["secretAccessKey"]!))
            storage.s3 = s3
        case .gcs:
            storage.gcs = GCSConfiguration(endpoint: endpoint)
        case .azure:
            let key = wrongKey ? Data(repeating: 7, count: 64).base64EncodedString() : server.settings["accountKey"]!
            storage.azureBlob = AzureBlobConfiguration(
                accountName: server.settings["accountName"]!, accountKey: key, endpoint: endpoint)
        }
        return storage
    }

    /// The path fragment of a read of the object's bytes in the store's log.
    static func readFragment(_ kind: StorageServer.Kind, _ key: String) -> String {
        switch kind {
        case .gcs:
            "/o/" + key.replacingOccurrences(of: "/", with: "%2F").replacingOccurrences(of: " ", with: "%20")
                + "?alt=media"
        default: "/photos/" + key.replacingOccurrences(of: " ", with: "%20")
        }
    }

    func withStore(
        _ kind: StorageServer.Kind, _ body: (StorageServer, LoaderHarness) async throws -> Void
    ) async throws {
        let server = try await StorageServer.start(kind)
        // The stores' Date fields are the real time: the loader's clock starts there.
        let harness = LoaderHarness(clock: ManualClock(Date()))
        do {
            try await body(server, harness)
        } catch {
            await harness.cleanUp()
            await server.stop()
            throw error
        }
        await harness.cleanUp()
        await server.stop()
    }

    @Test("An object is read once, stored on disk, and served from there; its pixels are the file's", arguments: kinds)
    func readAndCache(_ kind: StorageServer.Kind) async throws {
        try await withStore(kind) { server, harness in
            // Given an object whose key has a folder and a space
            try await server.put(
                "photos", "cats/tabby cat.png", TestImages.png, type: "image/png", cacheControl: "max-age=3600")
            let loader = try harness.loader {
                $0.dataLoader = try ObjectStorageDataLoader(Self.storage(server), wrapping: $0)
            }
            let url = URL(string: "\(Self.scheme(kind))://photos/cats/tabby%20cat.png")!
            // When it is loaded twice
            let first = try await loader.data(for: url)
            let second = try await loader.data(for: url)
            // Then the bytes are the object's, the second load came from disk, the store was read once
            #expect(first.bytes == TestImages.png)
            #expect(first.source == .networkToDisk)
            #expect(second.source == .disk)
            #expect(try await server.count("GET", Self.readFragment(kind, "cats/tabby cat.png")) == 1)
            // and the decoded image is the file's
            let image = try await loader.image(for: url).image
            let reference = try ImageDecoder().decode(.bytes(TestImages.png))
            #expect(image.width == reference.width && image.height == reference.height)
            #expect(image.pixels == reference.pixels)
            // No credential reached the cache's files.
            try await loader.shutdown()
            let secrets = [server.settings["secretAccessKey"], server.settings["accountKey"]].compactMap { $0 }
            let files = FileManager.default.subpaths(atPath: harness.directory) ?? []
            #expect(files.count >= 2)
            for name in files {
                let text = String(
                    decoding: (try? Data(contentsOf: URL(fileURLWithPath: harness.directory + "/" + name))) ?? Data(),
                    as: UTF8.self)
                for secret in secrets + ["AWS4-HMAC-SHA256", "SharedKey ", "Bearer "] {
                    #expect(!text.contains(secret), "\(name)")
                }
            }
        }
    }

    @Test("Revalidation costs no body: the store's 304 (S3, Azure) or its metadata (GCS)", arguments: kinds)
    func revalidation(_ kind: StorageServer.Kind) async throws {
        try await withStore(kind) { server, harness in
            try await server.put("photos", "a.png", TestImages.png, type: "image/png", cacheControl: "no-cache")
            let loader = try harness.loader {
                $0.dataLoader = try ObjectStorageDataLoader(Self.storage(server), wrapping: $0)
            }
            let url = URL(string: "\(Self.scheme(kind))://photos/a.png")!
            _ = try await loader.data(for: url)
            let again = try await loader.data(for: url)
            #expect(again.source == .networkNotModified)
            #expect(again.bytes == TestImages.png)
            let reads = try await server.requests().filter {
                $0.hasPrefix("GET ") && $0.contains(Self.readFragment(kind, "a.png"))
            }
            if kind == .gcs {
                // One read of the bytes, one of the metadata.
                #expect(reads.count == 1)
                #expect(try await server.count("GET", "/o/a.png") == 2)
            } else {
                #expect(reads.count == 2)
                #expect(reads.last?.hasSuffix(" 304") == true, "\(reads)")
            }
            // A changed object is read again.
            try await server.put("photos", "a.png", TestImages.jpeg, type: "image/jpeg", cacheControl: "no-cache")
            #expect(try await loader.data(for: url).bytes == TestImages.jpeg)
        }
    }

    @Test("A missing object is a 404; a wrong key is the store's 403; both typed", arguments: kinds)
    func missingAndForbidden(_ kind: StorageServer.Kind) async throws {
        try await withStore(kind) { server, harness in
            try await server.put("photos", "a.png", TestImages.png, type: "image/png")
            let loader = try harness.loader {
                $0.dataLoader = try ObjectStorageDataLoader(Self.storage(server), wrapping: $0)
            }
            await #expect(throws: ImageLoadingError(.httpStatus(404), url: "\(Self.scheme(kind))://photos/missing.png"))
            {
                try await loader.data(for: URL(string: "\(Self.scheme(kind))://photos/missing.png")!)
            }
            // A URL naming no key is a 404 without asking the store.
            let before = try await server.requests().count
            await #expect(throws: ImageLoadingError(.httpStatus(404), url: "\(Self.scheme(kind))://photos/")) {
                try await loader.data(for: URL(string: "\(Self.scheme(kind))://photos/")!)
            }
            // A key that climbs out of its bucket is a 404 without asking the store, however written.
            for path in ["photos/../secrets/a.png", "photos/a/%2E%2E/%2e%2e/secrets/a.png", "photos/./a.png"] {
                await #expect(throws: ImageLoadingError(.httpStatus(404), url: "\(Self.scheme(kind))://\(path)")) {
                    try await loader.data(for: URL(string: "\(Self.scheme(kind))://\(path)")!)
                }
            }
            #expect(try await server.requests().count == before)
            guard kind != .gcs else { return }  // the emulator checks no credentials
            let wrong = try harness.loader {
                $0.dataLoader = try ObjectStorageDataLoader(Self.storage(server, wrongKey: true), wrapping: $0)
                $0.cacheDirectory = nil
            }
            await #expect(throws: ImageLoadingError(.httpStatus(403), url: "\(Self.scheme(kind))://photos/a.png")) {
                try await wrong.data(for: URL(string: "\(Self.scheme(kind))://photos/a.png")!)
            }
        }
    }

    @Test("Many loads of one object at once: one read", arguments: kinds)
    func oneRead(_ kind: StorageServer.Kind) async throws {
        try await withStore(kind) { server, harness in
            try await server.put("photos", "many.jpg", TestImages.jpeg, type: "image/jpeg")
            let loader = try harness.loader {
                $0.dataLoader = try ObjectStorageDataLoader(Self.storage(server), wrapping: $0)
            }
            let url = URL(string: "\(Self.scheme(kind))://photos/many.jpg")!
            // The store holds the read until every load has joined it.
            try await server.setHolding(true)
            let loads = Task {
                try await withThrowingTaskGroup(of: [UInt8].self) { group in
                    for _ in 0..<24 { group.addTask { try await loader.data(for: url).bytes } }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
            }
            try await waitUntil("one read held and 23 loads joined") {
                server.heldReads == 1 && loader.statistics.coalesced == 23
            }
            try await server.setHolding(false)
            let results = try await loads.value
            #expect(results.count == 24 && results.allSatisfy { $0 == TestImages.jpeg })
            #expect(try await server.count("GET", Self.readFragment(kind, "many.jpg")) == 1)
        }
    }

    @Test("A store that is down: the stored copy is served within stale-if-error", arguments: kinds)
    func staleIfError(_ kind: StorageServer.Kind) async throws {
        try await withStore(kind) { server, harness in
            try await server.put(
                "photos", "a.png", TestImages.png, type: "image/png", cacheControl: "max-age=60, stale-if-error=86400")
            let loader = try harness.loader {
                $0.dataLoader = try ObjectStorageDataLoader(Self.storage(server), wrapping: $0)
            }
            let url = URL(string: "\(Self.scheme(kind))://photos/a.png")!
            _ = try await loader.data(for: url)
            harness.clock.advance(by: 120)
            try await server.setDown(true)
            let stale = try await loader.data(for: url)
            #expect(stale.bytes == TestImages.png)
            #expect(stale.freshness == .staleIfError)
            #expect(try await server.requests().last?.hasSuffix(" 503") == true)
        }
    }

    @Test("Versions: S3's versionId and GCS's generation read that version", arguments: [StorageServer.Kind.s3, .gcs])
    func versions(_ kind: StorageServer.Kind) async throws {
        try await withStore(kind) { server, harness in
            let first = try #require(try await server.put("photos", "v.png", TestImages.png, type: "image/png"))
            try await server.put("photos", "v.png", TestImages.jpeg, type: "image/jpeg")
            let loader = try harness.loader {
                $0.dataLoader = try ObjectStorageDataLoader(Self.storage(server), wrapping: $0)
            }
            let name = kind == .s3 ? "versionId" : "generation"
            let old = URL(string: "\(Self.scheme(kind))://photos/v.png?\(name)=\(first)")!
            #expect(try await loader.data(for: old).bytes == TestImages.png)
            #expect(
                try await loader.data(for: URL(string: "\(Self.scheme(kind))://photos/v.png")!).bytes == TestImages.jpeg
            )
            // imgproxy's form: the bare version as the query.
            let bare = URL(string: "\(Self.scheme(kind))://photos/v.png?\(first)")!
            #expect(try await loader.data(for: bare).bytes == TestImages.png)
        }
    }

    @Test("A store not configured: its URLs are unsupported, and nothing is asked")
    func notConfigured() async throws {
        let harness = LoaderHarness()
        let loader = try harness.loader()
        await #expect(throws: ImageLoadingError(.unsupportedURL, url: "s3://photos/a.png")) {
            try await loader.data(for: URL(string: "s3://photos/a.png")!)
        }
        await harness.cleanUp()
    }

    @Test("The seam: the stores take their schemes, no address filter governs them, and every other URL goes on")
    func seam() async throws {
        var configuration = ImageLoader.Configuration()
        configuration.http.addressFilter = { $0 == "203.0.113.7" }
        let stores = try ObjectStorageDataLoader(
            ObjectStorageConfiguration(s3: S3Configuration(region: "us-east-1"), gcs: GCSConfiguration()),
            wrapping: configuration)
        #expect(stores.schemes == ["s3", "gs"])
        for (text, loads) in [
            ("s3://photos/a.png", true), ("GS://photos/a.png", true), ("abs://photos/a.png", false),
            ("https://example.com/a.png", true), ("ftp://example.com/a.png", false),
        ] {
            #expect(stores.canLoad(URL(string: text)!) == loads, "\(text)")
        }
        // An object's endpoint is configuration: no filter. An origin's: the wrapped loader's.
        #expect(stores.addressFilter(for: URL(string: "s3://photos/a.png")!) == nil)
        let filter = try #require(stores.addressFilter(for: URL(string: "https://example.com/a.png")!))
        #expect(filter("203.0.113.7") && !filter("127.0.0.1"))
        // Shut down, it refuses a write in the background with `.shutDown` (not silently).
        try await stores.shutdown()
        let refused = Lock<(any Error)?>(nil)
        await confirmation { done in
            stores.storeObjectInBackground(at: URL(string: "s3://photos/b.png")!, bytes: [1], contentType: "x") {
                error in
                refused.withLock { $0 = error }
                done()
            }
        }
        #expect((refused.withLock { $0 } as? ImageLoadingError)?.reason == .shutDown)
    }
}
