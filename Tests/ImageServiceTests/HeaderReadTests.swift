import Foundation
import ImageLoaderSupport
import RasterImage
import Testing

@testable import ImageService

/// How often the service reads a source's header, through a decoder that counts what
/// it is asked and hands every call to ``ImageDecoder``.
@Suite("The service reads a source's header once")
struct HeaderReadTests {
    struct Counts: Equatable, Sendable {
        var infos = 0
        var thumbnails = 0
        var chosenThumbnails = 0
        var decodes = 0
    }

    struct CountingDecoder: ImageDecoding {
        let counts = Lock(Counts())
        let inner = ImageDecoder()

        func decode(_ source: ImageSource, options: DecodingOptions) throws(ImageDecodingError) -> RasterImage {
            counts.withLock { $0.decodes += 1 }
            return try inner.decode(source, options: options)
        }

        func info(_ source: ImageSource, options: DecodingOptions) throws(ImageDecodingError) -> ImageInfo {
            counts.withLock { $0.infos += 1 }
            return try inner.info(source, options: options)
        }

        func thumbnail(_ source: ImageSource, options: ThumbnailOptions) throws(ImageDecodingError) -> RasterImage {
            counts.withLock { $0.thumbnails += 1 }
            return try inner.thumbnail(source, options: options)
        }

        func thumbnail(
            _ source: ImageSource, limits: DecodingLimits, options: (ImageInfo) throws -> ThumbnailOptions
        ) throws -> RasterImage {
            counts.withLock { $0.chosenThumbnails += 1 }
            return try inner.thumbnail(source, limits: limits, options: options)
        }

        /// The counts so far, set back to zero.
        func take() -> Counts {
            counts.withLock { counts in
                defer { counts = Counts() }
                return counts
            }
        }
    }

    /// The reference tests' settings with the counting decoder and no result cache (every
    /// request reaches the source).
    static func configuration(_ decoder: CountingDecoder) -> ImageService.Configuration {
        var configuration = ProcessingReferenceTests.configuration()
        configuration.loader.decoder = decoder
        configuration.resultCacheBytes = 0
        return configuration
    }

    @Test(
        "one pass, the general path, an animation, a format by alpha, by Accept: one decode that reads the header itself",
        arguments: [
            ("/insecure/rs:fit:64:64/plain/local:///photo.png", "image/webp"),
            ("/insecure/rs:fit:64:64/plain/local:///logo.png", nil),
            ("/insecure/bl:2/c:40:40/rs:fill:32:32/plain/local:///oriented.png", nil),
            ("/insecure/rs:fit:32:32/plain/local:///animation.gif@webp", nil),
            ("/insecure/t:10/rs:fit:32:32/plain/local:///framed.png@png", nil),
        ] as [(String, String?)])
    func processed(_ path: String, _ accept: String?) async throws {
        let decoder = CountingDecoder()
        try await ProcessingReferenceTests.withService(Self.configuration(decoder)) { service in
            let reply = await service.answer(path: path, accept: accept, conditions: Conditions())
            guard case .image(let result) = reply else {
                Issue.record("\(path): \(reply)")
                return
            }
            #expect(decoder.take() == Counts(chosenThumbnails: 1))
            let made = try ImageDecoder().info(.bytes(Array(result.body.readableBytesView)))
            #expect(made.contentType == result.meta.contentType)
        }
    }

    @Test("a 304 reads nothing; a source passed through is read once, for its limits and type, and not for its 304")
    func notModifiedAndRaw() async throws {
        let decoder = CountingDecoder()
        try await ProcessingReferenceTests.withService(Self.configuration(decoder)) { service in
            for path in [
                "/insecure/rs:fit:64:64/plain/local:///logo.png", "/insecure/rs:fit:64:64/plain/local:///photo.png",
            ] {
                guard case .image(let first) = await service.answer(path: path, accept: nil, conditions: Conditions())
                else {
                    Issue.record("no image for \(path)")
                    return
                }
                #expect(decoder.take() == Counts(chosenThumbnails: 1))
                let reply = await service.answer(
                    path: path, accept: nil, conditions: Conditions(ifNoneMatch: first.meta.entityTag))
                guard case .notModified(let meta) = reply else {
                    Issue.record("no 304 for \(path): \(reply)")
                    return
                }
                #expect(meta.entityTag == first.meta.entityTag)
                #expect(decoder.take() == Counts())
                let changed = await service.answer(
                    path: path, accept: nil, conditions: Conditions(ifNoneMatch: "\"other\""))
                guard case .image(let again) = changed else {
                    Issue.record("no image for \(path) with another tag: \(changed)")
                    return
                }
                #expect(again.meta.entityTag == first.meta.entityTag && again.body == first.body)
                #expect(decoder.take() == Counts(chosenThumbnails: 1))
            }
            let raw = await service.answer(
                path: "/insecure/raw:1/plain/local:///photo.png", accept: nil, conditions: Conditions())
            guard case .image(let passed) = raw else {
                Issue.record("raw: \(raw)")
                return
            }
            #expect(passed.meta.contentType == "image/png")
            #expect(decoder.take() == Counts(infos: 1))
            let rawAgain = await service.answer(
                path: "/insecure/raw:1/plain/local:///photo.png", accept: nil,
                conditions: Conditions(ifNoneMatch: passed.meta.entityTag))
            guard case .notModified = rawAgain else {
                Issue.record("no 304 for raw: \(rawAgain)")
                return
            }
            #expect(decoder.take() == Counts())
        }
    }

    @Test("a 304 carries the validators and Cache-Control, and no Content-Type or Content-Disposition (as imgproxy's)")
    func notModifiedDisposition() async throws {
        let decoder = CountingDecoder()
        try await ProcessingReferenceTests.withService(Self.configuration(decoder)) { service in
            for path in [
                "/insecure/fn:holiday/rs:fit:64:64/plain/local:///photo.png@webp",
                "/insecure/fn:holiday/rs:fit:64:64/plain/local:///photo.png",
            ] {
                guard case .image(let first) = await service.answer(path: path, accept: nil, conditions: Conditions())
                else {
                    Issue.record("no image for \(path)")
                    return
                }
                let name = try #require(first.meta.contentDisposition)
                #expect(name.contains("holiday."))
                let reply = await service.answer(
                    path: path, accept: nil, conditions: Conditions(ifNoneMatch: first.meta.entityTag))
                guard case .notModified(let meta) = reply else {
                    Issue.record("no 304 for \(path): \(reply)")
                    return
                }
                let headers = Reply.notModified(meta).response.headers
                #expect(headers[.contentDisposition] == nil && headers[.contentType] == nil)
                #expect(headers[.eTag] == first.meta.entityTag && headers[.lastModified] == first.meta.lastModified)
                #expect(headers[.cacheControl] == "max-age=31536000, public")
            }
        }
    }

    @Test("an upload is decoded once, its format chosen from Accept and its header; its pixel limit is a 413")
    func upload() async throws {
        let decoder = CountingDecoder()
        var configuration = Self.configuration(decoder)
        let body = try Array(
            Data(contentsOf: ProcessingReferenceTests.root.appendingPathComponent("sources/logo.png")))
        try await ProcessingReferenceTests.withService(configuration) { service in
            let reply = await service.upload(optionsPath: "rs:fit:32:32", body: body, headers: [:], contentType: nil)
            guard case .upload(let bytes, let contentType) = reply else {
                Issue.record("upload: \(reply)")
                return
            }
            let made = try ImageDecoder().info(.bytes(bytes))
            #expect(contentType == made.contentType)
            #expect(made.hasAlpha == (try ImageDecoder().info(.bytes(body)).hasAlpha))
            #expect(decoder.take() == Counts(chosenThumbnails: 1))
        }
        let size = try ImageDecoder().info(.bytes(body))
        configuration.maxSourcePixels = size.width * size.height - 1
        try await ProcessingReferenceTests.withService(configuration) { service in
            let reply = await service.upload(optionsPath: "rs:fit:32:32", body: body, headers: [:], contentType: nil)
            guard case .failure(let error) = reply else {
                Issue.record("upload past the pixel limit: \(reply)")
                return
            }
            #expect(error.status == 422)
        }
    }
}
