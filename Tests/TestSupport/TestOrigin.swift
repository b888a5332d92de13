import Foundation
import HTTPTypes
import HummingbirdCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A real HTTP origin for the tests: Hummingbird's HTTP/1.1 server on 127.0.0.1 and an
/// ephemeral port. (Its core server, not `Application`, which would overwrite the
/// Date header the tests script.)
/// Each test scripts the replies per path and reads back every request it received,
/// with its headers, to count requests and check conditional headers.
public final class TestOrigin: Sendable {
    public struct Received: Sendable {
        public let path: String
        public let headers: [String: String]  // lowercased names
        /// The method and the body (the first 1 MiB), for tests of writes and token requests.
        public var method = "GET"
        public var body: [UInt8] = []

        public func header(_ name: String) -> String? { headers[name.lowercased()] }
    }

    public struct Reply: Sendable {
        public var status = 200
        public var headers: [(String, String)] = []
        public var body: [UInt8] = []
        /// Seconds to wait before answering (for timeouts; to order events, use a gate).
        public var delay: Double = 0
        /// When set, the answer waits until the test opens it: the request has arrived,
        /// and the test decides when it is answered.
        public var gate: Gate?

        public init(
            status: Int = 200, headers: [(String, String)] = [], body: [UInt8] = [], delay: Double = 0,
            gate: Gate? = nil
        ) {
            self.status = status
            self.headers = headers
            self.body = body
            self.delay = delay
            self.gate = gate
        }
    }

    public typealias Handler = @Sendable (_ request: Received, _ count: Int) -> Reply

    private let handlers = NIOLockedValueBox<[String: Handler]>([:])
    /// Every gate a reply waited on: opened when the origin stops, so no handler is left waiting.
    private let gates = NIOLockedValueBox<[Gate]>([])
    private let received = NIOLockedValueBox<[Received]>([])
    private let task: Task<Void, any Error>
    public let port: Int

    public var base: String { "http://127.0.0.1:\(port)" }

    public func url(_ path: String, host: String = "127.0.0.1") -> URL { URL(string: "http://\(host):\(port)\(path)")! }

    /// Answers `path` with `handler`, called with the request and how many requests
    /// `path` has had (this one included).
    public func route(_ path: String, _ handler: @escaping Handler) {
        handlers.withLockedValue { $0[path] = handler }
    }

    /// Answers `path` with the same reply every time.
    public func serve(_ path: String, _ reply: Reply) {
        route(path) { _, _ in reply }
    }

    public func requests(_ path: String) -> [Received] {
        received.withLockedValue { $0.filter { $0.path == path } }
    }

    public func count(_ path: String) -> Int { requests(path).count }

    /// The paths of every request received, in the order they arrived.
    public var arrivalOrder: [String] { received.withLockedValue { $0.map(\.path) } }

    private init(task: Task<Void, any Error>, port: Int) {
        self.task = task
        self.port = port
    }

    public static func start() async throws -> TestOrigin {
        let box = OneShot<TestOrigin>()
        let (portStream, portContinuation) = AsyncStream<Int>.makeStream()
        let server = Server(
            childChannelSetup: HTTP1Channel(responder: { request, writer, _ in
                let origin = await box.wait()
                let (head, body) = try await origin.respond(to: request)
                try await writer.write(response: head, body: body)
            }),
            configuration: ServerConfiguration(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                portContinuation.yield(channel.localAddress?.port ?? 0)
                portContinuation.finish()
            },
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton,
            logger: Logger(label: "test-origin", factory: { _ in SwiftLogNoOpLogHandler() }))
        let task = Task { try await server.run() }
        var port = 0
        for await value in portStream { port = value }
        let origin = TestOrigin(task: task, port: port)
        box.set(origin)
        return origin
    }

    public func stop() async {
        for gate in gates.withLockedValue({ $0 }) { gate.open() }
        task.cancel()
        _ = await task.result
    }

    private func respond(to request: Request) async throws -> (HTTPResponse, ResponseBody) {
        var headers: [String: String] = [:]
        for field in request.headers {
            let name = field.name.canonicalName
            headers[name] = headers[name].map { $0 + ", " + field.value } ?? field.value
        }
        var incoming = Received(path: request.uri.path, headers: headers)
        incoming.method = request.method.rawValue
        if request.method != .get {
            incoming.body = Array((try await request.body.collect(upTo: 1 << 20)).readableBytesView)
        }
        let count = received.withLockedValue { list -> Int in
            list.append(incoming)
            return list.filter { $0.path == incoming.path }.count
        }
        guard let handler = handlers.withLockedValue({ $0[incoming.path] }) else {
            return (HTTPResponse(status: .notFound), ResponseBody())
        }
        let reply = handler(incoming, count)
        if let gate = reply.gate {
            gates.withLockedValue { $0.append(gate) }
            await gate.wait()
        }
        if reply.delay > 0 { try await Task.sleep(for: .milliseconds(Int(reply.delay * 1000))) }
        var fields = HTTPFields()
        for (name, value) in reply.headers {
            if let field = HTTPField.Name(name) { fields.append(HTTPField(name: field, value: value)) }
        }
        if fields[.contentLength] == nil && reply.status != 304 {
            fields[.contentLength] = String(reply.body.count)
        }
        return (
            HTTPResponse(status: HTTPResponse.Status(code: reply.status), headerFields: fields),
            ResponseBody(byteBuffer: ByteBuffer(bytes: reply.body))
        )
    }
}

/// A value set once and awaited by anyone.
public final class OneShot<Value: Sendable>: Sendable {
    private let state = NIOLockedValueBox<(value: Value?, waiters: [CheckedContinuation<Value, Never>])>((nil, []))

    public init() {}

    public func set(_ value: Value) {
        let waiters = state.withLockedValue { state -> [CheckedContinuation<Value, Never>] in
            state.value = value
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: value) }
    }

    public func wait() async -> Value {
        await withCheckedContinuation { continuation in
            let value = state.withLockedValue { state -> Value? in
                if state.value == nil { state.waiters.append(continuation) }
                return state.value
            }
            if let value { continuation.resume(returning: value) }
        }
    }
}

/// A gate the test opens: whoever waits on it goes on once it is open (at once afterwards).
public final class Gate: Sendable {
    private let state = NIOLockedValueBox<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    public init() {}

    /// Lets every waiter, present and future, go on.
    public func open() {
        let waiters = state.withLockedValue { state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// How many are waiting now.
    public var waiting: Int { state.withLockedValue { $0.waiters.count } }

    public func wait() async {
        await withCheckedContinuation { continuation in
            let open = state.withLockedValue { state -> Bool in
                if !state.open { state.waiters.append(continuation) }
                return state.open
            }
            if open { continuation.resume() }
        }
    }
}
