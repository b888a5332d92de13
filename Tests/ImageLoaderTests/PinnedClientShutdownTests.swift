import AsyncHTTPClient
import Foundation
import ImageLoaderSupport
import RasterImage
import Synchronization
import TestSupport
import Testing

@testable import ImageLoader

@Suite("Shutdown of pinned clients")
struct PinnedClientShutdownTests {
    struct StepFailed: Error, Equatable { let step: Int }

    @Test("runEvery runs every step after a failure and rethrows the first error")
    func everyStepRuns() async throws {
        // Given four steps, the second and the fourth failing
        let ran = Mutex<[Int]>([])
        let steps: [() async throws -> Void] = (0..<4).map { index in
            {
                ran.withLock { $0.append(index) }
                if index % 2 == 1 { throw StepFailed(step: index) }
            }
        }
        // When they run, then the first failure is reported and every step ran, in order
        await #expect(throws: StepFailed(step: 1)) { try await runEvery(steps) }
        #expect(ran.withLock { $0 } == [0, 1, 2, 3])
        // And steps that all succeed throw nothing
        try await runEvery([{}, {}])
    }

    @Test("every pinned client and the resolver are shut down even when the first client's shutdown throws")
    func shutdownContinuesPastAFailure() async throws {
        // Given pinned clients, the oldest of them already shut down (its shutdown throws)
        let pinned = PinnedClients(HTTPDataLoader.Configuration())
        let clients = (0..<4).map { pinned.client(host: "host\($0).test", address: "127.0.0.1") }
        try await clients[0].shutdown()
        // When they are all shut down, then the error is reported
        await #expect(throws: HTTPClientError.alreadyShutdown) { try await pinned.shutdown() }
        // and every other client was shut down too (a second shutdown throws), and the resolver
        for client in clients.dropFirst() {
            await #expect(throws: HTTPClientError.alreadyShutdown) { try await client.shutdown() }
        }
        await #expect(throws: (any Error).self) { try await pinned.resolver.run { 1 } }
    }
}
