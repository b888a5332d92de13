import Glibc
import ImageLoaderSupport

/// The marker walk of ``JPEGEighthImage/read(_:maxScans:maxWorkingBytes:)``: the
/// frame, the tables, the DC scans and the AC scans of 2x2 components decoded (T.81
/// G.1.2), every other scan stepped over. Any irregularity ends it with `nil`.
struct JPEGEighthParser {
    private let base: UnsafePointer<UInt8>
    private let count: Int
    private let maxScans: Int
    private let maxWorkingBytes: Int
    private var position = 0
    private var dcTables = [JPEGHuffmanTable?](repeating: nil, count: 4)
    private var acTables = [JPEGHuffmanTable?](repeating: nil, count: 4)
    private var quantTables = [[Int32]?](repeating: nil, count: 4)
    private var restartInterval = 0
    private var image: JPEGEighthImage?
    private var scans = 0

    init(base: UnsafePointer<UInt8>, count: Int, maxScans: Int, maxWorkingBytes: Int) {
        self.base = base
        self.count = count
        self.maxScans = maxScans
        self.maxWorkingBytes = maxWorkingBytes
    }

    private func byte(_ at: Int) -> Int { Int(base[at]) }
    private func word(_ at: Int) -> Int { Int(base[at]) << 8 | Int(base[at + 1]) }

    mutating func run() -> JPEGEighthImage? {
        guard count >= 4, byte(0) == 0xFF, byte(1) == 0xD8 else { return nil }
        position = 2
        while true {
            guard position < count, byte(position) == 0xFF else { return nil }
            while position < count && byte(position) == 0xFF { position += 1 }
            guard position < count else { return nil }
            let marker = byte(position)
            position += 1
            if marker == 0xD9 {
                // Every component must have had its first DC scan.
                guard let image, image.components.allSatisfy(\.started) else { return nil }
                return image
            }
            // Markers without a segment have no business here (RSTn outside a scan, TEM, SOI).
            guard marker != 0x01, !(0xD0...0xD8).contains(marker), position + 2 <= count else { return nil }
            let length = word(position)
            guard length >= 2, let segmentEnd = Checked.add(position, length), segmentEnd <= count else { return nil }
            let body = position + 2
            position = segmentEnd
            switch marker {
            case 0xC2:
                guard image == nil, let frame = frame(body, segmentEnd) else { return nil }
                image = frame
            case 0xC0, 0xC1, 0xC3, 0xC5...0xC7, 0xC9...0xCB, 0xCC, 0xCD...0xCF, 0xDC:
                // Sequential, lossless, hierarchical or arithmetic-coded, or a height given later.
                return nil
            case 0xC4:
                guard huffmanTables(body, segmentEnd) else { return nil }
            case 0xDB:
                guard quantTables(body, segmentEnd) else { return nil }
            case 0xDD:
                guard length == 4 else { return nil }
                restartInterval = word(body)
            case 0xDA:
                scans += 1
                guard scans <= maxScans, scan(body, segmentEnd) else { return nil }
            default:
                // APPn, COM and the like: nothing in them changes the pixels here.
                break
            }
        }
    }

    /// SOF2: 8-bit samples, one or three components, each sampled at the largest factor or half of it.
    private mutating func frame(_ body: Int, _ end: Int) -> JPEGEighthImage? {
        guard end - body >= 6 else { return nil }
        let (precision, height, width, componentCount) = (byte(body), word(body + 1), word(body + 3), byte(body + 5))
        guard precision == 8, width > 0, height > 0, componentCount == 1 || componentCount == 3,
            end - body == 6 + 3 * componentCount
        else { return nil }
        var specs: [(id: UInt8, h: Int, v: Int, table: Int)] = []
        for index in 0..<componentCount {
            let at = body + 6 + 3 * index
            let (id, h, v, table) = (UInt8(byte(at)), byte(at + 1) >> 4, byte(at + 1) & 15, byte(at + 2))
            guard (1...4).contains(h), (1...4).contains(v), table < 4, !specs.contains(where: { $0.id == id })
            else { return nil }
            specs.append((id, h, v, table))
        }
        // One component is one block an MCU, whatever its factors say (T.81 A.2.2).
        if componentCount == 1 { (specs[0].h, specs[0].v) = (1, 1) }
        let maxH = specs.map(\.h).max() ?? 1
        let maxV = specs.map(\.v).max() ?? 1
        guard specs.allSatisfy({ ($0.h == maxH || $0.h * 2 == maxH) && ($0.v == maxV || $0.v * 2 == maxV) }) else {
            return nil
        }
        let mcusWide = (width + 8 * maxH - 1) / (8 * maxH)
        let mcusHigh = (height + 8 * maxV - 1) / (8 * maxV)
        var components: [JPEGEighthImage.Component] = []
        var bytes = 0
        var dcBlocks = 0
        for spec in specs {
            // libjpeg's 2x2 IDCT at 1/8 for a component half the largest both ways.
            let side = spec.h * 2 == maxH && spec.v * 2 == maxV ? 2 : 1
            let (blocksWide, blocksHigh) = (mcusWide * spec.h, mcusHigh * spec.v)
            guard let blocks = Checked.multiply(blocksWide, blocksHigh),
                let kept = Checked.multiply(blocks, side == 2 ? 2 + 50 + 8 : 2),
                let total = Checked.add(bytes, kept), total <= maxWorkingBytes
            else { return nil }
            bytes = total
            let samplesWide = (width * spec.h + maxH - 1) / maxH
            let samplesHigh = (height * spec.v + maxV - 1) / maxV
            var component = JPEGEighthImage.Component(
                id: spec.id, horizontal: spec.h, vertical: spec.v, quantTable: spec.table, blocksWide: blocksWide,
                blocksHigh: blocksHigh, usedWide: (samplesWide + 7) / 8, usedHigh: (samplesHigh + 7) / 8,
                blockSide: side, dcStart: dcBlocks)
            dcBlocks += blocks
            if side == 2 {
                component.coefficients = [Int16](repeating: 0, count: blocks * 25)
                component.nonzero = [UInt64](repeating: 0, count: blocks)
            }
            components.append(component)
        }
        return JPEGEighthImage(
            width: width, height: height, maxHorizontal: maxH, maxVertical: maxV, components: components,
            dc: [Int16](repeating: 0, count: dcBlocks))
    }

    /// DHT: one or more tables.
    private mutating func huffmanTables(_ body: Int, _ end: Int) -> Bool {
        var at = body
        while at < end {
            guard end - at >= 17 else { return false }
            let (kind, slot) = (byte(at) >> 4, byte(at) & 15)
            guard kind <= 1, slot < 4 else { return false }
            var total = 0
            for index in 1...16 { total += byte(at + index) }
            guard total <= 256, end - at - 17 >= total,
                let table = JPEGHuffmanTable(counts: base + at + 1, symbols: base + at + 17, total: total)
            else { return false }
            if kind == 0 { dcTables[slot] = table } else { acTables[slot] = table }
            at += 17 + total
        }
        return true
    }

    /// DQT: one or more tables, kept in zigzag order.
    private mutating func quantTables(_ body: Int, _ end: Int) -> Bool {
        var at = body
        while at < end {
            let (precision, slot) = (byte(at) >> 4, byte(at) & 15)
            let size = precision == 0 ? 64 : 128
            guard precision <= 1, slot < 4, end - at - 1 >= size else { return false }
            quantTables[slot] = (0..<64).map { Int32(precision == 0 ? byte(at + 1 + $0) : word(at + 1 + 2 * $0)) }
            at += 1 + size
        }
        return true
    }

    /// SOS: a DC scan, or the AC scan of a 2x2 component, decoded; any other stepped over.
    private mutating func scan(_ body: Int, _ end: Int) -> Bool {
        guard var image, end - body >= 1 else { return false }
        let inScan = byte(body)
        guard (1...4).contains(inScan), end - body == 4 + 2 * inScan else { return false }
        var members: [(index: Int, dcTable: Int, acTable: Int)] = []
        for slot in 0..<inScan {
            let id = UInt8(byte(body + 1 + 2 * slot))
            let tables = byte(body + 2 + 2 * slot)
            guard let index = image.components.firstIndex(where: { $0.id == id }),
                !members.contains(where: { $0.index == index })
            else { return false }
            members.append((index, tables >> 4, tables & 15))
        }
        let parameters = body + 1 + 2 * inScan
        let (start, stop) = (byte(parameters), byte(parameters + 1))
        let (high, low) = (byte(parameters + 2) >> 4, byte(parameters + 2) & 15)
        guard high <= 13, low <= 13 else { return false }
        if start != 0 {
            // An AC scan: one component, a band within 1...63, its table defined.
            guard inScan == 1, start <= stop, stop <= 63, members[0].acTable < 4,
                let table = acTables[members[0].acTable], image.components[members[0].index].started
            else { return false }
            guard image.components[members[0].index].blockSide == 2 else { return skipEntropyData() }
            self.image = nil  // the planes are written in place
            let decoded = decodeAC(
                &image.components[members[0].index], table: table, band: start...stop, refining: high != 0,
                shift: low)
            self.image = image
            return decoded
        }
        guard stop == 0 else { return false }
        let blocksPerMCU = members.reduce(0) {
            $0 + (inScan == 1 ? 1 : image.components[$1.index].horizontal * image.components[$1.index].vertical)
        }
        guard blocksPerMCU <= JPEGEighthImage.maxBlocksPerMCU else { return false }
        var tables: [JPEGHuffmanTable] = []
        for member in members {
            if high == 0 {
                guard member.dcTable < 4, let table = dcTables[member.dcTable] else { return false }
                tables.append(table)
            }
            // The component's quantisation table is the one in force when its first scan starts.
            if !image.components[member.index].started {
                guard high == 0, let table = quantTables[image.components[member.index].quantTable] else {
                    return false
                }
                image.components[member.index].quantizers = table
            }
        }
        self.image = nil
        let decoded = decodeDC(&image, members: members.map(\.index), tables: tables, refining: high != 0, shift: low)
        self.image = image
        return decoded
    }

    /// Steps over a scan's entropy-coded data: to the next marker that is not a restart
    /// marker or a stuffed zero.
    private mutating func skipEntropyData() -> Bool {
        var at = position
        while at < count {
            guard let found = memchr(base + at, 0xFF, count - at) else { return false }
            at = base.distance(to: found.assumingMemoryBound(to: UInt8.self))
            var next = at + 1
            while next < count && base[next] == 0xFF { next += 1 }
            guard next < count else { return false }
            if base[next] == 0 || (0xD0...0xD7).contains(base[next]) {
                at = next + 1
                continue
            }
            position = next - 1
            return true
        }
        return false
    }

    /// Restart handling shared by the scans: before each MCU, a restart marker every
    /// `restartInterval` MCUs (numbered 0 to 7 in turn), after which `reset` runs.
    private struct Restarts {
        let interval: Int
        var untilNext: Int
        var seen = 0

        init(interval: Int) {
            self.interval = interval
            untilNext = interval
        }

        /// `false` when the marker due is not there; `restarted` set when one was taken.
        @inline(__always)
        mutating func beforeMCU(_ reader: inout JPEGBitReader, restarted: inout Bool) -> Bool {
            guard interval > 0 else { return true }
            if untilNext == 0 {
                guard reader.restart(seen & 7) else { return false }
                seen += 1
                untilNext = interval
                restarted = true
            }
            untilNext -= 1
            return true
        }
    }

    /// The end of a scan's data: no bits taken past it, a marker next.
    private mutating func finish(_ reader: JPEGBitReader) -> Bool {
        guard !reader.overran, let end = reader.endOfScan() else { return false }
        position = end
        return true
    }

    /// A DC scan (T.81 G.1.2.1): the first (a difference each block, Huffman-coded, to
    /// the component's running prediction), or a refinement (one bit each block).
    private mutating func decodeDC(
        _ image: inout JPEGEighthImage, members: [Int], tables: [JPEGHuffmanTable], refining: Bool, shift: Int
    ) -> Bool {
        var reader = JPEGBitReader(base: base, start: position, end: count)
        let interleaved = members.count > 1
        let first = image.components[members[0]]
        let mcusWide = interleaved ? first.blocksWide / first.horizontal : first.usedWide
        let mcusHigh = interleaved ? first.blocksHigh / first.vertical : first.usedHigh
        // Each block of an MCU: its member, and its place in the planes from the MCU's
        // corner; and each member's corner of the MCU at (0, 0) and its steps across and down.
        var blocks: [(member: Int, offset: Int)] = []
        var corners: [(start: Int, across: Int, down: Int)] = []
        for (member, index) in members.enumerated() {
            let component = image.components[index]
            let (h, v) = interleaved ? (component.horizontal, component.vertical) : (1, 1)
            corners.append((component.dcStart, h, v * component.blocksWide))
            for blockY in 0..<v {
                for blockX in 0..<h { blocks.append((member, blockY * component.blocksWide + blockX)) }
            }
        }
        let bit = Int16(truncatingIfNeeded: 1 << shift)
        var restarts = Restarts(interval: restartInterval)
        return image.dc.withUnsafeMutableBufferPointer { planes in
            blocks.withUnsafeBufferPointer { blocks in
                corners.withUnsafeBufferPointer { corners in
                    tables.withUnsafeBufferPointer { tables in
                        // Each member's prediction, and its corner of the current MCU.
                        withUnsafeTemporaryAllocation(of: Int32.self, capacity: members.count) { predictions in
                            withUnsafeTemporaryAllocation(of: Int.self, capacity: members.count) { origins in
                                predictions.initialize(repeating: 0)
                                for mcuY in 0..<mcusHigh {
                                    for mcuX in 0..<mcusWide {
                                        // Past the data, the rest would be made of zeros: libjpeg's, not this path's.
                                        var restarted = false
                                        guard !reader.overran, restarts.beforeMCU(&reader, restarted: &restarted)
                                        else { return false }
                                        if restarted { predictions.update(repeating: 0) }
                                        for (member, corner) in corners.enumerated() {
                                            origins[member] = corner.start + mcuY * corner.down + mcuX * corner.across
                                        }
                                        for block in blocks {
                                            let at = origins[block.member] + block.offset
                                            if refining {
                                                if reader.bits(1) != 0 { planes[at] |= bit }
                                            } else {
                                                let difference: Int32
                                                let entry = reader.decodeValue(tables[block.member])
                                                if entry != 0 {
                                                    // A DC symbol is a size alone (a run here: one over 16).
                                                    guard entry >> 8 & 15 == 0 else { return false }
                                                    difference = entry >> 16
                                                } else {
                                                    guard let size = reader.decode(tables[block.member]), size <= 16
                                                    else {
                                                        return false
                                                    }
                                                    difference = JPEGBitReader.extend(reader.bits(Int(size)), Int(size))
                                                }
                                                predictions[block.member] &+= difference
                                                planes[at] = Int16(
                                                    truncatingIfNeeded: predictions[block.member] &<< shift)
                                            }
                                        }
                                    }
                                }
                                return finish(reader)
                            }
                        }
                    }
                }
            }
        }
    }

    /// An AC scan of a 2x2 component (T.81 G.1.2.2, G.1.2.3): a band of coefficients in
    /// every block, with runs of blocks whose band is empty (EOB runs); a refinement adds
    /// a bit to each coefficient already nonzero and brings in new ones of magnitude
    /// `1 << shift`, as libjpeg's `decode_mcu_AC_first` and `decode_mcu_AC_refine` do.
    private mutating func decodeAC(
        _ component: inout JPEGEighthImage.Component, table: JPEGHuffmanTable, band: ClosedRange<Int>,
        refining: Bool, shift: Int
    ) -> Bool {
        var reader = JPEGBitReader(base: base, start: position, end: count)
        let shape = (usedWide: component.usedWide, usedHigh: component.usedHigh, blocksWide: component.blocksWide)
        let interval = restartInterval
        let decoded = component.coefficients.withUnsafeMutableBufferPointer { coefficients in
            component.nonzero.withUnsafeMutableBufferPointer { nonzero in
                JPEGEighthParser.acBlocks(
                    &reader, table: table, shape: shape, coefficients: coefficients, nonzero: nonzero, band: band,
                    refining: refining, shift: shift, restartInterval: interval)
            }
        }
        return decoded && finish(reader)
    }

    /// The blocks of an AC scan, their kept coefficients and nonzero masks written in place.
    private static func acBlocks(
        _ reader: inout JPEGBitReader, table: JPEGHuffmanTable, shape: (usedWide: Int, usedHigh: Int, blocksWide: Int),
        coefficients: UnsafeMutableBufferPointer<Int16>, nonzero: UnsafeMutableBufferPointer<UInt64>,
        band: ClosedRange<Int>, refining: Bool, shift: Int, restartInterval: Int
    ) -> Bool {
        JPEGEighthImage.slot.withUnsafeBufferPointer { slots in
            var blocks = AC.Blocks(slots: slots, coefficients: coefficients, nonzero: nonzero, band: band, shift: shift)
            var restarts = Restarts(interval: restartInterval)
            for blockY in 0..<shape.usedHigh {
                let row = blockY * shape.blocksWide
                for at in row..<(row + shape.usedWide) {
                    var restarted = false
                    guard !reader.overran, restarts.beforeMCU(&reader, restarted: &restarted) else { return false }
                    if restarted { blocks.endOfBands = 0 }
                    guard refining ? blocks.refine(at, &reader, table) : blocks.first(at, &reader, table) else {
                        return false
                    }
                }
            }
            return true
        }
    }
}

/// The AC scans of 2x2 components.
private enum AC {
    /// One AC scan's state across its blocks: the band, the EOB run, where coefficients go
    /// (plain values only, so that it is never copied with reference counting in the loops).
    struct Blocks {
        let slots: UnsafeBufferPointer<Int>
        let coefficients: UnsafeMutableBufferPointer<Int16>
        let nonzero: UnsafeMutableBufferPointer<UInt64>
        let lower: Int
        let upper: Int
        /// The band's zigzag indices as bits.
        let bandMask: UInt64
        let shift: Int
        let keptMask = JPEGEighthImage.keptMask
        let positive: Int32
        let negative: Int32
        /// Blocks left whose band is empty (or, refining, holds only corrections).
        var endOfBands = 0

        init(
            slots: UnsafeBufferPointer<Int>, coefficients: UnsafeMutableBufferPointer<Int16>,
            nonzero: UnsafeMutableBufferPointer<UInt64>, band: ClosedRange<Int>, shift: Int
        ) {
            self.slots = slots
            self.coefficients = coefficients
            self.nonzero = nonzero
            lower = band.lowerBound
            upper = band.upperBound
            bandMask = (upper == 63 ? ~0 : (1 << UInt64(upper + 1)) - 1) & ~((1 << UInt64(lower)) - 1)
            self.shift = shift
            positive = 1 << Int32(shift)
            negative = -1 << Int32(shift)
        }

        /// A first scan's block `at` (T.81 G.1.2.2): the band's coefficients, or a step of an EOB run.
        mutating func first(_ at: Int, _ reader: inout JPEGBitReader, _ table: JPEGHuffmanTable) -> Bool {
            if endOfBands > 0 {
                endOfBands -= 1
                return true
            }
            var mask = nonzero[at]
            let kept = at * 25
            var k = lower
            while k <= upper {
                let entry = reader.decodeValue(table)
                if entry != 0 {
                    k += Int(entry >> 8 & 15)
                    guard k <= upper else { return false }
                    mask |= 1 << UInt64(k)
                    let slot = slots[k]
                    if slot >= 0 {
                        coefficients[kept + slot] = Int16(truncatingIfNeeded: (entry >> 16) &<< Int32(shift))
                    }
                    k += 1
                    continue
                }
                guard let symbol = reader.decode(table) else { return false }
                let (run, size) = (Int(symbol >> 4), Int(symbol & 15))
                if size != 0 {
                    k += run
                    guard k <= upper else { return false }
                    let value = JPEGBitReader.extend(reader.bits(size), size) &<< Int32(shift)
                    mask |= 1 << UInt64(k)
                    let slot = slots[k]
                    if slot >= 0 { coefficients[kept + slot] = Int16(truncatingIfNeeded: value) }
                } else if run == 15 {
                    k += 15
                } else {
                    endOfBands = (1 << run) - 1 + Int(reader.bits(run))
                    break
                }
                k += 1
            }
            nonzero[at] = mask
            return true
        }

        /// A refinement's block `at` (T.81 G.1.2.3): a correction bit for each coefficient
        /// already nonzero, and new ones of magnitude `1 << shift`, in libjpeg's order.
        mutating func refine(_ at: Int, _ reader: inout JPEGBitReader, _ table: JPEGHuffmanTable) -> Bool {
            var mask = nonzero[at]
            let kept = at * 25
            var k = lower
            if endOfBands == 0 {
                while k <= upper {
                    var run: Int
                    var newValue: Int32 = 0
                    let entry = reader.decodeValue(table)
                    if entry != 0 {
                        // A symbol of size 1 and its sign bit at once (a larger size has
                        // a value of magnitude 2 or more, which a refinement cannot have).
                        guard (entry >> 16).magnitude == 1 else { return false }
                        run = Int(entry >> 8 & 15)
                        newValue = entry > 0 ? positive : negative
                    } else {
                        guard let symbol = reader.decode(table) else { return false }
                        run = Int(symbol >> 4)
                        let size = Int(symbol & 15)
                        if size != 0 {
                            guard size == 1 else { return false }
                            newValue = reader.bits(1) != 0 ? positive : negative
                        } else if run != 15 {
                            endOfBands = (1 << run) + Int(reader.bits(run))
                            break
                        }
                    }
                    // The coefficient `run` zeros on (nonzero ones corrected on the way).
                    let from = ~UInt64(0) << UInt64(k)
                    var zeros = ~mask & bandMask & from
                    while run > 0 && zeros != 0 {
                        zeros &= zeros - 1
                        run -= 1
                    }
                    guard zeros != 0 else {
                        // Fewer zeros than that: to the band's end, with nowhere to put a new value.
                        let positions = mask & bandMask & from
                        if positions != 0 { correct(positions, kept, &reader) }
                        guard newValue == 0 else { return false }
                        k = upper + 1
                        break
                    }
                    let place = zeros.trailingZeroBitCount
                    let positions = mask & from & ((1 << UInt64(place)) - 1)
                    if positions != 0 { correct(positions, kept, &reader) }
                    if newValue != 0 {
                        mask |= 1 << UInt64(place)
                        let slot = slots[place]
                        if slot >= 0 { coefficients[kept + slot] = Int16(truncatingIfNeeded: newValue) }
                    }
                    k = place + 1
                }
            }
            if endOfBands > 0 {
                // The rest of the band: only corrections.
                let positions = k <= upper ? mask & bandMask & (~UInt64(0) << UInt64(k)) : 0
                if positions != 0 { correct(positions, kept, &reader) }
                endOfBands -= 1
            }
            nonzero[at] = mask
            return true
        }

        /// A correction bit, in order, for each nonzero coefficient in `positions`: those
        /// the block keeps gain `1 << shift` in magnitude when theirs is set; the bits of
        /// the others are stepped over.
        @inline(__always)
        private func correct(_ positions: UInt64, _ kept: Int, _ reader: inout JPEGBitReader) {
            var rest = positions
            while rest != 0 {
                let keptRest = rest & keptMask
                guard keptRest != 0 else {
                    reader.skip(rest.nonzeroBitCount)
                    return
                }
                let place = keptRest.trailingZeroBitCount
                let before = rest & ((1 << UInt64(place)) - 1)
                if before != 0 { reader.skip(before.nonzeroBitCount) }
                rest &= ~before
                rest &= rest - 1
                guard reader.bits(1) != 0 else { continue }
                let index = kept + slots[place]
                let value = Int32(coefficients[index])
                if value & positive == 0 {
                    coefficients[index] = Int16(truncatingIfNeeded: value + (value >= 0 ? positive : negative))
                }
            }
        }
    }
}
