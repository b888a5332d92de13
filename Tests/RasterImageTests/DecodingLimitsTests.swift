import Foundation
import RasterImage
import Testing

/// The limits, checked from headers before allocation.
@Suite("Decoding limits")
struct DecodingLimitTests {
    func decoder(_ change: (inout DecodingLimits) -> Void, frames: FrameSelection = .all) -> ImageDecoder {
        var limits = DecodingLimits()
        change(&limits)
        return ImageDecoder(options: DecodingOptions(limits: limits, frames: frames))
    }

    @Test("input larger than the limit", arguments: Fixtures.onePerFormat)
    func inputSize(_ fixture: Fixture) {
        let error = expectDecodingError { _ = try decoder { $0.maxInputBytes = 100 }.decode(.file(path: fixture.path)) }
        #expect(error?.reason == .inputTooLarge(bytes: fixture.bytes.count, limit: 100))
    }

    @Test("more pixels than the limit", arguments: Fixtures.onePerFormat)
    func pixels(_ fixture: Fixture) {
        let limit = fixture.width * fixture.height - 1
        let error = expectDecodingError {
            _ = try decoder { $0.maxPixelsPerFrame = limit }.decode(.bytes(fixture.bytes))
        }
        #expect(error?.reason == .tooManyPixels(width: fixture.width, height: fixture.height, limit: limit))
    }

    @Test("more frames than the limit", arguments: ["gif-animation", "webp-animation", "tiff-multipage"])
    func frames(_ name: String) {
        let error = expectDecodingError {
            _ = try decoder { $0.maxFrames = 2 }.decode(.bytes(Fixtures.named(name).bytes))
        }
        #expect(error?.reason == .tooManyFrames(limit: 2))
    }

    @Test("more decoded bytes than the limit", arguments: ["gif-animation", "webp-animation", "tiff-multipage"])
    func totalBytes(_ name: String) {
        let fixture = Fixtures.named(name)
        let limit = fixture.width * fixture.height * 4 * 2
        let error = expectDecodingError { _ = try decoder { $0.maxTotalBytes = limit }.decode(.bytes(fixture.bytes)) }
        guard case .tooManyBytes(_, let reported) = error?.reason else {
            Issue.record("got \(String(describing: error))")
            return
        }
        #expect(reported == limit)
        // One frame fits.
        #expect(throws: Never.self) {
            try decoder({ $0.maxTotalBytes = limit }, frames: .first).decode(.bytes(fixture.bytes))
        }
    }

    @Test("a progressive JPEG with more scans than the limit")
    func scans() {
        let error = expectDecodingError {
            _ = try decoder { $0.maxProgressiveScans = 2 }.decode(.bytes(Fixtures.named("jpeg-progressive").bytes))
        }
        #expect(error?.reason == .tooManyScans(limit: 2))
    }

    @Test(
        "a frame the image does not have",
        arguments: [
            ("png-rgb8", 1), ("gif-animation", 5), ("webp-animation", 4), ("tiff-multipage", 3), ("jpeg-420", 1),
            ("bmp-24bit", 1),
        ])
    func frameOutOfRange(_ name: String, _ count: Int) {
        let error = expectDecodingError {
            _ = try decoder({ _ in }, frames: .index(9)).decode(.bytes(Fixtures.named(name).bytes))
        }
        #expect(error?.reason == .frameOutOfRange(index: 9, count: count))
    }
}
