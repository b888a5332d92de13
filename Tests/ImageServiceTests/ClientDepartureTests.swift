import NIOCore
import NIOEmbedded
import Testing

@testable import ImageService

@Suite("A client that leaves")
struct ClientDepartureTests {
    @Test("waiters end with 499 when the client goes, later ones at once; a cancelled waiter ends without it")
    func waiters() async throws {
        let departure = ClientDeparture()
        let early = Task { try await departure.left() }
        let cancelled = Task { try await departure.left() }
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(!departure.hasDeparted)
        departure.depart()
        await #expect(throws: ServiceError.clientClosed) { try await early.value }
        #expect(departure.hasDeparted)
        await #expect(throws: ServiceError.clientClosed) { try await departure.left() }
    }

    @Test("end-of-input and a closed connection count as departures; requests on the channel find the handler")
    func handler() async throws {
        for closing in [true, false] {
            let channel = EmbeddedChannel(handler: ClientDepartureHandler())
            let departure = try #require(
                try channel.pipeline.syncOperations.handler(type: ClientDepartureHandler.self).departure)
            #expect(!departure.hasDeparted)
            if closing {
                try await channel.close()
            } else {
                channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            }
            #expect(departure.hasDeparted)
        }
    }

    @Test("a request whose client has gone ends with 499, one that overruns its timeout with 504")
    func endings() async throws {
        let departure = ClientDeparture()
        let gone = Task {
            try await ImageService.withTimeout(.seconds(30), leavingWith: departure) {
                try await Task.sleep(for: .seconds(30))
            }
        }
        departure.depart()
        await #expect(throws: ServiceError.clientClosed) { try await gone.value }
        await #expect(throws: ServiceError.timedOut) {
            try await ImageService.withTimeout(.milliseconds(100), leavingWith: ClientDeparture()) {
                try await Task.sleep(for: .seconds(30))
            }
        }
        let value = try await ImageService.withTimeout(.seconds(30), leavingWith: ClientDeparture()) { 7 }
        #expect(value == 7)
    }
}
