import Foundation
import RasterImage
import Testing

@testable import ImageService

/// imgproxy's result sizes for every resizing type, each combination of sides of 0,
/// `enlarge` on and off, and sources larger (landscape and portrait), smaller and equal
/// to a 300x200 box. The expected sizes are literals, worked out from imgproxy's rules
/// (its `calcScale`, `calcSizes` and `cropImage`, transcribed by hand apart from the
/// service's code), not computed by the code under test.
@Suite("The service's geometry table, against imgproxy's sizes")
struct ServiceGeometryTests {
    struct Row: Sendable, CustomStringConvertible {
        let type: ProcessingOptions.ResizingType
        let width: Int
        let height: Int
        let enlarge: Bool
        let source: (Int, Int)
        let result: (Int, Int)

        init(
            _ type: ProcessingOptions.ResizingType, _ width: Int, _ height: Int, enlarge: Bool, source: (Int, Int),
            result: (Int, Int)
        ) {
            (self.type, self.width, self.height, self.enlarge, self.source, self.result) =
                (type, width, height, enlarge, source, result)
        }

        var options: ProcessingOptions {
            var options = ProcessingOptions()
            options.resizingType = type
            (options.width, options.height, options.enlarge) = (width, height, enlarge)
            return options
        }

        var description: String {
            "rs:\(type.rawValue):\(width):\(height):\(enlarge ? 1 : 0) of \(source.0)x\(source.1)"
        }
    }

    static let rows: [Row] = [
        Row(.fit, 300, 200, enlarge: false, source: (1200, 600), result: (300, 150)),
        Row(.fit, 300, 200, enlarge: false, source: (500, 1000), result: (100, 200)),
        Row(.fit, 300, 200, enlarge: false, source: (150, 120), result: (150, 120)),
        Row(.fit, 300, 200, enlarge: false, source: (300, 200), result: (300, 200)),
        Row(.fit, 300, 200, enlarge: true, source: (1200, 600), result: (300, 150)),
        Row(.fit, 300, 200, enlarge: true, source: (500, 1000), result: (100, 200)),
        Row(.fit, 300, 200, enlarge: true, source: (150, 120), result: (250, 200)),
        Row(.fit, 300, 200, enlarge: true, source: (300, 200), result: (300, 200)),
        Row(.fit, 0, 200, enlarge: false, source: (1200, 600), result: (400, 200)),
        Row(.fit, 0, 200, enlarge: false, source: (500, 1000), result: (100, 200)),
        Row(.fit, 0, 200, enlarge: false, source: (150, 120), result: (150, 120)),
        Row(.fit, 0, 200, enlarge: false, source: (300, 200), result: (300, 200)),
        Row(.fit, 0, 200, enlarge: true, source: (1200, 600), result: (400, 200)),
        Row(.fit, 0, 200, enlarge: true, source: (500, 1000), result: (100, 200)),
        Row(.fit, 0, 200, enlarge: true, source: (150, 120), result: (250, 200)),
        Row(.fit, 0, 200, enlarge: true, source: (300, 200), result: (300, 200)),
        Row(.fit, 300, 0, enlarge: false, source: (1200, 600), result: (300, 150)),
        Row(.fit, 300, 0, enlarge: false, source: (500, 1000), result: (300, 600)),
        Row(.fit, 300, 0, enlarge: false, source: (150, 120), result: (150, 120)),
        Row(.fit, 300, 0, enlarge: false, source: (300, 200), result: (300, 200)),
        Row(.fit, 300, 0, enlarge: true, source: (1200, 600), result: (300, 150)),
        Row(.fit, 300, 0, enlarge: true, source: (500, 1000), result: (300, 600)),
        Row(.fit, 300, 0, enlarge: true, source: (150, 120), result: (300, 240)),
        Row(.fit, 300, 0, enlarge: true, source: (300, 200), result: (300, 200)),
        Row(.fit, 0, 0, enlarge: false, source: (1200, 600), result: (1200, 600)),
        Row(.fit, 0, 0, enlarge: false, source: (500, 1000), result: (500, 1000)),
        Row(.fit, 0, 0, enlarge: false, source: (150, 120), result: (150, 120)),
        Row(.fit, 0, 0, enlarge: false, source: (300, 200), result: (300, 200)),
        Row(.fit, 0, 0, enlarge: true, source: (1200, 600), result: (1200, 600)),
        Row(.fit, 0, 0, enlarge: true, source: (500, 1000), result: (500, 1000)),
        Row(.fit, 0, 0, enlarge: true, source: (150, 120), result: (150, 120)),
        Row(.fit, 0, 0, enlarge: true, source: (300, 200), result: (300, 200)),
        Row(.fill, 300, 200, enlarge: false, source: (1200, 600), result: (300, 200)),
        Row(.fill, 300, 200, enlarge: false, source: (500, 1000), result: (300, 200)),
        Row(.fill, 300, 200, enlarge: false, source: (150, 120), result: (150, 120)),
        Row(.fill, 300, 200, enlarge: false, source: (300, 200), result: (300, 200)),
        Row(.fill, 300, 200, enlarge: true, source: (1200, 600), result: (300, 200)),
        Row(.fill, 300, 200, enlarge: true, source: (500, 1000), result: (300, 200)),
        Row(.fill, 300, 200, enlarge: true, source: (150, 120), result: (300, 200)),
        Row(.fill, 300, 200, enlarge: true, source: (300, 200), result: (300, 200)),
        Row(.fill, 0, 200, enlarge: false, source: (1200, 600), result: (400, 200)),
        Row(.fill, 0, 200, enlarge: false, source: (500, 1000), result: (100, 200)),
        Row(.fill, 0, 200, enlarge: false, source: (150, 120), result: (150, 120)),
        Row(.fill, 0, 200, enlarge: false, source: (300, 200), result: (300, 200)),
        Row(.fill, 0, 200, enlarge: true, source: (1200, 600), result: (400, 200)),
        Row(.fill, 0, 200, enlarge: true, source: (500, 1000), result: (100, 200)),
        Row(.fill, 0, 200, enlarge: true, source: (150, 120), result: (250, 200)),
        Row(.fill, 0, 200, enlarge: true, source: (300, 200), result: (300, 200)),
        Row(.fill, 300, 0, enlarge: false, source: (1200, 600), result: (300, 150)),
        Row(.fill, 300, 0, enlarge: false, source: (500, 1000), result: (300, 600)),
        Row(.fill, 300, 0, enlarge: false, source: (150, 120), result: (150, 120)),
        Row(.fill, 300, 0, enlarge: false, source: (300, 200), result: (300, 200)),
        Row(.fill, 300, 0, enlarge: true, source: (1200, 600), result: (300, 150)),
        Row(.fill, 300, 0, enlarge: true, source: (500, 1000), result: (300, 600)),
        Row(.fill, 300, 0, enlarge: true, source: (150, 120), result: (300, 240)),
        Row(.fill, 300, 0, enlarge: true, source: (300, 200), result: (300, 200)),
        Row(.fill, 0, 0, enlarge: false, source: (1200, 600), result: (1200, 600)),
        Row(.fill, 0, 0, enlarge: false, source: (500, 1000), result: (500, 1000)),
        Row(.fill, 0, 0, enlarge: false, source: (150, 120), result: (150, 120)),
        Row(.fill, 0, 0, enlarge: false, source: (300, 200), result: (300, 200)),
        Row(.fill, 0, 0, enlarge: true, source: (1200, 600), result: (1200, 600)),
        Row(.fill, 0, 0, enlarge: true, source: (500, 1000), result: (500, 1000)),
        Row(.fill, 0, 0, enlarge: true, source: (150, 120), result: (150, 120)),
        Row(.fill, 0, 0, enlarge: true, source: (300, 200), result: (300, 200)),
        Row(.fillDown, 300, 200, enlarge: false, source: (1200, 600), result: (300, 200)),
        Row(.fillDown, 300, 200, enlarge: false, source: (500, 1000), result: (300, 200)),
        Row(.fillDown, 300, 200, enlarge: false, source: (150, 120), result: (150, 100)),
        Row(.fillDown, 300, 200, enlarge: false, source: (300, 200), result: (300, 200)),
        Row(.fillDown, 300, 200, enlarge: true, source: (1200, 600), result: (300, 200)),
        Row(.fillDown, 300, 200, enlarge: true, source: (500, 1000), result: (300, 200)),
        Row(.fillDown, 300, 200, enlarge: true, source: (150, 120), result: (300, 200)),
        Row(.fillDown, 300, 200, enlarge: true, source: (300, 200), result: (300, 200)),
        Row(.fillDown, 0, 200, enlarge: false, source: (1200, 600), result: (400, 200)),
        Row(.fillDown, 0, 200, enlarge: false, source: (500, 1000), result: (100, 200)),
        Row(.fillDown, 0, 200, enlarge: false, source: (150, 120), result: (150, 120)),
        Row(.fillDown, 0, 200, enlarge: false, source: (300, 200), result: (300, 200)),
        Row(.fillDown, 0, 200, enlarge: true, source: (1200, 600), result: (400, 200)),
        Row(.fillDown, 0, 200, enlarge: true, source: (500, 1000), result: (100, 200)),
        Row(.fillDown, 0, 200, enlarge: true, source: (150, 120), result: (250, 200)),
        Row(.fillDown, 0, 200, enlarge: true, source: (300, 200), result: (300, 200)),
        Row(.fillDown, 300, 0, enlarge: false, source: (1200, 600), result: (300, 150)),
        Row(.fillDown, 300, 0, enlarge: false, source: (500, 1000), result: (300, 600)),
        Row(.fillDown, 300, 0, enlarge: false, source: (150, 120), result: (150, 120)),
        Row(.fillDown, 300, 0, enlarge: false, source: (300, 200), result: (300, 200)),
        Row(.fillDown, 300, 0, enlarge: true, source: (1200, 600), result: (300, 150)),
        Row(.fillDown, 300, 0, enlarge: true, source: (500, 1000), result: (300, 600)),
        Row(.fillDown, 300, 0, enlarge: true, source: (150, 120), result: (300, 240)),
        Row(.fillDown, 300, 0, enlarge: true, source: (300, 200), result: (300, 200)),
        Row(.fillDown, 0, 0, enlarge: false, source: (1200, 600), result: (1200, 600)),
        Row(.fillDown, 0, 0, enlarge: false, source: (500, 1000), result: (500, 1000)),
        Row(.fillDown, 0, 0, enlarge: false, source: (150, 120), result: (150, 120)),
        Row(.fillDown, 0, 0, enlarge: false, source: (300, 200), result: (300, 200)),
        Row(.fillDown, 0, 0, enlarge: true, source: (1200, 600), result: (1200, 600)),
        Row(.fillDown, 0, 0, enlarge: true, source: (500, 1000), result: (500, 1000)),
        Row(.fillDown, 0, 0, enlarge: true, source: (150, 120), result: (150, 120)),
        Row(.fillDown, 0, 0, enlarge: true, source: (300, 200), result: (300, 200)),
        Row(.force, 300, 200, enlarge: false, source: (1200, 600), result: (300, 200)),
        Row(.force, 300, 200, enlarge: false, source: (500, 1000), result: (300, 200)),
        Row(.force, 300, 200, enlarge: false, source: (150, 120), result: (150, 100)),
        Row(.force, 300, 200, enlarge: false, source: (300, 200), result: (300, 200)),
        Row(.force, 300, 200, enlarge: true, source: (1200, 600), result: (300, 200)),
        Row(.force, 300, 200, enlarge: true, source: (500, 1000), result: (300, 200)),
        Row(.force, 300, 200, enlarge: true, source: (150, 120), result: (300, 200)),
        Row(.force, 300, 200, enlarge: true, source: (300, 200), result: (300, 200)),
        Row(.force, 0, 200, enlarge: false, source: (1200, 600), result: (1200, 200)),
        Row(.force, 0, 200, enlarge: false, source: (500, 1000), result: (500, 200)),
        Row(.force, 0, 200, enlarge: false, source: (150, 120), result: (90, 120)),
        Row(.force, 0, 200, enlarge: false, source: (300, 200), result: (300, 200)),
        Row(.force, 0, 200, enlarge: true, source: (1200, 600), result: (1200, 200)),
        Row(.force, 0, 200, enlarge: true, source: (500, 1000), result: (500, 200)),
        Row(.force, 0, 200, enlarge: true, source: (150, 120), result: (150, 200)),
        Row(.force, 0, 200, enlarge: true, source: (300, 200), result: (300, 200)),
        Row(.force, 300, 0, enlarge: false, source: (1200, 600), result: (300, 600)),
        Row(.force, 300, 0, enlarge: false, source: (500, 1000), result: (300, 1000)),
        Row(.force, 300, 0, enlarge: false, source: (150, 120), result: (150, 60)),
        Row(.force, 300, 0, enlarge: false, source: (300, 200), result: (300, 200)),
        Row(.force, 300, 0, enlarge: true, source: (1200, 600), result: (300, 600)),
        Row(.force, 300, 0, enlarge: true, source: (500, 1000), result: (300, 1000)),
        Row(.force, 300, 0, enlarge: true, source: (150, 120), result: (300, 120)),
        Row(.force, 300, 0, enlarge: true, source: (300, 200), result: (300, 200)),
        Row(.force, 0, 0, enlarge: false, source: (1200, 600), result: (1200, 600)),
        Row(.force, 0, 0, enlarge: false, source: (500, 1000), result: (500, 1000)),
        Row(.force, 0, 0, enlarge: false, source: (150, 120), result: (150, 120)),
        Row(.force, 0, 0, enlarge: false, source: (300, 200), result: (300, 200)),
        Row(.force, 0, 0, enlarge: true, source: (1200, 600), result: (1200, 600)),
        Row(.force, 0, 0, enlarge: true, source: (500, 1000), result: (500, 1000)),
        Row(.force, 0, 0, enlarge: true, source: (150, 120), result: (150, 120)),
        Row(.force, 0, 0, enlarge: true, source: (300, 200), result: (300, 200)),
        Row(.auto, 300, 200, enlarge: false, source: (1200, 600), result: (300, 200)),
        Row(.auto, 300, 200, enlarge: false, source: (500, 1000), result: (100, 200)),
        Row(.auto, 300, 200, enlarge: false, source: (150, 120), result: (150, 120)),
        Row(.auto, 300, 200, enlarge: false, source: (300, 200), result: (300, 200)),
        Row(.auto, 300, 200, enlarge: true, source: (1200, 600), result: (300, 200)),
        Row(.auto, 300, 200, enlarge: true, source: (500, 1000), result: (100, 200)),
        Row(.auto, 300, 200, enlarge: true, source: (150, 120), result: (300, 200)),
        Row(.auto, 300, 200, enlarge: true, source: (300, 200), result: (300, 200)),
        Row(.auto, 0, 200, enlarge: false, source: (1200, 600), result: (400, 200)),
        Row(.auto, 0, 200, enlarge: false, source: (500, 1000), result: (100, 200)),
        Row(.auto, 0, 200, enlarge: false, source: (150, 120), result: (150, 120)),
        Row(.auto, 0, 200, enlarge: false, source: (300, 200), result: (300, 200)),
        Row(.auto, 0, 200, enlarge: true, source: (1200, 600), result: (400, 200)),
        Row(.auto, 0, 200, enlarge: true, source: (500, 1000), result: (100, 200)),
        Row(.auto, 0, 200, enlarge: true, source: (150, 120), result: (250, 200)),
        Row(.auto, 0, 200, enlarge: true, source: (300, 200), result: (300, 200)),
        Row(.auto, 300, 0, enlarge: false, source: (1200, 600), result: (300, 150)),
        Row(.auto, 300, 0, enlarge: false, source: (500, 1000), result: (300, 600)),
        Row(.auto, 300, 0, enlarge: false, source: (150, 120), result: (150, 120)),
        Row(.auto, 300, 0, enlarge: false, source: (300, 200), result: (300, 200)),
        Row(.auto, 300, 0, enlarge: true, source: (1200, 600), result: (300, 150)),
        Row(.auto, 300, 0, enlarge: true, source: (500, 1000), result: (300, 600)),
        Row(.auto, 300, 0, enlarge: true, source: (150, 120), result: (300, 240)),
        Row(.auto, 300, 0, enlarge: true, source: (300, 200), result: (300, 200)),
        Row(.auto, 0, 0, enlarge: false, source: (1200, 600), result: (1200, 600)),
        Row(.auto, 0, 0, enlarge: false, source: (500, 1000), result: (500, 1000)),
        Row(.auto, 0, 0, enlarge: false, source: (150, 120), result: (150, 120)),
        Row(.auto, 0, 0, enlarge: false, source: (300, 200), result: (300, 200)),
        Row(.auto, 0, 0, enlarge: true, source: (1200, 600), result: (1200, 600)),
        Row(.auto, 0, 0, enlarge: true, source: (500, 1000), result: (500, 1000)),
        Row(.auto, 0, 0, enlarge: true, source: (150, 120), result: (150, 120)),
        Row(.auto, 0, 0, enlarge: true, source: (300, 200), result: (300, 200)),
    ]

    @Test("every row's thumbnail options give imgproxy's size", arguments: rows)
    func sizes(_ row: Row) throws {
        let thumbnail = row.options.thumbnailOptions(
            sourceWidth: row.source.0, sourceHeight: row.source.1, maxResultSide: 8192)
        let size = try thumbnail.resultSize(sourceWidth: row.source.0, sourceHeight: row.source.1)
        #expect(size.width == row.result.0 && size.height == row.result.1, "\(row): \(size)")
    }

    @Test("the thumbnails made are that size, pixels and all")
    func madeThumbnails() async throws {
        // One row per resizing type and side of 0 on each source (without enlarge): the
        // size the geometry promises is the size the decoder makes. (The decodes run on a
        // thread of their own, not on one of the two the suite's async tests share.)
        let rows = Self.rows.filter { !$0.enlarge }
        let made = try await withCheckedThrowingContinuation {
            (continuation: CheckedContinuation<[(Int, Int)], any Error>) in
            Thread.detachNewThread {
                continuation.resume(
                    with: Result {
                        var images: [String: [UInt8]] = [:]
                        // Rows whose options come out the same on one source make one thumbnail.
                        var sizes: [String: [ThumbnailOptions: (Int, Int)]] = [:]
                        return try rows.map { row -> (Int, Int) in
                            let key = "\(row.source.0)x\(row.source.1)"
                            let options = row.options.thumbnailOptions(
                                sourceWidth: row.source.0, sourceHeight: row.source.1, maxResultSide: 8192)
                            if let size = sizes[key]?[options] { return size }
                            let image: [UInt8]
                            if let made = images[key] {
                                image = made
                            } else {
                                let pixels = [UInt8](repeating: 90, count: row.source.0 * row.source.1 * 4)
                                guard
                                    let raster = RasterImage(width: row.source.0, height: row.source.1, pixels: pixels)
                                else { throw CocoaError(.featureUnsupported) }
                                image = try PNGEncoder().encode(raster)
                                images[key] = image
                            }
                            let thumbnail = try ImageDecoder().thumbnail(.bytes(image), options: options)
                            sizes[key, default: [:]][options] = (thumbnail.width, thumbnail.height)
                            return (thumbnail.width, thumbnail.height)
                        }
                    })
            }
        }
        for (row, size) in zip(rows, made) {
            #expect(size.0 == row.result.0 && size.1 == row.result.1, "\(row): \(size)")
        }
    }

    @Test("a result past the limit is scaled down to it, as imgproxy's max_result_dimension: implied or asked for")
    func limit() throws {
        // 20000x10000 scaled to at most 8192 a side keeps 2:1.
        for (width, dpr) in [(0, 1.0), (9000, 1.0), (5000, 2.0), (100_000, 1.0)] {
            var options = ProcessingOptions()
            (options.width, options.dpr, options.enlarge) = (width, dpr, true)
            #expect(try size(options, 20_000, 10_000) == (8192, 4096), "w:\(width)/dpr:\(dpr)")
        }
        // Padding counts toward the limit: 8192 wide with 100 on each side is scaled by 8192/8392.
        var padded = ProcessingOptions()
        (padded.width, padded.padding.left, padded.padding.right) = (8192, 100, 100)
        let plan = ImgproxyGeometry(options: padded, sourceWidth: 20_000, sourceHeight: 10_000, maxResultSide: 8192)
        let padding = plan.padding(padded)
        #expect(plan.scaledWidth + padding.left + padding.right <= 8192)
    }

    @Test("dpr multiplies the box, as far as enlarge allows")
    func dpr() throws {
        var options = ProcessingOptions()
        (options.resizingType, options.width, options.height, options.dpr) = (.fit, 300, 200, 2)
        // 2000x1000 at 300x200, dpr 2: 600x300. A 500x250 source cannot grow: 500x250.
        #expect(try size(options, 2000, 1000) == (600, 300))
        #expect(try size(options, 500, 250) == (500, 250))
        options.enlarge = true
        #expect(try size(options, 500, 250) == (600, 300))
    }

    private func size(_ options: ProcessingOptions, _ width: Int, _ height: Int) throws -> (Int, Int) {
        try options.thumbnailOptions(sourceWidth: width, sourceHeight: height, maxResultSide: 8192)
            .resultSize(sourceWidth: width, sourceHeight: height)
    }
}
