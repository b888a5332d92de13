import Foundation
import NIOCore
import RasterImage
import TestOrigin
import Testing

@testable import ImageService

@Suite("Waiting stays off NIO's shared blocking pool")
struct SharedPoolTests {
    @Test(
        "a local source is read and served while every thread of NIO's shared blocking pool is held",
        .timeLimit(.minutes(1)))
    func localReadsOnOwnThreads() async throws {
        // Given a service whose requests give up after 5 s, and a shared pool held as
        // lookups stuck on a silent name server would hold it
        try await CachedResultHandlerTests.withService(timeout: .seconds(5)) { service in
            // When a local source is asked for
            let reply = try await BusySharedPool.whileBusy {
                await service.process(
                    path: "/insecure/w:20/plain/local:///a.png", accept: nil, conditions: Conditions())
            }
            // Then it is answered from the file (a 504 if the read waited for the held pool)
            guard case .image(let result) = reply else {
                Issue.record("no image: \(reply)")
                return
            }
            let image = try ImageDecoder().decode(.bytes(Array(buffer: result.body)))
            #expect(image.width == 20 && image.height == 15)
        }
    }
}
