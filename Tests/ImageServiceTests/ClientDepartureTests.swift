import NIOCore
import NIOEmbedded
import Testing

@testable import ImageService

@Suite("A client that leaves")
struct ClientDepartureTests {
    @Test("waiters return when the client goes, later ones at once; a cancelled waiter returns without it")
    func waiters() async throws {
        let departure = ClientDeparture()
        let early = Task { await departure.wait() }
        let cancelled = Task { await departure.wait() }
        cancelled.cancel()
        await cancelled.value
        #expect(!departure.hasDeparted)
        departure.depart()
        await early.value
        #expect(departure.hasDeparted)
        await departure.wait()
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
            try await ImageService.run(
                { try await Task.sleep(for: .seconds(30)) }, timeout: .seconds(30), departure: departure)
        }
        departure.depart()
        await #expect(throws: ServiceError.clientClosed) { try await gone.value }
        await #expect(throws: ServiceError.timedOut) {
            try await ImageService.run(
                { try await Task.sleep(for: .seconds(30)) }, timeout: .milliseconds(100), departure: ClientDeparture())
        }
        let value = try await ImageService.run({ 7 }, timeout: .seconds(30), departure: ClientDeparture())
        #expect(value == 7)
    }
}
