import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `imageloader serve` running as a real process on a free port, its output drained
/// on a thread of its own (so a full pipe never blocks the server) and kept for the
/// tests to read.
final class ServedProcess: Sendable {
    let process: Process
    let port: Int
    private let output: OutputBuffer

    /// An answer, as the tests look at it.
    struct Answer {
        let status: Int
        let headers: HTTPHeaders
        let body: [UInt8]

        func header(_ name: String) -> String? { headers.first(name: name) }
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    /// A long connect timeout: a request waiting for one of the pool's connections (8 a
    /// host, which paces a test's fan-out of 20 as the tests expect) fails at the connect
    /// timeout (`getConnectionFromPoolTimeout`, 10 s by default), which an instrumented,
    /// busy run passed.
    static let client = HTTPClient(
        eventLoopGroupProvider: .singleton,
        configuration: HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(Int64(120 * testTimeScale))),
            decompression: .disabled))

    /// How long a request may take unless its test is about that: 60 s, stretched by the
    /// sanitizers' time scale (a 1600x1200 enlargement under ThreadSanitizer, beside a
    /// whole `.ci/run` on two cores, took longer than 60 s once).
    static let requestTimeout = TimeAmount.seconds(Int64(60 * testTimeScale))

    /// Starts `imageloader serve --port 0 arguments...` and waits for its "listening on" line.
    static func start(_ arguments: [String], environment: [String: String]? = nil) async throws -> ServedProcess {
        let process = Process()
        process.executableURL = Command.executable
        // Tests that are not about the request timeout get a long one: a debug build
        // under the whole suite (or a sanitizer) can take more than the default 10 s for
        // an image, and a 504 there would be a flake, not a finding.
        let timeout = arguments.contains("--timeout") ? [] : ["--timeout", "600"]
        // Loopback unless the test names an address (the default is every interface, as imgproxy's).
        let host = arguments.contains("--host") ? [] : ["--host", "127.0.0.1"]
        process.arguments = ["serve", "--port", "0"] + host + timeout + arguments
        if let environment {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = OutputBuffer.draining(pipe)
        // (Only a process that never starts should reach this: with the whole suite beside
        // it on two cores, a start took more than 30 s once; under the sanitizers longer.)
        let deadline = ContinuousClock.now + .seconds(120 * testTimeScale)
        while ContinuousClock.now < deadline {
            if let range = output.text.range(
                of: #"listening on http://127\.0\.0\.1:(\d+)"#, options: .regularExpression)
            {
                let port = Int(output.text[range].split(separator: ":").last!)!
                return ServedProcess(process: process, port: port, output: output)
            }
            if !process.isRunning { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        process.terminate()
        throw ServeFailure(description: "serve did not start: \(output.text)")
    }

    private init(process: Process, port: Int, output: OutputBuffer) {
        self.process = process
        self.port = port
        self.output = output
    }

    /// Everything the process printed so far (the access log included).
    var printed: String { output.text }

    /// A GET; a client that gives up after `timeout` closes its connection.
    func get(_ path: String, headers: [(String, String)] = [], timeout: TimeAmount = requestTimeout) async throws
        -> Answer
    {
        try await ServedProcess.request(port: port, path, headers: headers, timeout: timeout)
    }

    func post(_ path: String, body: [UInt8], headers: [(String, String)] = []) async throws -> Answer {
        try await ServedProcess.request(port: port, path, method: .POST, headers: headers, body: body)
    }

    /// A request to a server on 127.0.0.1 (this one, an instance behind nginx, nginx).
    static func request(
        port: Int, _ path: String, method: HTTPMethod = .GET, headers: [(String, String)] = [], body: [UInt8]? = nil,
        timeout: TimeAmount = requestTimeout
    ) async throws -> Answer {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await client.execute(request, timeout: timeout)
        let bytes = try await response.body.collect(upTo: 256 << 20)
        return Answer(
            status: Int(response.status.code), headers: response.headers, body: Array(bytes.readableBytesView))
    }

    /// The value of a metric line (`name{labels} value`) from `/metrics`, or 0 when absent.
    func metric(_ line: String) async throws -> Double {
        let text = try await get("/metrics").text
        for entry in text.split(separator: "\n") where entry.hasPrefix(line + " ") {
            return Double(entry.split(separator: " ").last!) ?? 0
        }
        return 0
    }

    /// Sends SIGTERM and waits for the exit status.
    func terminate() async -> Int32 {
        Glibc.kill(process.processIdentifier, SIGTERM)
        return await exitStatus()
    }

    func exitStatus() async -> Int32 {
        let process = self.process
        return await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                process.waitUntilExit()
                continuation.resume(returning: process.terminationStatus)
            }
        }
    }

    /// The peak resident memory of the process so far, in KiB (`VmHWM`).
    var peakMemoryKiB: Int { memoryKiB("VmHWM:") }

    /// The resident memory of the process now, in KiB (`VmRSS`).
    var residentMemoryKiB: Int { memoryKiB("VmRSS:") }

    private func memoryKiB(_ field: String) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix(field) } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    func kill() {
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

struct ServeFailure: Error, CustomStringConvertible {
    let description: String
}

/// What the process printed, appended from the reading thread.
final class OutputBuffer: @unchecked Sendable {
    /// A buffer filled from `pipe` on a thread of its own until the pipe closes, so that
    /// a full pipe never blocks the process writing to it.
    static func draining(_ pipe: Pipe) -> OutputBuffer {
        let output = OutputBuffer()
        let handle = pipe.fileHandleForReading
        Thread.detachNewThread {
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                output.append(data)
            }
        }
        return output
    }

    // Safe: `printed` is only touched with `lock` held.
    private let lock = NSLock()
    private var printed = ""

    func append(_ chunk: Data) {
        lock.lock()
        printed += String(decoding: chunk, as: UTF8.self)
        lock.unlock()
    }

    var text: String {
        lock.lock()
        defer { lock.unlock() }
        return printed
    }
}

/// A bare TCP connection to 127.0.0.1, for clients that misbehave below HTTP: send
/// nothing, half a request, or hold the connection open.
final class RawConnection {
    private let fd: Int32

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            throw POSIXError(.ECONNREFUSED)
        }
    }

    deinit { close(fd) }

    func send(_ text: String) { send(Array(text.utf8)) }

    func send(_ bytes: [UInt8]) {
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { return }
            sent += count
        }
    }

    /// Sends a byte every `interval` seconds, reading what comes back, until the server
    /// closes the connection or `limit` seconds pass: the bytes, and when it closed. On a
    /// thread of its own, so the pace holds while the suite's async tasks wait for one of
    /// the few threads they share.
    func trickle(every interval: Double, for limit: Double) async -> (bytes: [UInt8], closedAfter: Duration?) {
        let fd = self.fd
        return await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                let start = ContinuousClock.now
                var received: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 4096)
                while ContinuousClock.now - start < .milliseconds(Int(limit * 1000)) {
                    _ = [UInt8(ascii: "x")].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, 1, Int32(MSG_NOSIGNAL)) }
                    var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                    if poll(&poller, 1, Int32(interval * 1000)) > 0 {
                        let count = recv(fd, &buffer, buffer.count, 0)
                        if count <= 0 {
                            continuation.resume(returning: (received, ContinuousClock.now - start))
                            return
                        }
                        received += buffer[..<count]
                    }
                }
                continuation.resume(returning: (received, nil))
            }
        }
    }

    /// Reads what arrives within `seconds`, until the server closes the connection or
    /// the bytes so far satisfy `enough`: the bytes, and whether it closed. It looks every
    /// 10 ms and sleeps between, so it never holds one of the few threads async code runs on.
    func read(for seconds: Double, until enough: ([UInt8]) -> Bool = { _ in false }) async throws -> (
        bytes: [UInt8], closed: Bool
    ) {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 0) > 0 else {
                try await Task.sleep(for: .milliseconds(10))
                continue
            }
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { return (received, true) }
            received += buffer[..<count]
            if enough(received) { break }
        }
        return (received, false)
    }
}
