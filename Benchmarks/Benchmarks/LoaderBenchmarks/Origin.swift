import Foundation
import Hummingbird
import Logging
import Synchronization

/// An HTTP origin on 127.0.0.1 serving fixed bodies from memory, fresh for an hour,
/// counting the requests it answers.
final class Origin: Sendable {
    let port: Int
    private let counter: RequestCounter
    private let task: Task<Void, any Error>

    var requests: Int { counter.value }

    static func start(serving bodies: [String: [UInt8]]) async throws -> Origin {
        let counter = RequestCounter()
        let router = Router()
        router.get("**") { request, _ -> Response in
            counter.increment()
            guard let body = bodies[request.uri.path] else { return Response(status: .notFound) }
            let headers: HTTPFields = [
                .contentType: "image/jpeg", .cacheControl: "max-age=3600", .eTag: "\"\(body.count)\"",
            ]
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
        }
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                continuation.yield(channel.localAddress?.port ?? 0)
                continuation.finish()
            },
            logger: Logger(label: "origin", factory: { _ in SwiftLogNoOpLogHandler() }))
        let task = Task { try await app.runService(gracefulShutdownSignals: []) }
        var port = 0
        for await value in ports { port = value }
        try expect(port != 0, "the origin did not start")
        return Origin(port: port, counter: counter, task: task)
    }

    private init(port: Int, counter: RequestCounter, task: Task<Void, any Error>) {
        self.port = port
        self.counter = counter
        self.task = task
    }
}

final class RequestCounter: Sendable {
    private let count = Mutex(0)

    var value: Int { count.withLock { $0 } }

    func increment() { count.withLock { $0 += 1 } }
}
