import Foundation
import NIOConcurrencyHelpers
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// An origin that misbehaves on purpose: raw TCP on 127.0.0.1, so it can send what a
/// real HTTP server never would (lying lengths, endless or trickling bodies, resets,
/// silence, huge headers). Each path has a script of steps; every connection gets its
/// own thread. Used by the fault tests, which assert a typed error, a bounded time and
/// a cache that still serves the next good response.
public final class FaultOrigin: Sendable {
    public enum Step: Sendable {
        /// Sends these bytes as they are.
        case send([UInt8])
        /// Waits this many seconds.
        case sleep(Double)
        /// Sends `count` bytes, one every `interval` seconds.
        case trickle(count: Int, interval: Double)
        /// Sends chunked-encoding chunks of `size` bytes until the client goes away.
        case endlessChunks(size: Int)
        /// Never answers (holds the connection until the client leaves or the origin stops).
        case hang
        /// Closes the connection with a TCP reset.
        case reset
    }

    public let port: Int
    private let listener: Int32
    private let scripts = NIOLockedValueBox<[String: [Step]]>([:])
    private let counts = NIOLockedValueBox<[String: Int]>([:])
    private let stopped = Atomic<Bool>(false)

    public var base: String { "http://127.0.0.1:\(port)" }

    public func url(_ path: String) -> URL { URL(string: base + path)! }

    /// Plays `steps` to every request for `path`.
    public func script(_ path: String, _ steps: [Step]) {
        scripts.withLockedValue { $0[path] = steps }
    }

    /// A plain response: status line, header fields (Content-Length added unless given
    /// or `chunked`), body.
    public static func response(
        status: Int = 200, headers: [(String, String)] = [], body: [UInt8] = [], contentLength: Int? = nil
    ) -> [UInt8] {
        var head = "HTTP/1.1 \(status) Status\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        // One request a connection: the client must not reuse it.
        if !headers.contains(where: { $0.0.lowercased() == "connection" }) { head += "Connection: close\r\n" }
        if !headers.contains(where: {
            $0.0.lowercased() == "content-length" || $0.0.lowercased() == "transfer-encoding"
        }) {
            head += "Content-Length: \(contentLength ?? body.count)\r\n"
        }
        head += "\r\n"
        return Array(head.utf8) + body
    }

    /// How many requests `path` has had.
    public func count(_ path: String) -> Int { counts.withLockedValue { $0[path] ?? 0 } }

    public init() throws {
        (listener, port) = try FaultOrigin.bindLoopback(listening: true)
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// A TCP socket on 127.0.0.1 and an ephemeral port, listening or only bound.
    static func bindLoopback(listening: Bool) throws -> (Int32, Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, !listening || listen(fd, 64) == 0 else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// Stops accepting; connections still open end as their scripts do.
    public func stop() {
        stopped.store(true, ordering: .sequentiallyConsistent)
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func acceptLoop() {
        while !stopped.load(ordering: .sequentiallyConsistent) {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else {
                if errno == EINTR { continue }
                return
            }
            let thread = Thread { [self] in serve(connection) }
            thread.start()
        }
    }

    private func serve(_ connection: Int32) {
        var closed = false
        defer { if !closed { close(connection) } }
        // One request per connection: read the head, find the path.
        var head: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !head.containsHeadEnd {
            let n = read(connection, &buffer, buffer.count)
            guard n > 0 else { return }
            head += buffer[0..<n]
            if head.count > 1 << 20 { return }
        }
        let line = String(decoding: head.prefix { $0 != 13 }, as: UTF8.self).split(separator: " ")
        let path = line.count > 1 ? String(line[1]) : "/"
        counts.withLockedValue { $0[path, default: 0] += 1 }
        let steps = scripts.withLockedValue { $0[path] } ?? [.send(FaultOrigin.response(status: 404))]
        for step in steps {
            switch step {
            case .send(let bytes):
                guard send(connection, bytes) else { return }
            case .sleep(let seconds):
                usleep(UInt32(seconds * 1_000_000))
            case .trickle(let count, let interval):
                for _ in 0..<count {
                    guard !stopped.load(ordering: .sequentiallyConsistent), send(connection, [0x41]) else { return }
                    usleep(UInt32(interval * 1_000_000))
                }
            case .endlessChunks(let size):
                let chunk =
                    Array(String(size, radix: 16).utf8) + [13, 10] + [UInt8](repeating: 0x42, count: size) + [13, 10]
                while !stopped.load(ordering: .sequentiallyConsistent), send(connection, chunk) {}
                return
            case .hang:
                // Wait until the client closes (read returns 0) or the origin stops.
                var pollDescriptor = pollfd(fd: connection, events: Int16(POLLIN), revents: 0)
                while !stopped.load(ordering: .sequentiallyConsistent) {
                    if poll(&pollDescriptor, 1, 100) > 0 {
                        if read(connection, &buffer, buffer.count) <= 0 { return }
                    }
                }
                return
            case .reset:
                var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                setsockopt(connection, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                close(connection)
                closed = true
                return
            }
        }
    }

    private func send(_ connection: Int32, _ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes {
                Glibc.send(connection, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
            }
            if n <= 0 { return false }
            sent += n
        }
        return true
    }
}

/// A port on 127.0.0.1 that refuses connections: bound, never listening, and held until
/// ``close()``, so no other server of the test run can take it meanwhile.
public final class RefusingPort: Sendable {
    private let socket: Int32
    public let port: Int

    public init() throws { (socket, port) = try FaultOrigin.bindLoopback(listening: false) }

    public func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(port)\(path)")! }

    public func close() { _ = Glibc.close(socket) }
}

extension [UInt8] {
    fileprivate var containsHeadEnd: Bool {
        guard count >= 4 else { return false }
        for i in 0...(count - 4) where self[i] == 13 && self[i + 1] == 10 && self[i + 2] == 13 && self[i + 3] == 10 {
            return true
        }
        return false
    }
}
