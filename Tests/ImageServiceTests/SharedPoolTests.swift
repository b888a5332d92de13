import Foundation
import NIOCore
import RasterImage
import TestSupport
import Testing

@testable import ImageService

@Suite("Waiting stays off NIO's shared blocking pool")
struct SharedPoolTests {
    @Test(
        "a local source is read and served while every thread of NIO's shared blocking pool is held",
        .timeLimit(.minutes(3)))
    func localReadsOnOwnThreads() async throws {
        // Given a shared pool held as lookups stuck on a silent name server would hold
        // it, until the request below has its answer (a read that needed that pool would
        // never get one: the test's time limit, not a request timeout that a busy machine
        // could also reach, tells the two apart)
        try await CachedResultHandlerTests.withService { service in
            // When a local source is asked for
            let reply = try await BusySharedPool.whileBusy {
                await service.answer(
                    path: "/insecure/w:20/plain/local:///a.png", accept: nil, conditions: Conditions())
            }
            // Then it is answered from the file
            guard case .image(let result) = reply else {
                Issue.record("no image: \(reply)")
                return
            }
            let image = try ImageDecoder().decode(.bytes(Array(buffer: result.body)))
            #expect(image.width == 20 && image.height == 15)
        }
    }
}
