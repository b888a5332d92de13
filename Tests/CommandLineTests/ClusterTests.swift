import Foundation
import RasterImage
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// scripts/serve-cluster.sh: nginx with deploy/nginx/imageloader.conf in front of two
/// `imageloader serve` processes. nginx answers repeats from its cache, keeps WebP and
/// JPEG apart without splitting on the raw Accept, sends one request upstream for a
/// stampede, fails over when an instance dies, and revalidates with a 304.
@Suite("nginx in front of two instances", .serialized)
struct ClusterTests {
    struct Cluster {
        let directory: URL
        let port: Int
        let instancePorts: [Int]
        let images: URL

        func get(_ path: String, accept: String? = nil) async throws -> ServedProcess.Answer {
            try await ServedProcess.request(port: port, path, headers: accept.map { [("Accept", $0)] } ?? [])
        }

        /// Requests the instances have answered so far (every status, both together),
        /// from their own /metrics (whose own requests are counted after they answer).
        func upstreamRequests() async throws -> Int {
            var total = 0.0
            for instance in instancePorts {
                let text = try await ServedProcess.request(port: instance, "/metrics").text
                for line in text.split(separator: "\n") where line.hasPrefix("imageservice_requests_total{") {
                    total += Double(line.split(separator: " ").last ?? "") ?? 0
                }
            }
            return Int(total)
        }

        /// The image requests one instance has answered so far.
        func answered(by instance: Int) async throws -> Int {
            let text = try await ServedProcess.request(port: instance, "/metrics").text
            return text.split(separator: "\n").filter { $0.hasPrefix("imageservice_requests_total{") }
                .reduce(0) { $0 + Int(Double($1.split(separator: " ").last ?? "") ?? 0) }
        }

        func pid(_ instance: Int) throws -> Int32 {
            let text = try String(
                contentsOf: directory.appendingPathComponent("instance-\(instance).pid"), encoding: .utf8)
            return Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))!
        }
    }

    /// Ports nobody listens on now, from the kernel (held until all are chosen).
    static func freePorts(_ count: Int) throws -> [Int] {
        let held = try (0..<count).map { _ in try RefusingPort() }
        defer { for port in held { port.close() } }
        return held.map(\.port)
    }

    /// A cluster whose instances send results with `max-age` of `ttl` seconds.
    func withCluster(ttl: Int, _ body: (Cluster) async throws -> Void) async throws {
        try await Command.withTemporaryDirectory { directory in
            let images = directory.appendingPathComponent("images")
            try FileManager.default.createDirectory(at: images, withIntermediateDirectories: true)
            for name in ["jpeg-800x600.jpg", "png-photo.png"] {
                try FileManager.default.copyItem(
                    atPath: Command.fixture("images/" + name), toPath: images.appendingPathComponent(name).path)
            }
            let ports = try Self.freePorts(3)
            let state = directory.appendingPathComponent("cluster")
            let script = Command.repository.appendingPathComponent("scripts/serve-cluster.sh").path
            let environment = [
                "CLUSTER_PORT": String(ports[0]), "INSTANCE_PORTS": "\(ports[1]) \(ports[2])",
                "IMAGELOADER": Command.executable.path,
                "SERVE_ARGS":
                    "--allow-unsigned --local-root \(images.path) --ttl \(ttl) --auto-webp --auto-avif --auto-jxl",
            ]
            let bash = URL(fileURLWithPath: "/bin/bash")
            let started = try await Command.run([script, "start", state.path], program: bash, environment: environment)
            defer {
                _ = try? Command.runBlocking([script, "stop", state.path], program: bash, environment: environment)
            }
            #expect(started.status == 0, "\(started.stderr)")
            guard started.status == 0 else { return }
            try await body(
                Cluster(directory: state, port: ports[0], instancePorts: [ports[1], ports[2]], images: images))
        }
    }

    @Test(
        "repeats come from nginx; each Accept class (JPEG XL, AVIF, WebP, none) is cached apart; one request upstream for a stampede"
    )
    func caching() async throws {
        try await withCluster(ttl: 600) { cluster in
            let path = "/insecure/rs:fit:200:200/plain/local:///jpeg-800x600.jpg"
            // AVIF and JPEG XL classes: their own entries, each hit by other spellings.
            let avif = try await cluster.get(path, accept: "image/avif,image/webp,*/*")
            #expect(avif.status == 200 && avif.header("Content-Type") == "image/avif")
            #expect(avif.header("X-Cache-Status") == "MISS" && avif.header("Vary") == "Accept")
            let jxl = try await cluster.get(path, accept: "image/webp,image/avif,image/jxl,*/*;q=0.5")
            #expect(jxl.header("Content-Type") == "image/jxl" && jxl.header("X-Cache-Status") == "MISS")
            for (accept, body) in [("IMAGE/AVIF, image/webp", avif.body), ("image/jxl", jxl.body)] {
                let again = try await cluster.get(path, accept: accept)
                #expect(again.header("X-Cache-Status") == "HIT" && again.body == body, "\(accept)")
            }
            let first = try await cluster.get(path, accept: "image/webp,*/*")
            #expect(first.status == 200 && first.header("Content-Type") == "image/webp")
            #expect(first.header("X-Cache-Status") == "MISS" && first.header("Vary") == "Accept")
            let before = try await cluster.upstreamRequests()

            // Other spellings of "takes WebP" hit the same entry; no instance is asked.
            for accept in ["image/webp", "image/webp,image/apng,*/*;q=0.8", "IMAGE/WEBP, text/html"] {
                let again = try await cluster.get(path, accept: accept)
                #expect(again.header("X-Cache-Status") == "HIT", "\(accept)")
                #expect(again.body == first.body)
            }
            // (The count read above was itself a request to each instance: two more.)
            #expect(try await cluster.upstreamRequests() == before + 2)

            // Without WebP: its own entry, JPEG, then hits for any other Accept without WebP.
            let jpeg = try await cluster.get(path, accept: "text/html,*/*")
            #expect(jpeg.header("Content-Type") == "image/jpeg" && jpeg.header("X-Cache-Status") == "MISS")
            for accept in [nil, "*/*", "image/png,image/*"] {
                let again = try await cluster.get(path, accept: accept)
                #expect(again.header("X-Cache-Status") == "HIT" && again.header("Content-Type") == "image/jpeg")
            }
            let afterJPEG = try await cluster.upstreamRequests()
            #expect(afterJPEG == before + 4 + 1)

            // Twenty clients at once on a new URL: the instances see one request.
            let stampede = "/insecure/rs:fill:120:120/plain/local:///png-photo.png"
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<20 { group.addTask { try await cluster.get(stampede).status } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.allSatisfy { $0 == 200 }, "statuses: \(statuses.sorted())")
            #expect(try await cluster.upstreamRequests() == afterJPEG + 2 + 1)
        }
    }

    @Test("an instance killed mid-run loses no request; an expired entry is revalidated with a 304")
    func failoverAndRevalidation() async throws {
        // A ttl longer than the slowest thumbnail on a busy machine (a debug build's
        // PNG decode took 2 s under load), so the response still has freshness left.
        try await withCluster(ttl: 8) { cluster in
            let answers = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<20 {
                    group.addTask {
                        // Distinct URLs: each one goes upstream.
                        try await cluster.get("/insecure/w:\(100 + index)/plain/local:///jpeg-800x600.jpg").status
                    }
                }
                group.addTask {
                    // Mid-run: once the first instance has answered two of its share (about
                    // ten), with the rest of it on its way; however slow the machine.
                    try await waitUntil("the first instance answering") {
                        try await cluster.answered(by: cluster.instancePorts[0]) >= 2
                    }
                    kill(try cluster.pid(cluster.instancePorts[0]), SIGKILL)
                    return 200
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.count == 21 && answers.allSatisfy { $0 == 200 }, "\(answers)")

            // The entry expires when the instance said (max-age: --ttl); then nginx asks
            // again with its validators and the surviving instance answers 304 from its
            // result cache or the file's identity.
            let path = "/insecure/w:77/plain/local:///png-photo.png"
            let first = try await cluster.get(path)
            let maxAge =
                first.header("Cache-Control")?.split(separator: ",").first?.split(separator: "=").last.flatMap {
                    Int($0)
                } ?? 0
            #expect(first.status == 200 && maxAge > 0, "\(first.status) \(first.header("Cache-Control") ?? "")")
            // (A real expiry in another process: no clock of the test's to move.)
            try await Task.sleep(for: .seconds(maxAge + 1))
            let later = try await cluster.get(path)
            #expect(
                later.status == 200 && later.header("X-Cache-Status") == "REVALIDATED",
                "\(later.status) \(later.header("X-Cache-Status") ?? "no X-Cache-Status")")
            #expect(later.body == first.body)
            // The instance writes its access-log line after the answer has gone (nginx may
            // have answered the test first): wait for the line.
            let logFile = cluster.directory.appendingPathComponent("logs/instance-\(cluster.instancePorts[1]).log")
            try await waitUntil("the instance logged its 304") {
                let log = (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
                return log.split(separator: "\n").contains { $0.contains("GET \(path) 304") }
            }
        }
    }
}
