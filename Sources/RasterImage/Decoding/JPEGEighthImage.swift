import ImageLoaderSupport

/// A progressive JPEG decoded at 1/8 of its size from only the scans that size needs.
///
/// At 1/8, libjpeg reduces each block with a scaled IDCT: 1x1 for a component at full
/// resolution (it reads nothing but the block's DC coefficient) and 2x2 for a component
/// subsampled by two both ways, such as 4:2:0 chroma (it reads the coefficients whose
/// row and column are 0, 1, 3, 5 or 7). A progressive file keeps every DC coefficient in
/// its first scans and each component's AC coefficients in scans of their own, so
/// this reads the DC scans and the AC scans of the 2x2 components only, and steps over
/// the rest (the luma's AC scans, most of the file) without decoding them. There is no
/// whole-image coefficient buffer (128 bytes a block in libjpeg): 2 bytes a block, and 58
/// for the blocks of 2x2 components. The pixels are libjpeg's own 1/8 decode's, exactly:
/// its IDCTs, its upsampling and its YCbCr factors, reproduced.
///
/// It reads only what it fully understands: 8-bit Huffman-coded progressive files (SOF2)
/// of one or three components whose sampling factors are the largest or half of it.
/// Anything else, and anything irregular (a table a scan refers to that is missing, data
/// that ends early or runs over a marker, a restart marker out of order, more scans than
/// the limit allows), makes ``read(_:maxScans:maxWorkingBytes:)`` return `nil`, and the
/// file goes to libjpeg, which decodes it or fails with the errors it always gave. Every
/// length and count read from the file is checked before it is used; the work is linear
/// in the file's size.
struct JPEGEighthImage {
    struct Component {
        let id: UInt8
        let horizontal: Int
        let vertical: Int
        let quantTable: Int
        /// The quantisation table (zigzag order), taken when the component's first scan
        /// starts, as libjpeg takes it.
        var quantizers: [Int32] = []
        var started: Bool { !quantizers.isEmpty }
        /// Blocks across and down, in whole MCUs of an interleaved scan.
        let blocksWide: Int
        let blocksHigh: Int
        /// The blocks that hold the image's samples (what a scan of this component alone covers).
        let usedWide: Int
        let usedHigh: Int
        /// Output samples a block makes at 1/8: 1, or 2 each way for a component subsampled
        /// by two both ways.
        let blockSide: Int
        /// Where the component's blocks start in ``JPEGEighthImage/dc``.
        let dcStart: Int
        /// For 2x2 components: the 25 coefficients the 2x2 IDCT reads, each block's in a
        /// row (``JPEGEighthImage/slot``), and which of each block's 64 are nonzero
        /// (zigzag order), which refinement scans need.
        var coefficients: [Int16] = []
        var nonzero: [UInt64] = []
    }

    let width: Int
    let height: Int
    let maxHorizontal: Int
    let maxVertical: Int
    var components: [Component]
    /// The quantised DC coefficient of each block, as libjpeg keeps it (16 bits): each
    /// component's blocks in turn, row by row.
    var dc: [Int16]

    /// The size at 1/8, as libjpeg rounds it.
    var outputWidth: Int { (width + 7) / 8 }
    var outputHeight: Int { (height + 7) / 8 }

    /// The most blocks one MCU of an interleaved scan may hold (T.81 B.2.3).
    static let maxBlocksPerMCU = 10

    /// The natural (row-major) position of each zigzag index.
    static let naturalOrder: [Int] = [
        0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14,
        21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53,
        60, 61, 54, 47, 55, 62, 63,
    ]

    /// The rows and columns the 2x2 IDCT reads.
    static let reducedLines = [0, 1, 3, 5, 7]

    /// For each zigzag index, its place among the 25 coefficients a 2x2 block keeps, or -1.
    static let slot: [Int] = naturalOrder.map { natural in
        guard let row = reducedLines.firstIndex(of: natural / 8), let column = reducedLines.firstIndex(of: natural % 8)
        else { return -1 }
        return row * 5 + column
    }

    /// The zigzag indices that have a slot, as bits.
    static let keptMask: UInt64 = slot.indices.reduce(0) { slot[$1] >= 0 ? $0 | 1 << UInt64($1) : $0 }

    /// The 1/8 image of a progressive JPEG in `bytes`, or `nil` when this path does not
    /// read the file (see ``JPEGEighthImage``). `maxScans` bounds the scans as libjpeg's
    /// limit does; what is kept of the coefficients stays within `maxWorkingBytes`.
    static func read(_ bytes: UnsafeRawBufferPointer, maxScans: Int, maxWorkingBytes: Int) -> JPEGEighthImage? {
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return nil }
        var parser = JPEGEighthParser(
            base: base, count: bytes.count, maxScans: maxScans, maxWorkingBytes: maxWorkingBytes)
        return parser.run()
    }
}

extension JPEGEighthImage {
    /// How the components make colour, as libjpeg decided it from the header.
    enum ColorSpace {
        case grey, ycbcr, rgb
    }

    /// The 1/8 image, RGBA, written into `target` a few rows at a time.
    func writeRows(into target: any RowTarget, colorSpace: ColorSpace) {
        let (width, height) = (outputWidth, outputHeight)
        // One allocation for every component's plane of samples, then a row for each
        // component that has half the output's samples along a row.
        let shapes = components.map { (wide: $0.usedWide * $0.blockSide, high: $0.usedHigh * $0.blockSide) }
        let planesSize = shapes.reduce(0) { $0 + $1.wide * $1.high }
        let storage = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: planesSize + components.count * width)
        defer { storage.deallocate() }
        storage.initialize(repeating: 0)
        var planes: [Plane] = []
        var next = storage.baseAddress!
        for (component, shape) in zip(components, shapes) {
            JPEGEighthImage.samples(component, dc: dc, into: next, wide: shape.wide)
            planes.append(Plane(samples: next, wide: shape.wide, high: shape.high))
            next += shape.wide * shape.high
        }
        let rows = UnsafeMutablePointer<UnsafePointer<UInt8>>.allocate(capacity: max(components.count, 1))
        defer { rows.deallocate() }
        var y = 0
        while y < height {
            let count = min(16, target.maxRows, height - y)
            let out = target.rows(y, count: count)
            for row in 0..<count {
                for index in components.indices {
                    rows[index] = upsampledRow(
                        y + row, of: index, plane: planes[index], spread: next + index * width, width: width)
                }
                JPEGEighthImage.convert(rows, colorSpace, into: out + row * target.bytesPerRow, width: width)
            }
            target.commit(y, count: count)
            y += count
        }
    }

    /// A component's samples at 1/8, `wide` a row.
    private struct Plane {
        let samples: UnsafeMutablePointer<UInt8>
        let wide: Int
        let high: Int
    }

    /// A component's samples at 1/8, written to `plane` (`wide` a row): each block's DC
    /// as `jpeg_idct_1x1` makes it, or the 2x2 that `jpeg_idct_2x2` makes of a subsampled block.
    private static func samples(_ component: Component, dc: [Int16], into plane: UnsafeMutablePointer<UInt8>, wide: Int)
    {
        if component.blockSide == 1 {
            let quantizer = Int(component.quantizers[0])
            for blockY in 0..<component.usedHigh {
                for blockX in 0..<component.usedWide {
                    let block = component.dcStart + blockY * component.blocksWide + blockX
                    plane[blockY * wide + blockX] = dcSample(Int(dc[block]) &* quantizer)
                }
            }
            return
        }
        // The quantiser of each of the 25 kept coefficients.
        var dequantizers = [Int](repeating: 0, count: 25)
        for zigzag in 0..<64 where slot[zigzag] >= 0 {
            dequantizers[slot[zigzag]] = Int(component.quantizers[zigzag])
        }
        // The kept coefficients other than the DC, as zigzag bits: a block with none of
        // them nonzero is its DC four times (what the IDCT makes of it, exactly).
        let keptAC = keptMask & ~1
        component.coefficients.withUnsafeBufferPointer { coefficients in
            component.nonzero.withUnsafeBufferPointer { nonzero in
                dc.withUnsafeBufferPointer { dc in
                    dequantizers.withUnsafeBufferPointer { dequantizers in
                        withUnsafeTemporaryAllocation(of: Int.self, capacity: 25) { values in
                            for blockY in 0..<component.usedHigh {
                                for blockX in 0..<component.usedWide {
                                    let block = blockY * component.blocksWide + blockX
                                    let first = Int(dc[component.dcStart + block]) &* dequantizers[0]
                                    let at = blockY * 2 * wide + blockX * 2
                                    guard nonzero[block] & keptAC != 0 else {
                                        let value = dcSample(first)
                                        (plane[at], plane[at + 1]) = (value, value)
                                        (plane[at + wide], plane[at + wide + 1]) = (value, value)
                                        continue
                                    }
                                    let base = block * 25
                                    values[0] = first
                                    for index in 1..<25 {
                                        values[index] = Int(coefficients[base + index]) &* dequantizers[index]
                                    }
                                    let (top, bottom) = idct2x2(UnsafePointer(values.baseAddress!))
                                    (plane[at], plane[at + 1]) = top
                                    (plane[at + wide], plane[at + wide + 1]) = bottom
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// The sample a dequantised DC coefficient alone makes (`jpeg_idct_1x1`; and the
    /// 2x2 IDCT's four samples of a block whose kept AC coefficients are all zero).
    @inline(__always)
    private static func dcSample(_ value: Int) -> UInt8 { UInt8(clamping: descale(value, 3) + 128) }

    /// libjpeg's rounding shift.
    @inline(__always)
    static func descale(_ value: Int, _ shift: Int) -> Int { (value &+ (1 << (shift - 1))) >> shift }

    /// The reduced 8-point IDCT at two points, in libjpeg's fixed point (13 fraction
    /// bits), from the values at 0, 1, 3, 5 and 7: the even part is the first alone,
    /// the odd part the odd frequencies. Returns the sum and the difference, unshifted.
    @inline(__always)
    private static func twoPoints(_ v0: Int, _ v1: Int, _ v3: Int, _ v5: Int, _ v7: Int) -> (Int, Int) {
        // In 64 bits nothing here can overflow: the values are products of 16-bit numbers.
        let even = v0 &<< 15
        let odd = v7 &* -5_906 &+ v5 &* 6_967 &+ v3 &* -10_426 &+ v1 &* 29_692
        return (even &+ odd, even &- odd)
    }

    /// One block of a 2x2 component as `jpeg_idct_2x2` makes it, from its 25 dequantised
    /// coefficients (rows and columns 0, 1, 3, 5, 7, row by row): its two rows of two.
    @inline(__always)
    private static func idct2x2(_ z: UnsafePointer<Int>) -> ((UInt8, UInt8), (UInt8, UInt8)) {
        // Pass 1, each column: two values, with 2 more bits kept.
        var upper = (0, 0, 0, 0, 0)
        var lower = (0, 0, 0, 0, 0)
        func column(_ c: Int) -> (Int, Int) {
            let (sum, difference) = twoPoints(z[c], z[5 + c], z[10 + c], z[15 + c], z[20 + c])
            return (descale(sum, 13), descale(difference, 13))
        }
        (upper.0, lower.0) = column(0)
        (upper.1, lower.1) = column(1)
        (upper.2, lower.2) = column(2)
        (upper.3, lower.3) = column(3)
        (upper.4, lower.4) = column(4)
        // Pass 2, each row.
        func row(_ w: (Int, Int, Int, Int, Int)) -> (UInt8, UInt8) {
            let (sum, difference) = twoPoints(w.0, w.1, w.2, w.3, w.4)
            return (UInt8(clamping: descale(sum, 20) + 128), UInt8(clamping: descale(difference, 20) + 128))
        }
        return (row(upper), row(lower))
    }

    /// Component `index`'s samples along output row `y`, at the output's width: as they
    /// are, or each repeated twice along an axis the component has half the samples of
    /// (4:2:2, 4:4:0), as libjpeg's 1/8 decode brings them up (measured: its output is
    /// this exactly, not its triangle filter). Points into the plane, or into `spread`.
    private func upsampledRow(
        _ y: Int, of index: Int, plane: Plane, spread: UnsafeMutablePointer<UInt8>, width: Int
    ) -> UnsafePointer<UInt8> {
        let component = components[index]
        let stepX = maxHorizontal / component.horizontal / component.blockSide
        let stepY = maxVertical / component.vertical / component.blockSide
        let line = plane.samples + min(y / stepY, plane.high - 1) * plane.wide
        guard stepX != 1 || plane.wide < width else { return UnsafePointer(line) }
        for x in 0..<width {
            spread[x] = line[min(x / stepX, plane.wide - 1)]
        }
        return UnsafePointer(spread)
    }

    /// One output row, RGBA, from the components' rows.
    private static func convert(
        _ rows: UnsafePointer<UnsafePointer<UInt8>>, _ colorSpace: ColorSpace, into out: UnsafeMutablePointer<UInt8>,
        width: Int
    ) {
        switch colorSpace {
        case .grey:
            let grey = rows[0]
            for x in 0..<width {
                let value = grey[x]
                (out[4 * x], out[4 * x + 1], out[4 * x + 2], out[4 * x + 3]) = (value, value, value, 255)
            }
        case .rgb:
            let (red, green, blue) = (rows[0], rows[1], rows[2])
            for x in 0..<width {
                (out[4 * x], out[4 * x + 1], out[4 * x + 2], out[4 * x + 3]) = (red[x], green[x], blue[x], 255)
            }
        case .ycbcr:
            // libjpeg's jdcolor.c factors: FIX(x) = x * 65536 rounded, ONE_HALF = 32768.
            let (lumas, blues, reds) = (rows[0], rows[1], rows[2])
            for x in 0..<width {
                let luma = Int(lumas[x])
                let blue = Int(blues[x]) - 128
                let red = Int(reds[x]) - 128
                out[4 * x] = UInt8(clamping: luma + ((91_881 * red + 32_768) >> 16))
                out[4 * x + 1] = UInt8(clamping: luma + ((-22_554 * blue + 32_768 - 46_802 * red) >> 16))
                out[4 * x + 2] = UInt8(clamping: luma + ((116_130 * blue + 32_768) >> 16))
                out[4 * x + 3] = 255
            }
        }
    }
}
