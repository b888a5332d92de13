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
    /// What bounds the process: refused addresses, the queue, clients that leave, connections, bodies, niceness and SIGTERM.
    @Suite("imageloader serve: addresses, overload, clients, connections and shutdown")
    struct Limits: ServeTesting {
        @Test("sources on loopback, private and link-local addresses are refused, also after a redirect")
        func networkSafety() async throws {
            let origin = try await TestOrigin.start()
            defer { Task { await origin.stop() } }
            origin.serve(
                "/a.png",
                .init(
                    headers: [("Content-Type", "image/png"), ("Cache-Control", "max-age=3600")], body: TestAssets.png))
            // 127.0.0.2 is loopback too, but not the address allowed below.
            origin.serve("/hop", .init(status: 302, headers: [("Location", "http://127.0.0.2:\(origin.port)/a.png")]))
            // (A refused source answers at once; the timeout only keeps a regression from hanging.)
            try await serving(["--allow-unsigned", "--timeout", "30"]) { server in
                let port = origin.port
                for source in [
                    "http://127.0.0.1:\(port)/a.png", "http://localhost:\(port)/a.png", "http://[::1]:\(port)/a.png",
                    "http://[::ffff:127.0.0.1]:\(port)/a.png", "http://10.0.0.1/a.png", "http://169.254.169.254/a.png",
                    "http://192.168.1.1/a.png", "http://100.64.0.1/a.png", "http://[fd00::1]/a.png",
                    "http://0.0.0.0:\(port)/a.png",
                ] {
                    let answer = try await server.get("/insecure/w:10/plain/" + source)
                    #expect(answer.status == 404, "\(source): \(answer.status) \(answer.text)")
                    // The answer names the settings that allow such a source.
                    #expect(answer.text.contains("--allow-address") && answer.text.contains("--allow-private-networks"))
                }
                #expect(origin.count("/a.png") == 0)
            }
            try await Command.withTemporaryDirectory { directory in
                let cache = ["--cache-dir", directory.path]
                try await serving(["--allow-unsigned", "--allow-address", "127.0.0.1"] + cache) { server in
                    let direct = try await server.get("/insecure/w:10/plain/" + origin.url("/a.png").absoluteString)
                    #expect(direct.status == 200)
                    let redirected = try await server.get("/insecure/w:10/plain/" + origin.url("/hop").absoluteString)
                    #expect(redirected.status == 404, "\(redirected.status) \(redirected.text)")
                    #expect(origin.count("/hop") == 1 && origin.count("/a.png") == 1)
                }
                // An instance that refuses loopback does not serve what one that allowed it
                // stored in the cache folder they share.
                try await serving(["--allow-unsigned"] + cache) { server in
                    let cached = try await server.get("/insecure/w:11/plain/" + origin.url("/a.png").absoluteString)
                    #expect(cached.status == 404, "\(cached.status) \(cached.text)")
                    #expect(origin.count("/a.png") == 1)
                }
            }
        }

        @Test(
            "past the workers, the fetches ahead and the queue the answer is an immediate 429 with Retry-After (imgproxy's status); a fetch does not hold the worker; identical requests share one run"
        )
        func overload() async throws {
            let origin = try await TestOrigin.start()
            defer { Task { await origin.stop() } }
            let photo = TestAssets.bytes("jpeg-800x600.jpg")
            // The origin holds every source until the test lets it answer: what the service
            // does meanwhile is seen, whatever the machine's speed.
            let (first, burstGate) = (Gate(), Gate())
            for index in 0..<8 {
                origin.serve(
                    "/slow\(index).jpg",
                    .init(headers: [Self.jpeg, ("Cache-Control", "max-age=60")], body: photo, gate: first))
                origin.serve(
                    "/held\(index).jpg",
                    .init(headers: [Self.jpeg, ("Cache-Control", "max-age=60")], body: photo, gate: burstGate))
            }
            func atOrigin(_ prefix: String) -> Int { origin.arrivalOrder.filter { $0.hasPrefix(prefix) }.count }
            try await serving([
                "--allow-unsigned", "--allow-private-networks", "--workers", "1", "--fetches-ahead", "1", "--queue",
                "1",
            ]) { server in
                let (answers, fetchedTogether) = try await withThrowingTaskGroup(of: (Int, String?).self) { group in
                    for index in 0..<8 {
                        group.addTask {
                            let answer = try await server.get(
                                "/insecure/w:50/plain/" + origin.url("/slow\(index).jpg").absoluteString)
                            return (answer.status, answer.header("Retry-After"))
                        }
                    }
                    // Five are answered while the origin still holds every source: refused at once.
                    var answers: [(Int, String?)] = []
                    while answers.count < 5, let next = try await group.next() { answers.append(next) }
                    // The worker's request and the one ahead of it download side by side (a
                    // fetch does not hold the worker); the waiting one is not at the origin.
                    try await waitUntil("both admitted requests at the origin") { atOrigin("/slow") == 2 }
                    let fetchedTogether = atOrigin("/slow")
                    first.open()
                    while let next = try await group.next() { answers.append(next) }
                    return (answers, fetchedTogether)
                }
                #expect(answers.prefix(5).allSatisfy { $0.0 == 429 && $0.1 == "1" }, "\(answers)")
                #expect(fetchedTogether == 2)
                #expect(answers.filter { $0.0 == 200 }.count == 3, "\(answers)")
                #expect(answers.filter { $0.0 == 429 }.count == 5, "\(answers)")

                // A burst of 200 more, its sources held: the refused ones hold nothing, so memory
                // stays where one worker, one fetch ahead and one waiter put it (a debug build's
                // own size included).
                let burst = try await withThrowingTaskGroup(of: Int.self) { group in
                    for index in 0..<200 {
                        group.addTask {
                            try await server.get(
                                "/insecure/w:\(40 + index)/plain/" + origin.url("/held\(index % 7).jpg").absoluteString
                            ).status
                        }
                    }
                    var statuses: [Int] = []
                    while statuses.count < 197, let next = try await group.next() { statuses.append(next) }
                    burstGate.open()
                    while let next = try await group.next() { statuses.append(next) }
                    return statuses
                }
                #expect(burst.prefix(197).allSatisfy { $0 == 429 } && burst.filter { $0 == 200 }.count == 3, "\(burst)")
                // Nothing waits any more, and the gauge says so (it is not left at its last arrival's value).
                #expect(try await server.metric("imageservice_queue_depth") == 0)
                #expect(server.peakMemoryKiB < 160_000, "peak RSS \(server.peakMemoryKiB) KiB")

                // Ten identical requests: one fetch, one processing.
                let processedBefore = try await server.metric("imageservice_processing_seconds_count")
                let shared = try await withThrowingTaskGroup(of: Int.self) { group in
                    for _ in 0..<10 {
                        group.addTask {
                            try await server.get("/insecure/w:60/plain/" + origin.url("/slow7.jpg").absoluteString)
                                .status
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                #expect(shared.allSatisfy { $0 == 200 }, "\(shared)")
                #expect(origin.count("/slow7.jpg") <= 1)
                #expect(try await server.metric("imageservice_processing_seconds_count") == processedBefore + 1)
            }
        }

        @Test(
            "a client that leaves stops its request: its download and its place are freed at once, and it is counted as 499"
        )
        func clientDeparture() async throws {
            let origin = try await TestOrigin.start()
            defer { Task { await origin.stop() } }
            let photo = TestAssets.bytes("jpeg-800x600.jpg")
            // Held until the origin stops: the service can only end them by noticing the departures.
            let never = Gate()
            for index in 0..<3 {
                origin.serve("/slow\(index).jpg", .init(headers: [Self.jpeg], body: photo, gate: never))
            }
            origin.serve("/fast.jpg", .init(headers: [Self.jpeg], body: photo))
            try await serving([
                "--allow-unsigned", "--allow-private-networks", "--workers", "1", "--fetches-ahead", "1", "--queue",
                "1",
            ]) { server in
                // Three requests fill the service (a worker's download, one ahead, one waiting);
                // their clients give up after 0.3 s and close their connections.
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for index in 0..<3 {
                        group.addTask {
                            let path = "/insecure/w:50/plain/" + origin.url("/slow\(index).jpg").absoluteString
                            await #expect(throws: HTTPClientError.self) {
                                _ = try await server.get(path, timeout: .milliseconds(300))
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                // The service notices (its sources never answer), ends them as 499 ...
                try await waitUntil("the three were counted as 499") {
                    try await server.metric("imageservice_requests_total{status=\"499\"}") == 3
                }
                #expect(origin.count("/slow0.jpg") + origin.count("/slow1.jpg") + origin.count("/slow2.jpg") >= 2)
                // ... gives their places back (the work they shared unwinds after the answer) ...
                try await waitUntil("the departed requests gave their places back") {
                    let active = try await server.metric("imageservice_requests_active")
                    let queued = try await server.metric("imageservice_queue_depth")
                    return active == 0 && queued == 0
                }
                // ... and their places are free: three more are all served, where a service still
                // working for the departed would refuse them with 503.
                let answers = try await withThrowingTaskGroup(of: Int.self) { group in
                    for index in 0..<3 {
                        group.addTask {
                            try await server.get(
                                "/insecure/w:\(60 + index)/plain/" + origin.url("/fast.jpg").absoluteString
                            )
                            .status
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                #expect(answers == [200, 200, 200], "\(answers)")
                #expect(server.printed.contains(" 499"))
            }
        }

        @Test("the workers run --worker-niceness below the event loops")
        func workerNiceness() async throws {
            try await serving([
                "--allow-unsigned", "--local-root", Self.images, "--workers", "1", "--worker-niceness", "7",
            ]) {
                server in
                // Given a served thumbnail (a worker has run)
                let answer = try await server.get("/insecure/w:50/plain/local:///jpeg-800x600.jpg")
                #expect(answer.status == 200)
                // Then, read from /proc: a thread runs 7 below the main thread, and the event loops at its level
                let pid = server.process.processIdentifier
                let threads = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task").map { tid in
                    let comm = try String(contentsOfFile: "/proc/\(pid)/task/\(tid)/comm", encoding: .utf8)
                    let stat = try String(contentsOfFile: "/proc/\(pid)/task/\(tid)/stat", encoding: .utf8)
                    // The fields after the name (which may hold spaces): state is the 3rd field, nice the 19th.
                    let fields = stat[stat.range(of: ")", options: .backwards)!.upperBound...].split(separator: " ")
                    return (
                        tid: Int(tid)!, name: comm.trimmingCharacters(in: .whitespacesAndNewlines),
                        nice: Int(fields[16])!
                    )
                }
                let main = try #require(threads.first { $0.tid == Int(pid) })
                #expect(threads.contains { $0.nice == main.nice + 7 }, "\(threads)")
                let loops = threads.filter { $0.name.hasPrefix("NIO-") }
                #expect(!loops.isEmpty && loops.allSatisfy { $0.nice == main.nice }, "\(threads)")
            }
        }

        @Test(
            "connections: past --max-connections one is closed when accepted; silent, half-sent and idle keep-alive ones after --idle-timeout; one whose body trickles after --timeout; a request that takes longer is not cut"
        )
        func connectionBounds() async throws {
            let origin = try await TestOrigin.start()
            defer { Task { await origin.stop() } }
            origin.serve(
                "/slow.jpg", .init(headers: [Self.jpeg], body: TestAssets.bytes("jpeg-800x600.jpg"), delay: 2.5))
            let arguments = [
                "--allow-unsigned", "--allow-private-networks", "--idle-timeout", "1", "--max-connections", "3",
                "--timeout", "4",
            ]
            try await serving(arguments) { server in
                let silent = try RawConnection(port: server.port)
                let halfSent = try RawConnection(port: server.port)
                halfSent.send("GET /health HTTP/1.1\r\nHo")
                let keptAlive = try RawConnection(port: server.port)
                keptAlive.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                let answer = try await keptAlive.read(for: 10) {
                    String(decoding: $0, as: UTF8.self).hasSuffix("\r\n\r\nimgproxy is running")
                }
                #expect(String(decoding: answer.bytes, as: UTF8.self).hasPrefix("HTTP/1.1 200"), "\(answer)")
                #expect(!answer.closed)

                // A fourth connection finds no place: closed when accepted, nothing written;
                // the count of refusals tells it apart from the idle timeout.
                let extra = try RawConnection(port: server.port)
                let refused = try await extra.read(for: 10)
                #expect(refused.closed && refused.bytes.isEmpty)

                // The three are closed once idle for a second, each without an answer.
                for connection in [silent, halfSent, keptAlive] {
                    let rest = try await connection.read(for: 10)
                    #expect(rest.closed && rest.bytes.isEmpty, "\(rest)")
                }
                // A GET whose body trickles in keeps resetting the idle timeout. It is answered,
                // and the connection closed once the request has not arrived in full within
                // --timeout (and a second).
                let trickle = try RawConnection(port: server.port)
                trickle.send("GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
                let (received, closedAfter) = await trickle.trickle(every: 0.2, for: 20)
                #expect(String(decoding: received, as: UTF8.self).hasPrefix("HTTP/1.1 200"))
                let closed = try #require(closedAfter)
                #expect(closed > .seconds(2) && closed < .seconds(12), "\(closed)")

                // Their places are free again. A request whose source takes 2.5 s, longer
                // than the idle timeout, is answered in full.
                let slow = try await server.get("/insecure/w:50/plain/" + origin.url("/slow.jpg").absoluteString)
                #expect(slow.status == 200)
                #expect(try decoded(slow).width == 50)
                #expect(try await server.metric("imageservice_connections_refused_total") == 1)
            }
        }

        @Test(
            "request bodies: a declared length over the limit is a 413 before reading, bad chunking a 400, 100 Continue when expected, and slow bodies wait in places of their own, not in those of image requests"
        )
        func requestBodies() async throws {
            let arguments = [
                "--allow-unsigned", "--local-root", Self.images, "--max-src-bytes", "100000", "--workers", "1",
                "--fetches-ahead", "0", "--queue", "0",
            ]
            try await serving(arguments) { server in
                func answer(_ connection: RawConnection) async throws -> String {
                    let read = try await connection.read(for: 10) {
                        String(decoding: $0, as: UTF8.self).contains("\r\n\r\n")
                    }
                    return String(decoding: read.bytes, as: UTF8.self)
                }
                // No body is sent: the declared length alone is refused.
                let declared = try RawConnection(port: server.port)
                declared.send("POST /info HTTP/1.1\r\nHost: x\r\nContent-Length: 100001\r\n\r\n")
                #expect(try await answer(declared).hasPrefix("HTTP/1.1 413"))
                let chunked = try RawConnection(port: server.port)
                chunked.send(
                    "POST /info HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n")
                #expect(try await answer(chunked).hasPrefix("HTTP/1.1 400"))
                // A client that expects 100 Continue is told to send its body, then answered.
                let png = TestAssets.bytes("png-rgb8.png")
                let expecting = try RawConnection(port: server.port)
                expecting.send(
                    "POST /info HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: \(png.count)\r\n\r\n")
                #expect(try await answer(expecting) == "HTTP/1.1 100 Continue\r\n\r\n")
                expecting.send(png)
                #expect(try await answer(expecting).hasPrefix("HTTP/1.1 200"))

                // Two bodies that never end: one holds the only place for bodies, the other
                // finds none (429, queue 0).
                let slow = try (0..<2).map { _ in try RawConnection(port: server.port) }
                for connection in slow {
                    connection.send("POST /info HTTP/1.1\r\nHost: x\r\nContent-Length: 50000\r\n\r\n0123456789")
                }
                let first = try await slow[0].read(for: 3) { !$0.isEmpty }
                let second = try await slow[1].read(for: 3) { !$0.isEmpty }
                let answers = [first, second].map { String(decoding: $0.bytes, as: UTF8.self) }
                #expect(answers.filter { $0.hasPrefix("HTTP/1.1 429") }.count == 1, "\(answers)")
                #expect(answers.filter(\.isEmpty).count == 1, "\(answers)")
                // The one worker's place is free: an image request is answered at once.
                let image = try await server.get("/insecure/rs:fit:40:40/plain/local:///png-rgb8.png@png")
                #expect(image.status == 200)
            }
        }

        @Test("SIGTERM: requests in flight finish, then the process exits 0")
        func gracefulShutdown() async throws {
            let origin = try await TestOrigin.start()
            defer { Task { await origin.stop() } }
            let sourceAnswer = Gate()
            origin.serve(
                "/slow.jpg", .init(headers: [Self.jpeg], body: TestAssets.bytes("jpeg-800x600.jpg"), gate: sourceAnswer)
            )
            let server = try await ServedProcess.start(["--allow-unsigned", "--allow-private-networks"])
            defer { server.kill() }
            let inFlight = Task {
                try await server.get("/insecure/w:50/plain/" + origin.url("/slow.jpg").absoluteString)
            }
            try await waitUntil("the request reached the origin") { origin.count("/slow.jpg") == 1 }
            kill(server.process.processIdentifier, SIGTERM)
            // The source answers once the shutdown has begun (the server no longer accepts).
            try await waitUntil("the listening socket closed") { (try? RawConnection(port: server.port)) == nil }
            sourceAnswer.open()
            let status = await server.exitStatus()
            let answer = try await inFlight.value
            #expect(answer.status == 200)
            #expect(try decoded(answer).width == 50)
            #expect(status == 0, "\(server.printed)")
        }
    }
}
