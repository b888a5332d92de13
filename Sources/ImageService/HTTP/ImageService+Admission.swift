import ImageLoaderSupport
import NIOPosix

extension ImageService {
    /// Runs `body` once it may start (fetch, then wait for one of the loader's decoding
    /// threads, then process): waits in the queue, or fails at once with 429 when it is full.
    /// The queue-depth gauge is set when a request arrives, when it leaves the queue and
    /// when it ends (served, refused or cancelled), so it falls back to 0 as the queue
    /// drains; the active gauge when it takes its place and when it has given it back.
    func admitted<T: Sendable>(_ priority: PriorityHandle, _ body: () async throws -> T) async throws -> T {
        metrics.queue(admission.waiting)
        defer {
            metrics.queue(admission.waiting)
            metrics.active(admission.running)
            finishedWork.withLock { $0 &+= 1 }
        }
        return try await ImageService.run(in: admission, priority) {
            metrics.queue(admission.waiting)
            metrics.active(admission.running)
            return try await body()
        }
    }

    /// Whether no request holds or waits for a place (of the workers or of request
    /// bodies), and how many have ended since the service started: a process may do
    /// what costs the workers time (returning freed memory) when it is idle after work.
    package var activity: (idle: Bool, finished: Int) {
        let idle = admission.running == 0 && admission.waiting == 0 && bodies.running == 0 && bodies.waiting == 0
        return (idle, finishedWork.withLock { $0 })
    }

    /// Returns the memory malloc keeps free to the system
    /// (``MemoryAllocator/returnFreeMemory(onEveryThread:)``), the free tops of the
    /// arenas of the threads that decode and of NIO's event loops (which hold request
    /// and response bodies) included. Call it when ``activity`` says the service is idle.
    @discardableResult
    package func returnFreeMemory() async -> Bool {
        await MemoryAllocator.returnFreeMemory { [loader] cycle in
            await loader.runOnEveryWorker(cycle)
            for loop in MultiThreadedEventLoopGroup.singleton.makeIterator() {
                try? await loop.submit(cycle).get()
            }
        }
    }

    /// `body` in one of the places of request bodies; 429 when they and their queue are full.
    func withBodyPlace<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        try await ImageService.run(in: bodies, PriorityHandle(.normal), body)
    }

    /// `body` once `scheduler` has a place for it; 429 when its places and queue are full.
    private static func run<T: Sendable>(
        in scheduler: WorkScheduler, _ priority: PriorityHandle, _ body: () async throws -> T
    ) async throws -> T {
        do {
            return try await scheduler.run(priority: priority, body)
        } catch is WorkScheduler.Full {
            throw ServiceError.overloaded
        }
    }

    /// `body`, or 503 once the request's timeout passes, or 499 once `departure` says the
    /// client has gone (`body` is then cancelled).
    func withTimeout<T: Sendable>(
        leavingWith departure: ClientDeparture? = nil, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await ImageService.withTimeout(configuration.timeout, leavingWith: departure, body)
    }

    /// `body`, or 503 once `timeout` passes, or 499 once `departure` says the client has
    /// gone (`body` is then cancelled).
    static func withTimeout<T: Sendable>(
        _ timeout: Duration, leavingWith departure: ClientDeparture?,
        _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let stop = departure.map { departure in { @Sendable () async throws -> Never in try await departure.left() } }
        guard let value = try await untilDeadline(.now + timeout, orUntil: stop, body) else {
            throw ServiceError.timedOut
        }
        return value
    }
}
