import Dispatch
import Foundation
import ImageLoaderSupport
import RasterImage
import TestSupport
import Testing

@testable import ImageService

/// Requests in flight for one result share its work, whatever their conditional header
/// fields: each gets its own answer (the image, or a 304 when its own validators match).
@Suite("Requests in flight for one result share one processing")
struct SharedProcessingTests {
    /// A decoder whose header-choosing thumbnails wait, on the worker thread, until the
    /// test lets them go; it counts them.
    final class HeldDecoder: ImageDecoding {
        private let state = Lock((entered: 0, holds: false))
        private let released = DispatchSemaphore(value: 0)
        let inner = ImageDecoder()

        var entered: Int { state.withLock { $0.entered } }

        /// From now on, each such thumbnail waits for a ``release()``.
        func hold() { state.withLock { $0.holds = true } }

        /// Lets one waiting (or the next) thumbnail go on.
        func release() { released.signal() }

        func decode(_ source: ImageSource, options: DecodingOptions) throws(ImageDecodingError) -> RasterImage {
            try inner.decode(source, options: options)
        }

        func info(_ source: ImageSource, options: DecodingOptions) throws(ImageDecodingError) -> ImageInfo {
            try inner.info(source, options: options)
        }

        func thumbnail(_ source: ImageSource, options: ThumbnailOptions) throws(ImageDecodingError) -> RasterImage {
            try inner.thumbnail(source, options: options)
        }

        func thumbnail(
            _ source: ImageSource, limits: DecodingLimits, options: (ImageInfo) throws -> ThumbnailOptions
        ) throws -> RasterImage {
            let holds = state.withLock { state in
                state.entered += 1
                return state.holds
            }
            if holds { released.wait() }
            return try inner.thumbnail(source, limits: limits, options: options)
        }
    }

    @Test("a plain request, one with the result's entity tag and one with another: one run, one decode, 200, 304, 200")
    func conditionalJoinsPlain() async throws {
        let decoder = HeldDecoder()
        var configuration = HeaderReadTests.configuration(HeaderReadTests.CountingDecoder())
        configuration.loader.decoder = decoder
        try await ProcessingReferenceTests.withService(configuration) { service in
            let path = "/insecure/rs:fit:64:64/plain/local:///photo.png"
            guard case .image(let first) = await service.answer(path: path, accept: nil, conditions: Conditions())
            else {
                Issue.record("no image for \(path)")
                return
            }
            let tag = try #require(first.meta.entityTag)
            let before = service.shared.counts
            decoder.hold()
            let plain = Task { await service.answer(path: path, accept: nil, conditions: Conditions()) }
            try await waitUntil("the plain request's decode") { decoder.entered == 2 }
            let matching = Task {
                await service.answer(path: path, accept: nil, conditions: Conditions(ifNoneMatch: tag))
            }
            let other = Task {
                await service.answer(path: path, accept: nil, conditions: Conditions(ifNoneMatch: "\"other\""))
            }
            try await waitUntil("both conditional requests joining the run") {
                service.shared.counts.joined == before.joined + 2
            }
            decoder.release()
            guard case .image(let image) = await plain.value else {
                Issue.record("the plain request got no image")
                return
            }
            #expect(image.body == first.body)
            guard case .notModified(let meta) = await matching.value else {
                Issue.record("the request with the result's tag got no 304")
                return
            }
            #expect(meta.entityTag == tag)
            guard case .image(let otherImage) = await other.value else {
                Issue.record("the request with another tag got no image")
                return
            }
            #expect(otherImage.body == first.body)
            #expect(decoder.entered == 2)
            #expect(service.shared.counts.started == before.started + 1)
        }
    }

    @Test("requests joining a run that ends in a 304 they cannot use share one second run, which makes the image")
    func secondRun() async throws {
        let decoder = HeldDecoder()
        var configuration = HeaderReadTests.configuration(HeaderReadTests.CountingDecoder())
        configuration.loader.decoder = decoder
        // One request at a time: the conditional request's run waits for its place while
        // the others join it.
        configuration.workers = 1
        configuration.fetchesAhead = 0
        try await ProcessingReferenceTests.withService(configuration) { service in
            let path = "/insecure/rs:fit:48:48/plain/local:///photo.png"
            guard case .image(let first) = await service.answer(path: path, accept: nil, conditions: Conditions())
            else {
                Issue.record("no image for \(path)")
                return
            }
            let tag = try #require(first.meta.entityTag)
            let before = service.shared.counts
            decoder.hold()
            let busy = Task {
                await service.answer(
                    path: "/insecure/rs:fit:40:40/plain/local:///logo.png", accept: nil, conditions: Conditions())
            }
            try await waitUntil("the other request's decode") { decoder.entered == 2 }
            let matching = Task {
                await service.answer(path: path, accept: nil, conditions: Conditions(ifNoneMatch: tag))
            }
            try await waitUntil("the conditional request's run") { service.shared.counts.started == before.started + 2 }
            let plain = Task { await service.answer(path: path, accept: nil, conditions: Conditions()) }
            let other = Task {
                await service.answer(path: path, accept: nil, conditions: Conditions(ifNoneMatch: "\"other\""))
            }
            try await waitUntil("two requests joining it") { service.shared.counts.joined == before.joined + 2 }
            decoder.release()
            guard case .image = await busy.value else {
                Issue.record("the other request got no image")
                return
            }
            guard case .notModified = await matching.value else {
                Issue.record("the request with the result's tag got no 304")
                return
            }
            // The first run decoded nothing; the second one, for both, decodes once.
            try await waitUntil("the second run's decode") { decoder.entered == 3 }
            try await waitUntil("the other joining the second run") {
                service.shared.counts.joined == before.joined + 3
            }
            decoder.release()
            for (name, task) in [("plain", plain), ("other tag", other)] {
                guard case .image(let image) = await task.value else {
                    Issue.record("the \(name) request got no image")
                    continue
                }
                #expect(image.body == first.body)
            }
            #expect(decoder.entered == 3)
            #expect(service.shared.counts.started == before.started + 3)
        }
    }
}
