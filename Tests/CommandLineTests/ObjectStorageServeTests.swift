import Foundation
import RasterImage
import TestSupport
import Testing

/// `imageloader serve` with sources in object storage and results shared through a
/// bucket, configured as imgproxy is (its `IMGPROXY_USE_S3`, `..._GCS_...`, `..._ABS_...`
/// variables; AWS's standard credential variables), against real stores
/// (scripts/storage-server.py). Counts come from the store's own log and the
/// service's /metrics.
@Suite("Object storage through serve", .serialized)
struct ObjectStorageServeTests {
    static let png = Array(try! Data(contentsOf: URL(fileURLWithPath: Command.fixture("images/png-rgba8.png"))))
    static let jpeg = Array(try! Data(contentsOf: URL(fileURLWithPath: Command.fixture("images/jpeg-420.jpg"))))

    static func scheme(_ kind: StorageServer.Kind) -> String {
        switch kind {
        case .s3: "s3"
        case .gcs: "gs"
        case .azure: "abs"
        }
    }

    /// imgproxy's variables for `server`'s store (the S3 key pair as AWS's standard variables).
    static func environment(_ server: StorageServer, wrongKey: Bool = false) -> [String: String] {
        switch server.kind {
        case .s3:
            return [
                "IMGPROXY_USE_S3": "true", "IMGPROXY_S3_ENDPOINT": server.endpoint, "IMGPROXY_S3_REGION": "us-east-1",
                "AWS_ACCESS_KEY_ID": server.settings["accessKeyID"]!,
                "AWS_SECRET_ACCESS_KEY": wrongKey ? "not-the-secret" : server.settings["secretAccessKey"]!,
                "AWS_EC2_METADATA_DISABLED": "true",
            ]
        case .gcs:
            return ["IMGPROXY_USE_GCS": "true", "IMGPROXY_GCS_ENDPOINT": server.endpoint + "/storage/v1/"]
        case .azure:
            return [
                "IMGPROXY_USE_ABS": "true", "IMGPROXY_ABS_NAME": server.settings["accountName"]!,
                "IMGPROXY_ABS_KEY": wrongKey
                    ? Data(repeating: 7, count: 64).base64EncodedString() : server.settings["accountKey"]!,
                "IMGPROXY_ABS_ENDPOINT": server.endpoint,
            ]
        }
    }

    static func readFragment(_ kind: StorageServer.Kind, _ key: String) -> String {
        switch kind {
        case .gcs: "/o/" + key.replacingOccurrences(of: "/", with: "%2F") + "?alt=media"
        default: "/photos/" + key
        }
    }

    func withStore(
        _ kind: StorageServer.Kind, _ body: (StorageServer, String) async throws -> Void
    ) async throws {
        let server = try await StorageServer.start(kind)
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("imageloader-os-" + UUID().uuidString)
            .path
        do {
            try await body(server, cache)
        } catch {
            await server.stop()
            try? FileManager.default.removeItem(atPath: cache)
            throw error
        }
        await server.stop()
        try? FileManager.default.removeItem(atPath: cache)
    }

    func serve(
        _ server: StorageServer, cache: String, wrongKey: Bool = false, arguments: [String] = [],
        _ body: (ServedProcess) async throws -> Void
    ) async throws {
        let served = try await ServedProcess.start(
            ["--allow-unsigned", "--cache-dir", cache, "--log-level", "debug"] + arguments,
            environment: Self.environment(server, wrongKey: wrongKey))
        defer { served.kill() }
        try await body(served)
    }

    @Test(
        "Each scheme: a thumbnail of an object, its pixels right; a missing object 404; a store's 304 or metadata revalidates",
        arguments: [StorageServer.Kind.s3, .gcs, .azure])
    func happyPath(_ kind: StorageServer.Kind) async throws {
        try await withStore(kind) { store, cache in
            try await store.put("photos", "cats/a.png", Self.png, type: "image/png", cacheControl: "no-cache")
            try await serve(store, cache: cache) { served in
                let scheme = Self.scheme(kind)
                // Given an object, when a thumbnail of it is asked for
                let answer = try await served.get("/insecure/rs:fit:32:32/plain/\(scheme)://photos/cats/a.png@png")
                // Then it is the source's pixels, made smaller
                #expect(answer.status == 200, "\(answer.text)")
                let image = try ImageDecoder().decode(.bytes(answer.body))
                let source = try ImageDecoder().decode(.bytes(Self.png))
                #expect(max(image.width, image.height) == 32)
                #expect(
                    abs(Double(image.width) / Double(image.height) - Double(source.width) / Double(source.height)) < 0.1
                )
                // A missing object is imgproxy's 404.
                #expect(try await served.get("/insecure/rs:fit:32:32/plain/\(scheme)://photos/none.png").status == 404)
                // Another size of the same object: the stored copy is revalidated without its bytes.
                let again = try await served.get("/insecure/rs:fit:16:16/plain/\(scheme)://photos/cats/a.png@png")
                #expect(again.status == 200)
                let logged = try await store.requests()
                let reads = logged.filter {
                    $0.hasPrefix("GET ") && $0.contains(Self.readFragment(kind, "cats/a.png"))
                }
                if kind == .gcs {
                    #expect(reads.count == 1, "\(logged)")
                } else {
                    #expect(reads.count == 2 && reads.last?.hasSuffix(" 304") == true, "\(logged)")
                }
            }
        }
    }

    @Test(
        "A wrong key: 403 from the service, the store's reason in the log, never in the body",
        arguments: [StorageServer.Kind.s3, .azure])
    func wrongCredentials(_ kind: StorageServer.Kind) async throws {
        try await withStore(kind) { store, cache in
            try await store.put("photos", "a.png", Self.png, type: "image/png")
            try await serve(store, cache: cache, wrongKey: true) { served in
                let answer = try await served.get("/insecure/rs:fit:32:32/plain/\(Self.scheme(kind))://photos/a.png")
                #expect(answer.status == 403)
                let reason = kind == .s3 ? "SignatureDoesNotMatch" : "AuthenticationFailed"
                #expect(!answer.text.contains(reason))
                try await waitFor("the store's reason in the log") { served.printed.contains(reason) }
                // No credential is ever printed, however verbose the log.
                let secret = Self.environment(store, wrongKey: true)[
                    kind == .s3 ? "AWS_SECRET_ACCESS_KEY" : "IMGPROXY_ABS_KEY"]!
                #expect(!served.printed.contains(secret))
                #expect(!served.printed.contains("Signature=") && !served.printed.contains("SharedKey "))
            }
        }
    }

    @Test(
        "Six requests for one object at once: one read from the store",
        arguments: [StorageServer.Kind.s3, .gcs, .azure])
    func oneRead(_ kind: StorageServer.Kind) async throws {
        try await withStore(kind) { store, cache in
            try await store.put("photos", "many.jpg", Self.jpeg, type: "image/jpeg", cacheControl: "max-age=3600")
            // Six fetch at once (the service fetches while its workers are busy); the tests'
            // HTTP client keeps eight connections to a host, two left for /metrics.
            try await serve(store, cache: cache, arguments: ["--workers", "1", "--fetches-ahead", "5"]) { served in
                // The store holds the read until every request has joined it.
                try await store.setHolding(true)
                let requests = Task {
                    try await withThrowingTaskGroup(of: Int.self) { group in
                        for size in 0..<6 {
                            group.addTask {
                                try await served.get(
                                    "/insecure/rs:fit:\(20 + size):\(20 + size)/plain/\(Self.scheme(kind))://photos/many.jpg"
                                ).status
                            }
                        }
                        return try await group.reduce(into: []) { $0.append($1) }
                    }
                }
                try await waitFor("one read held and 5 requests joined it") {
                    let joined = (try? await served.metric("imageloader_coalesced_total")) ?? 0
                    return store.heldReads == 1 && joined == 5
                }
                try await store.setHolding(false)
                let statuses = try await requests.value
                #expect(statuses == Array(repeating: 200, count: 6))
                #expect(try await store.count("GET", Self.readFragment(kind, "many.jpg")) == 1)
            }
        }
    }

    @Test("S3 versions, and a store that is down: the stored copy served within stale-if-error")
    func versionsAndDown() async throws {
        try await withStore(.s3) { store, cache in
            let first = try #require(
                try await store.put(
                    "photos", "v.png", Self.png, type: "image/png", cacheControl: "max-age=0, stale-if-error=86400"))
            try await store.put(
                "photos", "v.png", Self.jpeg, type: "image/jpeg", cacheControl: "max-age=0, stale-if-error=86400")
            try await serve(store, cache: cache) { served in
                let old = try await served.get(
                    "/insecure/rs:fit:8:8/plain/s3://photos/v.png%3FversionId%3D\(first)@png")
                #expect(old.status == 200)
                let current = try await served.get("/insecure/rs:fit:8:8/plain/s3://photos/v.png@png")
                #expect(current.status == 200)
                // The two versions differ (an RGBA PNG and a JPEG): so do their thumbnails' source tags.
                #expect(old.header("ETag") != nil && old.header("ETag") != current.header("ETag"))
                // When the store is down (the stored copies are stale at once: max-age=0)
                try await store.setDown(true)
                let stale = try await served.get("/insecure/rs:fit:9:9/plain/s3://photos/v.png@png")
                #expect(stale.status == 200)
                #expect(try await store.requests().last?.hasSuffix(" 503") == true)
            }
        }
    }

    @Test("A store not enabled: 404 naming the option")
    func notEnabled() async throws {
        let served = try await ServedProcess.start(["--allow-unsigned", "--disk-cache-mb", "0"])
        defer { served.kill() }
        let answer = try await served.get("/insecure/rs:fit:8:8/plain/s3://photos/a.png")
        #expect(answer.status == 404)
        #expect(answer.text.contains("--use-s3"))
        // imgproxy's bucket lists, and a bad entry stops the start as a usage error.
        let listed = try await ServedProcess.start(
            ["--allow-unsigned", "--disk-cache-mb", "0"],
            environment: [
                "IMGPROXY_USE_S3": "true", "IMGPROXY_S3_ENDPOINT": "http://127.0.0.1:9", "AWS_ACCESS_KEY_ID": "a",
                "AWS_SECRET_ACCESS_KEY": "b", "IMGPROXY_S3_ALLOWED_BUCKETS": "photos, avatars",
            ])
        defer { listed.kill() }
        let refused = try await listed.get("/insecure/rs:fit:8:8/plain/s3://secrets/a.png")
        #expect(refused.status == 404 && refused.text.contains("not allowed"))
        let usage = try await Command.run(["serve", "--denied-bucket", "photos"])
        #expect(usage.status == 64)
    }

    @Test(
        "Two instances share results through a bucket: the second decodes nothing and answers as the first",
        arguments: [StorageServer.Kind.s3, .gcs, .azure])
    func sharedResults(_ kind: StorageServer.Kind) async throws {
        try await withStore(kind) { store, cache in
            try await store.put("photos", "a.png", Self.png, type: "image/png", cacheControl: "max-age=3600")
            // The results bucket exists (S3 and GCS buckets are made by the first write of the provider's API).
            try await store.put("results", "keep", [0], type: "application/octet-stream")
            let arguments = ["--result-storage", "\(Self.scheme(kind))://results/thumbs"]
            try await serve(store, cache: cache + "-a", arguments: arguments) { first in
                try await serve(store, cache: cache + "-b", arguments: arguments) { second in
                    let path = "/insecure/rs:fill:24:24/plain/\(Self.scheme(kind))://photos/a.png@webp"
                    let made = try await first.get(path)
                    #expect(made.status == 200)
                    // The first instance counts its write when the store has answered it.
                    try await waitFor("the result written to the bucket") {
                        let written =
                            (try? await first.metric(#"imageservice_result_storage_total{outcome="write"}"#)) ?? 0
                        return written == 1
                    }
                    // and the store logged it: a PUT under the prefix (S3, Azure), a multipart upload (GCS).
                    #expect(
                        try await store.requests().contains {
                            ($0.hasPrefix("PUT /results/thumbs/") || $0.contains("/b/results/o?uploadType=multipart"))
                                && ($0.hasSuffix(" 200") || $0.hasSuffix(" 201"))
                        })
                    let shared = try await second.get(path)
                    #expect(shared.status == 200)
                    #expect(shared.body == made.body)
                    for field in ["Content-Type", "ETag", "Last-Modified", "Cache-Control", "Content-Disposition"] {
                        #expect(shared.header(field) == made.header(field), "\(field)")
                    }
                    #expect(try await first.metric("imageservice_processing_seconds_count") == 1)
                    #expect(try await second.metric("imageservice_processing_seconds_count") == 0)
                    #expect(try await second.metric(#"imageservice_result_storage_total{outcome="hit"}"#) == 1)
                    // The second never read the source.
                    #expect(try await store.count("GET", Self.readFragment(kind, "a.png")) == 1)
                }
            }
        }
    }

    @Test("A result bucket that fails: the service processes and answers; the failure is logged")
    func storageFailureDegrades() async throws {
        try await withStore(.s3) { store, cache in
            try await store.put("photos", "a.png", Self.png, type: "image/png")
            try await serve(store, cache: cache, arguments: ["--result-storage", "s3://no-such-bucket/x"]) { served in
                let answer = try await served.get("/insecure/rs:fit:8:8/plain/s3://photos/a.png@png")
                #expect(answer.status == 200)
                try await waitFor("the failed write counted") {
                    (try? await served.metric(#"imageservice_result_storage_total{outcome="write_failure"}"#)) == 1
                }
            }
        }
    }

    /// Waits until `condition` holds (polling every 20 ms, two minutes at most).
    func waitFor(_ what: String, _ condition: () async -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(120)
        while await !condition() {
            guard ContinuousClock.now < deadline else {
                Issue.record("waited 120 s for \(what)")
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}
