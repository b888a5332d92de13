import AsyncHTTPClient
import Foundation
import ImageService
import NIOHTTP1
import RasterImage
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

extension ServeCommandTests {
    /// What a container deployment needs: settings from variables alone, the probe
    /// command, HEAD on every route, a drain before the listener closes, a bounded
    /// graceful stop, structured logs, and imgproxy's queue.
    @Suite("imageloader serve: variables, probes, stopping and logs")
    struct Deployment: ServeTesting {
        static let jpegURL = "/insecure/rs:fit:50:50/plain/local:///jpeg-800x600.jpg@png"

        @Test("every option is a variable: IMAGELOADER_* alone configures serve, and wins over IMGPROXY_*")
        func optionsAsVariables() async throws {
            // No option but the port: unsigned URLs, the folder and the TTL from variables.
            let server = try await ServedProcess.start(
                [],
                environment: [
                    "IMAGELOADER_ALLOW_UNSIGNED": "true", "IMAGELOADER_LOCAL_ROOT": Self.images,
                    "IMGPROXY_TTL": "100", "IMAGELOADER_TTL": "200", "IMAGELOADER_NO_AUTO_WEBP": "",
                ])
            defer { server.kill() }
            let answer = try await server.get(Self.jpegURL)
            #expect(answer.status == 200, "\(answer.text)")
            #expect(answer.header("Cache-Control")?.contains("max-age=200") == true, "\(answer.headers)")
            // The option on the command line wins over both.
            let optioned = try await ServedProcess.start(
                ["--ttl", "300"],
                environment: [
                    "IMAGELOADER_ALLOW_UNSIGNED": "1", "IMGPROXY_LOCAL_FILESYSTEM_ROOT": Self.images,
                    "IMGPROXY_TTL": "100", "IMAGELOADER_TTL": "200",
                ])
            defer { optioned.kill() }
            #expect(try await optioned.get(Self.jpegURL).header("Cache-Control")?.contains("max-age=300") == true)
            // imgproxy's namespace for the metrics' names.
            let namespaced = try await ServedProcess.start(
                ["--allow-unsigned"], environment: ["IMGPROXY_PROMETHEUS_NAMESPACE": "imgproxy"])
            defer { namespaced.kill() }
            #expect(try await namespaced.metric("imgproxy_imageservice_workers") >= 1)
            #expect(try await namespaced.metric("imageservice_workers") == 0)

            // A value the option would not take stops the start, naming the variable.
            let refused = try await Command.run(
                ["serve", "--port", "0"], environment: ["IMAGELOADER_ALLOW_UNSIGNED": "maybe"])
            #expect(refused.status != 0 && refused.stderr.contains("IMAGELOADER_ALLOW_UNSIGNED"), "\(refused.stderr)")
        }

        @Test("the settings table in ServiceReference.md is serve's own, and names every IMGPROXY_* variable read")
        func settingsTable() async throws {
            let generated = try await Command.run(["serve", "--settings-table"])
            #expect(generated.status == 0)
            let reference = try String(
                contentsOf: Command.repository.appendingPathComponent(
                    "Sources/ImageService/ImageService.docc/ServiceReference.md"), encoding: .utf8)
            let start = "<!-- settings table: written by scripts/settings-table.sh from serve's options -->\n"
            let section = reference.components(separatedBy: start).last?.components(
                separatedBy: "<!-- end of the settings table -->"
            ).first
            #expect(section == generated.stdout, "run scripts/settings-table.sh")
            // Each option has a row, with its IMAGELOADER_ variable.
            let help = try await Command.run(["serve", "--help"]).stdout
            for option in help.matches(of: /\n  --([a-z0-9-]+)/).map({ String($0.output.1) })
            where !["help", "version"].contains(option) && !option.hasPrefix("no-") {
                let variable = "IMAGELOADER_" + option.uppercased().replacing("-", with: "_")
                #expect(generated.stdout.contains("`--\(option)`") && generated.stdout.contains(variable), "\(option)")
            }
            // Every IMGPROXY_ name the command's code reads is documented in the section.
            let settingsSection = reference.components(separatedBy: "## Settings: options and variables").last ?? ""
            let sources = Command.repository.appendingPathComponent("Sources/ImageLoaderCLI")
            for file in try FileManager.default.contentsOfDirectory(atPath: sources.path) where file.hasSuffix(".swift")
            {
                let text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
                for name in text.matches(of: /"(IMGPROXY_[A-Z0-9_]*[A-Z0-9])"/).map({ String($0.output.1) }) {
                    #expect(settingsSection.contains(name), "\(file) reads \(name), which the settings do not name")
                }
            }
            // The container image and the manifests set only variables serve reads.
            for file in ["deploy/container/Containerfile", "deploy/kubernetes/deployment.yaml"] {
                let text = try String(contentsOf: Command.repository.appendingPathComponent(file), encoding: .utf8)
                for name in text.matches(of: /(IM(?:GPROXY|AGELOADER)_[A-Z0-9_]*[A-Z0-9])/).map({ String($0.output.1) })
                {
                    #expect(settingsSection.contains(name), "\(file) sets \(name), which serve does not read")
                }
            }
        }

        @Test("an IMGPROXY_* variable that is not read is named in one warning; one that is read is not")
        func unsupportedVariables() async throws {
            let server = try await ServedProcess.start(
                ["--allow-unsigned"],
                environment: ["IMGPROXY_SENTRY_DSN": "https://x", "IMGPROXY_TTL": "60", "IMGPROXY_NOT_A_SETTING": "1"])
            defer { server.kill() }
            let warnings = server.printed.split(separator: "\n").filter { $0.contains("does not read") }
            #expect(warnings.count == 1, "\(server.printed)")
            #expect(warnings.first?.contains("IMGPROXY_NOT_A_SETTING, IMGPROXY_SENTRY_DSN") == true)
            #expect(warnings.first?.contains("IMGPROXY_TTL") == false)
        }

        @Test("HEAD of every route answers as GET does, without the body")
        func headEverywhere() async throws {
            try await serving(["--allow-unsigned", "--local-root", Self.images]) { server in
                for path in [
                    "/health", "/metrics", Self.jpegURL, "/info/insecure/plain/local:///jpeg-800x600.jpg",
                    "/favicon.ico", "/insecure/plain/local:///missing.jpg",
                ] {
                    let get = try await server.get(path)
                    let head = try await ServedProcess.request(port: server.port, path, method: .HEAD)
                    #expect(head.status == get.status, "\(path)")
                    #expect(head.body.isEmpty, "\(path)")
                    #expect(head.header("Content-Type") == get.header("Content-Type"), "\(path)")
                    // (The metrics' text grows between the two requests.)
                    if path != "/metrics" {
                        #expect(head.header("Content-Length") == String(get.body.count), "\(path): \(head.headers)")
                    }
                }
            }
        }

        @Test("SIGTERM: /health is 503 and `health` fails while images are still served; a second signal stops; exit 0")
        func drain() async throws {
            let server = try await ServedProcess.start([
                "--allow-unsigned", "--local-root", Self.images, "--drain-delay", "600",
            ])
            defer { server.kill() }
            let healthy = try await Command.run(["health", "--port", String(server.port), "--host", "127.0.0.1"])
            #expect(healthy.status == 0, "\(healthy.stderr)")
            kill(server.process.processIdentifier, SIGTERM)
            try await waitUntil("/health answers 503") { try await server.get("/health").status == 503 }
            #expect(try await server.get(Self.jpegURL).status == 200)
            let draining = try await Command.run(["health", "--port", String(server.port)])
            #expect(draining.status == 1 && draining.stderr.contains("503"), "\(draining.stderr)")
            // The second signal skips the rest of the ten minutes.
            kill(server.process.processIdentifier, SIGTERM)
            #expect(await server.exitStatus() == 0, "\(server.printed)")
            let gone = try await Command.run(["health", "--port", String(server.port), "--wait", "1"])
            #expect(gone.status == 1)
        }

        @Test("a request still in flight past --graceful-stop-timeout is cancelled, and the process exits 0")
        func gracefulStopTimeout() async throws {
            let origin = try await TestOrigin.start()
            defer { Task { await origin.stop() } }
            let never = Gate()
            origin.serve(
                "/held.jpg", .init(headers: [Self.jpeg], body: TestAssets.bytes("jpeg-800x600.jpg"), gate: never))
            let server = try await ServedProcess.start([
                "--allow-unsigned", "--allow-private-networks", "--graceful-stop-timeout", "1",
                "--download-timeout", "600",
            ])
            defer { server.kill() }
            let inFlight = Task {
                try? await server.get("/insecure/w:50/plain/" + origin.url("/held.jpg").absoluteString)
            }
            try await waitUntil("the request reached the origin") { origin.count("/held.jpg") == 1 }
            kill(server.process.processIdentifier, SIGTERM)
            #expect(await server.exitStatus() == 0, "\(server.printed)")
            #expect(await inFlight.value?.status != 200)
            never.open()
        }

        @Test(
            "IMGPROXY_LOG_FORMAT=json: every line is a JSON object; access lines carry numbers, the cache and the cause"
        )
        func jsonLogs() async throws {
            let server = try await ServedProcess.start(
                ["--allow-unsigned", "--local-root", Self.images, "--allow-private-networks"],
                environment: ["IMGPROXY_LOG_FORMAT": "json"])
            defer { server.kill() }
            #expect(try await server.get(Self.jpegURL).status == 200)
            #expect(try await server.get(Self.jpegURL).status == 200)
            // Nothing listens on port 1: a 502 whose cause the line gives.
            #expect(try await server.get("/insecure/plain/http://127.0.0.1:1/x.jpg").status == 502)
            var access: [[String: Any]] = []
            try await waitUntil("three access lines") {
                access = try server.printed.split(separator: "\n").map { line in
                    let object = try JSONSerialization.jsonObject(with: Data(line.utf8))
                    return try #require(object as? [String: Any], "\(line)")
                }.filter { $0["method"] as? String == "GET" }
                return access.count == 3
            }
            #expect(access.allSatisfy { $0["status"] is Int && $0["bytes"] is Int && $0["ms"] is Double })
            #expect(access.map { $0["status"] as? Int } == [200, 200, 502])
            #expect(access.map { $0["cache"] as? String } == ["local", "result", nil])
            #expect((access[2]["error"] as? String)?.isEmpty == false, "\(access[2])")
            #expect(access.allSatisfy { $0["level"] as? String == "info" && $0["time"] is String })
        }

        @Test("imgproxy's queue: 20 requests for one new image with one worker all wait their turn, none is a 429")
        func unlimitedQueue() async throws {
            let origin = try await TestOrigin.start()
            defer { Task { await origin.stop() } }
            let held = Gate()
            origin.serve(
                "/new.jpg",
                .init(
                    headers: [Self.jpeg, ("Cache-Control", "max-age=60")],
                    body: TestAssets.bytes("jpeg-800x600.jpg"), gate: held))
            try await serving(["--allow-unsigned", "--allow-private-networks", "--workers", "1"]) { server in
                let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                    for index in 0..<20 {
                        group.addTask {
                            try await server.get(
                                "/insecure/w:\(40 + index)/plain/" + origin.url("/new.jpg").absoluteString
                            ).status
                        }
                    }
                    try await waitUntil("one download at the origin") { origin.count("/new.jpg") == 1 }
                    held.open()
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                #expect(statuses.count == 20 && statuses.allSatisfy { $0 == 200 }, "\(statuses)")
                #expect(origin.count("/new.jpg") == 1)
            }
        }

        @Test("after a burst, resident memory falls back towards its idle level once the service is idle")
        func memoryReturned() async throws {
            try await Command.withTemporaryDirectory { folder in
                // Sources whose decoded pixels (12-19 MiB each) stay below malloc's mapping
                // threshold, so their memory comes from, and stays in, malloc's arenas.
                for (index, (width, height)) in [(2400, 2000), (2000, 1800), (1800, 1600)].enumerated() {
                    // A row of noise, each row shifted: cheap to make, and no filter finds it flat.
                    var state: UInt32 = 12345 &+ UInt32(index)
                    let row = (0..<(width * 4 + 4096)).map { _ in
                        state = state &* 1_664_525 &+ 1_013_904_223
                        return UInt8(truncatingIfNeeded: state >> 24)
                    }
                    var pixels: [UInt8] = []
                    pixels.reserveCapacity(width * height * 4)
                    for y in 0..<height { pixels += row[(y % 1024)..<(y % 1024 + width * 4)] }
                    let image = try #require(RasterImage(width: width, height: height, pixels: pixels, hasAlpha: false))
                    try Data(JPEGEncoder(quality: 80).encode(image)).write(
                        to: folder.appendingPathComponent("noise\(index).jpg"))
                }
                // Workers at the processes' own priority: niced 10 (the default) beside a busy
                // machine's other work, the burst got a tenth of the cores and outlasted its
                // requests' 60 s; this test is about memory, not priority.
                let server = try await ServedProcess.start([
                    "--allow-unsigned", "--local-root", folder.path, "--workers", "2", "--result-cache-mb", "0",
                    "--free-memory-interval", "0.2", "--disk-cache-mb", "0", "--worker-niceness", "0",
                ])
                defer { server.kill() }
                #expect(try await server.get("/health").status == 200)
                let idle = server.residentMemoryKiB
                try await withThrowingTaskGroup(of: Int.self) { group in
                    for index in 0..<12 {
                        group.addTask {
                            try await server.get(
                                "/insecure/w:\(1300 + index * 37)/plain/local:///noise\(index % 3).jpg@jpg"
                            )
                            .status
                        }
                    }
                    for try await status in group { #expect(status == 200) }
                }
                let peak = server.peakMemoryKiB
                #expect(peak - idle > 40_000, "idle \(idle) KiB, peak \(peak) KiB: the burst should take memory")
                // Returned within a few intervals of the burst's end: under a fifth of the
                // burst's memory is left. (malloc_trim alone left about 30%: the free tops
                // of the arenas other than the main one.)
                try await waitUntil("resident memory back near idle") {
                    server.residentMemoryKiB - idle < (peak - idle) / 5
                }
            }
        }
    }
}

/// scripts/otlp-receiver.py, an OTLP receiver (HTTP and gRPC) decoding what it receives
/// with opentelemetry-proto, in scripts/deploy-tools.sh's virtual environment.
final class OTLPReceiver: Sendable {
    let process: Process
    let ports: (http: Int, grpc: Int)
    private let output: OutputBuffer
    private let input: Pipe

    static func start() async throws -> OTLPReceiver {
        let python = Command.repository.appendingPathComponent(".build/deploy-venv/bin/python")
        guard FileManager.default.isExecutableFile(atPath: python.path) else {
            throw ServeFailure(description: "the deploy tools are missing: run bash scripts/deploy-tools.sh install")
        }
        let process = Process()
        process.executableURL = python
        process.arguments = [Command.repository.appendingPathComponent("scripts/otlp-receiver.py").path]
        let (input, pipe) = (Pipe(), Pipe())
        process.standardInput = input
        process.standardOutput = pipe
        try process.run()
        let output = OutputBuffer.draining(pipe)
        var ready: (Int, Int)?
        try await waitUntil("the OTLP receiver listens") {
            guard let line = output.text.split(separator: "\n").first(where: { $0.hasPrefix("READY ") }),
                let object = try JSONSerialization.jsonObject(with: Data(line.dropFirst(6).utf8)) as? [String: Int],
                let http = object["http"], let grpc = object["grpc"]
            else { return !process.isRunning }
            ready = (http, grpc)
            return true
        }
        guard let ready else { throw ServeFailure(description: "the OTLP receiver did not start: \(output.text)") }
        return OTLPReceiver(process: process, ports: ready, output: output, input: input)
    }

    private init(process: Process, ports: (Int, Int), output: OutputBuffer, input: Pipe) {
        self.process = process
        self.ports = (ports.0, ports.1)
        self.output = output
        self.input = input
    }

    /// The spans received so far, each as the receiver printed it.
    var spans: [[String: Any]] {
        output.text.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["span"] as? [String: Any]
        }
    }

    /// The names of the metrics received so far.
    var metrics: Set<String> {
        Set(
            output.text.split(separator: "\n").compactMap { line in
                ((try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["metric"]
                    as? [String: Any])?["name"] as? String
            })
    }

    func stop() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}

extension ServeCommandTests.Deployment {
    @Test(
        "IMGPROXY_OPEN_TELEMETRY_ENABLE: each request's spans reach an OTLP receiver over gRPC and HTTP, under the caller's traceparent",
        arguments: ["grpc", "http/protobuf"])
    func traces(_ protocolName: String) async throws {
        let receiver = try await OTLPReceiver.start()
        defer { receiver.stop() }
        let port = protocolName == "grpc" ? receiver.ports.grpc : receiver.ports.http
        let server = try await ServedProcess.start(
            ["--allow-unsigned", "--local-root", Self.images],
            environment: [
                "IMGPROXY_OPEN_TELEMETRY_ENABLE": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(port)",
                "OTEL_EXPORTER_OTLP_PROTOCOL": protocolName, "OTEL_SERVICE_NAME": "imageloader-test",
                "OTEL_BSP_SCHEDULE_DELAY": "100", "IMGPROXY_OPEN_TELEMETRY_ENABLE_METRICS": "true",
                "OTEL_METRIC_EXPORT_INTERVAL": "200",
            ])
        defer { server.kill() }
        func hex(_ count: Int) -> String {
            (0..<count).map { _ in String(UInt8.random(in: 0...255), radix: 16) }.map {
                $0.count == 1 ? "0" + $0 : $0
            }.joined()
        }
        let (traceID, callerSpan) = (hex(16), hex(8))
        let answer = try await server.get(Self.jpegURL, headers: [("traceparent", "00-\(traceID)-\(callerSpan)-01")])
        #expect(answer.status == 200)
        var spans: [[String: Any]] = []
        try await waitUntil("the request's spans at the receiver") {
            spans = receiver.spans.filter { $0["trace_id"] as? String == traceID }
            return Set(spans.compactMap { $0["name"] as? String }).isSuperset(of: [
                "source.fetch", "image.decode", "image.encode",
            ]) && spans.contains { $0["kind"] as? String == "SPAN_KIND_SERVER" }
        }
        let serverSpan = try #require(spans.first { $0["kind"] as? String == "SPAN_KIND_SERVER" })
        #expect(serverSpan["parent_span_id"] as? String == callerSpan, "\(serverSpan)")
        #expect(
            spans.allSatisfy {
                $0["service"] as? String == "imageloader-test"
                    && $0["via"] as? String == (protocolName == "grpc" ? "grpc" : "http")
            })
        let serverID = try #require(serverSpan["span_id"] as? String)
        for name in ["source.fetch", "image.decode", "image.encode"] {
            let span = try #require(spans.first { $0["name"] as? String == name })
            #expect(span["parent_span_id"] as? String == serverID, "\(name): \(span)")
        }
        let fetch = try #require(spans.first { $0["name"] as? String == "source.fetch" })
        #expect((fetch["attributes"] as? [String: Any])?["imageloader.source.cache"] as? String == "local")
        // The metrics go the same way, beside /metrics.
        try await waitUntil("the service's metrics at the receiver") {
            receiver.metrics.contains("imageservice_requests_total")
                && receiver.metrics.contains("imageservice_workers")
        }
        #expect(try await server.metric("imageservice_workers") >= 1)
    }
}
