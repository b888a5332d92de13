import Foundation
import ImageLoaderSupport
import Testing

@testable import RasterImage

/// Baseline JPEGs with restart markers decoded in strips on several cores
/// (``JPEGStrips``), checked against libjpeg's one whole decode of the same file. The
/// fixtures come from `Fixtures/generate-restart.sh`.
@Suite("Baseline JPEGs decoded in strips between restart markers")
struct JPEGStripsTests {
    /// Every sampling, markers every row, every 4 MCUs and every 7 (a boundary every 7
    /// rows), an odd size whose last MCU row is partly outside the image.
    static let files = [
        "rst-420-rows.jpg", "rst-420-4mcu.jpg", "rst-420-7mcu.jpg", "rst-420-odd.jpg", "rst-422.jpg", "rst-440.jpg",
        "rst-444.jpg", "rst-grey.jpg",
    ]

    static func bytes(_ name: String) -> [UInt8] { Fixtures.bytes("restart/" + name) }

    /// libjpeg's whole decode at 1/`scale` (the reference), or the strips' into `target`
    /// (`nil` when the file does not take that path); RGBA rows.
    static func decode(_ bytes: [UInt8], scale: Int, strips cores: Int?, buffered: Bool = false) throws -> [UInt8]? {
        try bytes.withUnsafeBytes { memory in
            try ByteReader.withMemory(memory, limits: DecodingLimits()) { reader in
                let session = try JPEGReadSession(reader, limits: DecodingLimits())
                try session.readHeader()
                let plan = cores.flatMap { _ in JPEGStrips.plan(memory, session: session, minimumPixels: 0) }
                try session.start(scaleDenominator: scale)
                let (width, height) = (session.outputWidth, session.outputHeight)
                var pixels = [UInt8](repeating: 0, count: width * height * 4)
                let done = try pixels.withUnsafeMutableBufferPointer { buffer in
                    let whole = ImageBufferTarget(buffer.baseAddress!, bytesPerRow: width * 4)
                    let target: any RowTarget = buffered ? CopyingTarget(whole, maxRows: 5) : whole
                    guard let cores else {
                        try session.readRows(into: target, allowsTruncatedData: false)
                        return true
                    }
                    guard let plan else { return false }
                    let given = plan.decode(
                        scale: scale, width: width, height: height, into: target, cores: cores,
                        limits: DecodingLimits())
                    return given == height
                }
                return done ? pixels : nil
            }
        }
    }

    @Test(
        "the strips make libjpeg's whole decode exactly, at every DCT scale and for any number of cores",
        arguments: files)
    func sameAsWholeDecode(_ name: String) throws {
        let bytes = Self.bytes(name)
        for scale in [1, 2, 4, 8] {
            let whole = try #require(try Self.decode(bytes, scale: scale, strips: nil))
            for cores in [2, 3, 8] {
                let same = try Self.decode(bytes, scale: scale, strips: cores) == whole
                #expect(same, "\(name) at 1/\(scale) in \(cores) strips")
            }
            // A target that takes a few rows at a time (a resizer) gets them in order; at
            // full size it is left to the whole decode (never held whole for a resize).
            let buffered = try Self.decode(bytes, scale: scale, strips: 4, buffered: true)
            let same = buffered == (scale == 1 ? nil : whole)
            #expect(same, "\(name) buffered at 1/\(scale)")
        }
    }

    @Test("files without restart markers, and progressive ones, are decoded whole")
    func otherFilesDecodedWhole() throws {
        for bytes in [Self.bytes("plain-420-large.jpg"), Fixtures.bytes("progressive/prog-420-restart.jpg")] {
            #expect(try Self.decode(bytes, scale: 1, strips: 2) == nil)
        }
    }

    @Test("a file whose intervals are not all there (truncated, a marker out of turn) is decoded whole")
    func incompleteIntervalsDecodedWhole() throws {
        let bytes = Self.bytes("rst-420-rows.jpg")
        #expect(try Self.decode(Array(bytes.prefix(bytes.count * 2 / 3)) + [0xFF, 0xD9], scale: 1, strips: 2) == nil)
        var renumbered = bytes
        let marker = try #require(Self.restartMarkers(bytes).dropFirst(5).first)
        renumbered[marker + 1] = 0xD0 + (renumbered[marker + 1] - 0xD0 + 1) % 8
        #expect(try Self.decode(renumbered, scale: 1, strips: 2) == nil)
    }

    /// The rows the strips hand to a target that takes them in order, and the output's height.
    static func rowsGiven(_ bytes: [UInt8], scale: Int, cores: Int) throws -> (Int, Int) {
        try bytes.withUnsafeBytes { memory in
            try ByteReader.withMemory(memory, limits: DecodingLimits()) { reader in
                let session = try JPEGReadSession(reader, limits: DecodingLimits())
                try session.readHeader()
                let plan = try #require(JPEGStrips.plan(memory, session: session, minimumPixels: 0))
                try session.start(scaleDenominator: scale)
                let (width, height) = (session.outputWidth, session.outputHeight)
                var pixels = [UInt8](repeating: 0, count: width * height * 4)
                let given = pixels.withUnsafeMutableBufferPointer { buffer in
                    let target = CopyingTarget(
                        ImageBufferTarget(buffer.baseAddress!, bytesPerRow: width * 4), maxRows: 5)
                    return plan.decode(
                        scale: scale, width: width, height: height, into: target, cores: cores,
                        limits: DecodingLimits())
                }
                return (given, height)
            }
        }
    }

    /// The same image, or failures for the same reason.
    static func expectSame(
        _ one: Result<RasterImage, any Error>, _ other: Result<RasterImage, any Error>, _ what: String
    ) {
        switch (one, other) {
        case (.success(let first), .success(let second)): #expect(second == first, "\(what)")
        case (.failure(let first as ImageDecodingError), .failure(let second as ImageDecodingError)):
            #expect(second.reason == first.reason, "\(what)")
        default: Issue.record("\(what): \(one) against \(other)")
        }
    }

    /// Where each restart marker (its 0xFF) is in the scan's data.
    static func restartMarkers(_ bytes: [UInt8]) -> [Int] {
        guard let scan = (0..<(bytes.count - 1)).first(where: { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xDA }) else {
            return []
        }
        return (scan..<(bytes.count - 1)).filter { bytes[$0] == 0xFF && (0xD0...0xD7).contains(bytes[$0 + 1]) }
    }

    @Test("a lone decode and thumbnail of a large file spread over the cores give the one-core result")
    func decoderUsesStrips() throws {
        let bytes = Self.bytes("rst-420-large.jpg")
        let taken = try bytes.withUnsafeBytes { memory in
            try ByteReader.withMemory(memory, limits: DecodingLimits()) { reader in
                let session = try JPEGReadSession(reader, limits: DecodingLimits())
                try session.readHeader()
                return JPEGStrips.plan(memory, session: session) != nil
            }
        }
        #expect(taken, "1024x1024 is large enough for the path")
        let decoder = ImageDecoder()
        let alone = try ResizeParallelism.withCores(1) { try decoder.decode(.bytes(bytes)) }
        let spread = try ResizeParallelism.withCores(4) { try decoder.decode(.bytes(bytes)) }
        #expect(spread == alone)
        // 64 and 200 px reduce it in the DCT (1/8, 1/2), 1000 px streams it whole.
        for size in [64, 200, 1000] {
            let options = ThumbnailOptions(maxPixelSize: size)
            let one = try ResizeParallelism.withCores(1) { try decoder.thumbnail(.bytes(bytes), options: options) }
            let four = try ResizeParallelism.withCores(4) { try decoder.thumbnail(.bytes(bytes), options: options) }
            #expect(four == one, "\(size) px")
        }
    }

    @Test("damaged data in an interval gives what the one whole decode gives")
    func damagedIntervalAsWholeDecode() throws {
        let bytes = Self.bytes("rst-420-large.jpg")
        let markers = Self.restartMarkers(bytes)
        let decoder = ImageDecoder()
        // Bytes of one interval overwritten, in the first strip and in the last.
        for interval in [3, markers.count - 4] {
            var damaged = bytes
            for offset in 4..<40 { damaged[markers[interval] + offset] = UInt8(truncatingIfNeeded: offset &* 37) }
            let alone = Result { try ResizeParallelism.withCores(1) { try decoder.decode(.bytes(damaged)) } }
            let spread = Result { try ResizeParallelism.withCores(4) { try decoder.decode(.bytes(damaged)) } }
            Self.expectSame(alone, spread, "decode, interval \(interval)")
            // A thumbnail takes the strips before the damaged one, then the whole decode
            // from there on: the rows are handed over once each, in order.
            let options = ThumbnailOptions(maxPixelSize: 64)
            let small = Result {
                try ResizeParallelism.withCores(1) { try decoder.thumbnail(.bytes(damaged), options: options) }
            }
            let smallSpread = Result {
                try ResizeParallelism.withCores(4) { try decoder.thumbnail(.bytes(damaged), options: options) }
            }
            Self.expectSame(small, smallSpread, "thumbnail, interval \(interval)")
            // Damage in the last strip: the ones before it were handed over.
            if interval > markers.count / 2 {
                let (given, height) = try Self.rowsGiven(damaged, scale: 8, cores: 4)
                #expect(given > 0 && given < height, "\(given) of \(height) rows")
            }
        }
    }
}

/// A target that takes `maxRows` rows at a time into a scratch buffer, as a resizer does,
/// and copies them on to a whole image's buffer as they are committed.
private final class CopyingTarget: RowTarget {
    let whole: ImageBufferTarget
    let maxRows: Int
    var bytesPerRow: Int { whole.bytesPerRow }
    private let scratch: UnsafeMutablePointer<UInt8>
    private var next = 0

    init(_ whole: ImageBufferTarget, maxRows: Int) {
        self.whole = whole
        self.maxRows = maxRows
        scratch = .allocate(capacity: whole.bytesPerRow * maxRows)
    }

    deinit { scratch.deallocate() }

    func rows(_ y: Int, count: Int) -> UnsafeMutablePointer<UInt8> { scratch }

    func commit(_ y: Int, count: Int) {
        if y != next || count > maxRows { Issue.record("rows \(y) and \(count) on, after \(next)") }
        next = y + count
        whole.rows(y, count: count).update(from: scratch, count: count * bytesPerRow)
    }
}
