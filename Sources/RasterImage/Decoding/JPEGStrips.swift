import Dispatch
import Glibc
import ImageLoaderSupport

/// A baseline JPEG with restart markers, decoded in horizontal strips on several cores.
///
/// A restart marker resets the entropy decoder (T.81 F.1.2.3): each restart interval's
/// data is decoded without the ones before it. Where intervals start at the beginning
/// of an MCU row, the rows between two such starts are a JPEG of their own: the same
/// headers with the frame's height cut to those rows, the intervals' data (its restart
/// markers renumbered from 0) and an end marker. Each strip is one libjpeg decode, on
/// its own thread, at the same DCT scaling; they are put together in order.
///
/// The pixels are the whole decode's exactly: each strip also decodes the rows from the
/// boundary before it and to the boundary after it, which libjpeg's upsampling reads
/// across a strip's edge, and drops them. Only files this fully describes take this
/// path: one Huffman-coded sequential scan of every component, 8-bit, not CMYK, the
/// scan's intervals all present (the markers numbered in turn and as many as the frame
/// needs), no more than one boundary every few rows. Anything else is left to the one
/// whole decode, and so is everything from a strip whose decode fails or warns (damaged
/// data) on: the whole decode carries on from there and reports it as it always did.
struct JPEGStrips: @unchecked Sendable {
    // Safe to share between the strips' threads: every property is a constant, the
    // bytes behind `bytes` are only read, and they outlive the threads (decode(...)
    // returns only after DispatchQueue.concurrentPerform has).
    private let bytes: UnsafeRawBufferPointer
    /// Where the frame header's height is, and where the scan's data starts (after the
    /// SOS segment: everything before it is the strips' headers).
    private let heightField: Int
    private let dataStart: Int
    /// Each restart interval's data: from just after the marker before it, to the first
    /// 0xFF of the marker after it.
    private let starts: [Int]
    private let ends: [Int]
    private let mcuHeight: Int
    private let mcusHigh: Int
    private let imageHeight: Int
    /// MCU rows between rows at which an interval starts.
    private let step: Int
    /// MCUs across, and in an interval.
    private let mcusWide: Int
    private let interval: Int

    /// Pixels below which a file is decoded whole: a strip's own setup (its headers,
    /// libjpeg's tables, a thread) is worth it only beyond this.
    static let minimumPixels = 1 << 20

    /// Files of more restart intervals than this are decoded whole.
    static let maxIntervals = 1 << 20

    /// The file's strips, or `nil` when it does not take this path (see ``JPEGStrips``).
    /// `session` has read the header of the same bytes.
    static func plan(
        _ bytes: UnsafeRawBufferPointer, session: JPEGReadSession, minimumPixels: Int = JPEGStrips.minimumPixels
    ) -> JPEGStrips? {
        guard let layout = session.stripLayout,
            Checked.multiply(session.imageWidth, session.imageHeight).map({ $0 >= minimumPixels }) == true,
            let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
            let (heightField, dataStart) = headers(base, count: bytes.count),
            Int(base[heightField]) << 8 | Int(base[heightField + 1]) == session.imageHeight
        else { return nil }
        let (mcusWide, mcusHigh) = (layout.mcusWide, layout.mcusHigh)
        guard let total = Checked.multiply(mcusWide, mcusHigh), layout.interval > 0 else { return nil }
        // Rows at which an interval starts come every `lcm(interval, mcusWide) / mcusWide` rows.
        let step = layout.interval / gcd(layout.interval, mcusWide)
        guard step <= mcusHigh / 4 else { return nil }
        // The index of intervals holds 16 bytes each: at most a million (16 MiB).
        let intervals = (total + layout.interval - 1) / layout.interval
        guard intervals <= maxIntervals,
            let (starts, ends) = intervalData(base, from: dataStart, count: bytes.count, expected: intervals)
        else { return nil }
        return JPEGStrips(
            bytes: bytes, heightField: heightField, dataStart: dataStart, starts: starts, ends: ends,
            mcuHeight: layout.mcuHeight, mcusHigh: mcusHigh, imageHeight: session.imageHeight, step: step,
            mcusWide: mcusWide, interval: layout.interval)
    }

    private static func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }

    /// The frame header's height field and the end of the first SOS segment, walking the
    /// segments from SOI; `nil` for anything but a baseline or extended sequential frame.
    private static func headers(_ base: UnsafePointer<UInt8>, count: Int) -> (Int, Int)? {
        guard count >= 4, base[0] == 0xFF, base[1] == 0xD8 else { return nil }
        var position = 2
        var heightField: Int?
        while position + 4 <= count {
            guard base[position] == 0xFF else { return nil }
            while position < count && base[position] == 0xFF { position += 1 }
            guard position + 2 < count else { return nil }
            let marker = base[position]
            let length = Int(base[position + 1]) << 8 | Int(base[position + 2])
            guard length >= 2, let end = Checked.add(position + 1, length), end <= count else { return nil }
            switch marker {
            case 0xC0, 0xC1:
                guard heightField == nil, length >= 8 else { return nil }
                heightField = position + 4
            case 0xC2...0xCF where marker != 0xC4 && marker != 0xC8 && marker != 0xCC:
                return nil
            case 0xDA:
                guard let heightField else { return nil }
                return (heightField, end)
            case 0x01, 0xD0...0xD9:
                return nil
            default:
                break
            }
            position = end
        }
        return nil
    }

    /// Where each of the scan's `expected` intervals starts and ends, or `nil` unless the
    /// data holds that many, their markers numbered 0 to 7 in turn.
    private static func intervalData(
        _ base: UnsafePointer<UInt8>, from start: Int, count: Int, expected: Int
    ) -> ([Int], [Int])? {
        var starts = [start]
        var ends: [Int] = []
        var at = start
        while at < count {
            guard let found = memchr(base + at, 0xFF, count - at) else { return nil }
            let marker = base.distance(to: found.assumingMemoryBound(to: UInt8.self))
            var next = marker + 1
            while next < count && base[next] == 0xFF { next += 1 }
            guard next < count else { return nil }
            let code = base[next]
            if code == 0 {
                at = next + 1
                continue
            }
            ends.append(marker)
            guard (0xD0...0xD7).contains(code) else { break }
            guard Int(code) - 0xD0 == (starts.count - 1) & 7, starts.count < expected else { return nil }
            starts.append(next + 1)
            at = next + 1
        }
        guard starts.count == expected, ends.count == expected else { return nil }
        return (starts, ends)
    }

    /// Whether strips may decode into `target` at 1/`scale`: into a whole image's buffer,
    /// or reduced in the DCT. Rows streamed into a resize are never held at full size
    /// (nor would the strips gain there: the resize of every row would wait for them).
    static func mayDecode(scale: Int, into target: any RowTarget) -> Bool {
        scale > 1 || target is ImageBufferTarget
    }

    /// Decodes the file at 1/`scale` into `target` in strips on up to `cores` threads
    /// (`width` and `height`: the whole decode's output size). Returns how many rows,
    /// from the first, `target` has been given: all of them, or those of the strips
    /// before one that failed or warned, for the caller's whole decode to carry on from
    /// there. None either when the rows waiting for their turn could need more memory
    /// than `limits` allows.
    ///
    /// Into a whole image's buffer the strips write their own rows at once. Into a target
    /// that takes rows in order (a resize), each strip is decoded into a buffer of its
    /// own, and they are handed over in order once all are done, on the caller's thread.
    /// (Handing each over as soon as it is next in turn, from the thread that finished
    /// it, measured slower for large outputs: the resize then ran on a worker thread of
    /// the strips, on one core.)
    func decode(
        scale: Int, width: Int, height: Int, into target: any RowTarget, cores: Int, limits: DecodingLimits
    ) -> Int {
        guard JPEGStrips.mayDecode(scale: scale, into: target) else { return 0 }
        let strips = min(cores, mcusHigh / step)
        guard strips > 1 else { return 0 }
        // Straight into a whole image's rows; otherwise each strip into a buffer of its
        // own, held (within the limits) until they are handed over in order.
        let whole = (target as? ImageBufferTarget).map { Destination(base: $0.base, bytesPerRow: $0.bytesPerRow) }
        let bytesPerRow = whole?.bytesPerRow ?? width * 4
        if whole == nil {
            guard let size = Checked.multiply(bytesPerRow, height), size <= limits.maxWorkingBytes else { return 0 }
        }
        let handover = Handover(strips: strips, ownsBuffers: whole == nil)
        let plan = self
        DispatchQueue.concurrentPerform(iterations: strips) { index in
            let rows = plan.stripRows(index, of: strips)
            let own = plan.outputRows(rows, scale: scale, height: height)
            let buffer =
                whole.map { $0.base + own.lowerBound * $0.bytesPerRow }
                ?? .allocate(capacity: own.count * bytesPerRow)
            let decoded = plan.decodeStrip(
                rows: rows, own: own, scale: scale, width: width,
                into: Destination(base: buffer, bytesPerRow: bytesPerRow), limits: limits)
            handover.finished(index, rows: own, buffer: decoded ? buffer : nil)
            if !decoded && whole == nil { buffer.deallocate() }
        }
        return handover.handOver(to: target)
    }

    /// MCU rows of strip `index` of `count`: boundaries at whole steps, the strips as even
    /// as they can be.
    private func stripRows(_ index: Int, of count: Int) -> Range<Int> {
        let first = index * (mcusHigh / step) / count * step
        let last = index == count - 1 ? mcusHigh : (index + 1) * (mcusHigh / step) / count * step
        return first..<last
    }

    /// The output rows MCU rows `rows` make at 1/`scale` (the last strip's end: `height`).
    private func outputRows(_ rows: Range<Int>, scale: Int, height: Int) -> Range<Int> {
        (rows.lowerBound * mcuHeight / scale)..<(rows.upperBound == mcusHigh
            ? height : rows.upperBound * mcuHeight / scale)
    }

    /// The strips' rows: each strip's, once decoded on whichever thread, then all of them
    /// handed over in order by the caller's thread (where a resize may spread over the
    /// cores itself), up to a strip that failed.
    private final class Handover: @unchecked Sendable {
        // Safe to share: `done` is read and written only under `lock`.
        private let lock = Lock(())
        /// Each strip's output rows and where they are, once decoded (`nil`: failed).
        private var done: [(rows: Range<Int>, buffer: UnsafeMutablePointer<UInt8>?)?]
        /// Whether the rows are in buffers of the strips' own, to copy to the target and
        /// free (else they are the target's own rows already).
        private let ownsBuffers: Bool

        init(strips: Int, ownsBuffers: Bool) {
            done = Array(repeating: nil, count: strips)
            self.ownsBuffers = ownsBuffers
        }

        deinit {
            guard ownsBuffers else { return }
            for case (_, let buffer?)? in done { buffer.deallocate() }
        }

        /// Strip `index` is done: its output `rows` in `buffer` (owned from here on when
        /// the strips own their buffers), or failed (`nil`).
        func finished(_ index: Int, rows: Range<Int>, buffer: UnsafeMutablePointer<UInt8>?) {
            lock.withLock { _ in done[index] = (rows, buffer) }
        }

        /// Hands every strip's rows to `target` in order, up to the first that failed;
        /// the rows handed over.
        func handOver(to target: any RowTarget) -> Int {
            let strips = lock.withLock { _ in done }
            var given = 0
            for case (let rows, let buffer?)? in strips {
                guard rows.lowerBound == given else { break }
                let bytesPerRow = target.bytesPerRow
                var y = rows.lowerBound
                if !ownsBuffers { target.commit(y, count: rows.count) }
                while ownsBuffers && y < rows.upperBound {
                    let count = min(16, target.maxRows, rows.upperBound - y)
                    target.rows(y, count: count).update(
                        from: buffer + (y - rows.lowerBound) * bytesPerRow, count: count * bytesPerRow)
                    target.commit(y, count: count)
                    y += count
                }
                given = rows.upperBound
            }
            return given
        }
    }

    /// Where a strip's own rows go, `bytesPerRow` apart from its first.
    private struct Destination: @unchecked Sendable {
        // Safe to share: each strip writes only its own rows, and they are read only
        // after it has finished (by the thread handing them over, or by the caller once
        // DispatchQueue.concurrentPerform has returned).
        let base: UnsafeMutablePointer<UInt8>
        let bytesPerRow: Int
    }

    /// One strip, MCU rows `rows`, decoded with its neighbouring rows for context; its
    /// own output rows written to `destination`. `false` when anything is amiss.
    private func decodeStrip(
        rows: Range<Int>, own: Range<Int>, scale: Int, width: Int, into destination: Destination,
        limits: DecodingLimits
    ) -> Bool {
        let decoded = max(0, rows.lowerBound - step)..<min(mcusHigh, rows.upperBound + step)
        // The intervals of the decoded rows (their ends are interval starts, or the image's).
        let firstInterval = decoded.lowerBound * mcusWide / interval
        let lastInterval =
            decoded.upperBound == mcusHigh ? starts.count : (decoded.upperBound * mcusWide + interval - 1) / interval
        let stripHeight = min(imageHeight, decoded.upperBound * mcuHeight) - decoded.lowerBound * mcuHeight
        guard stripHeight > 0, stripHeight <= 0xFFFF, firstInterval < lastInterval else { return false }
        var data: [UInt8] = []
        data.reserveCapacity(
            dataStart + ends[lastInterval - 1] - starts[firstInterval] + 2 * (lastInterval - firstInterval) + 2)
        data += UnsafeRawBufferPointer(rebasing: bytes[0..<dataStart])
        data[heightField] = UInt8(stripHeight >> 8)
        data[heightField + 1] = UInt8(stripHeight & 0xFF)
        for index in firstInterval..<lastInterval {
            data += UnsafeRawBufferPointer(rebasing: bytes[starts[index]..<ends[index]])
            if index < lastInterval - 1 { data += [0xFF, 0xD0 + UInt8((index - firstInterval) & 7)] }
        }
        data += [0xFF, 0xD9]
        // Output rows: those of the rows before the strip's own are dropped.
        let skipped = (rows.lowerBound - decoded.lowerBound) * mcuHeight / scale
        do {
            return try data.withUnsafeBytes { memory in
                try ByteReader.withMemory(memory, limits: limits) { reader in
                    let session = try JPEGReadSession(reader, limits: limits)
                    try session.readHeader()
                    try session.start(scaleDenominator: scale)
                    guard session.outputWidth == width, skipped + own.count <= session.outputHeight else {
                        return false
                    }
                    let scratch = UnsafeMutablePointer<UInt8>.allocate(capacity: width * 4)
                    defer { scratch.deallocate() }
                    for _ in 0..<skipped {
                        guard try session.readRows(scratch, count: 1, bytesPerRow: width * 4) == 1 else { return false }
                    }
                    let count = own.count
                    let got = try session.readRows(
                        destination.base, count: count,
                        bytesPerRow: destination.bytesPerRow)
                    return got == count && session.warnings == 0
                }
            }
        } catch {
            return false
        }
    }
}
