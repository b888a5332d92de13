import CResample
import ImageLoaderSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Resizes an image whose rows arrive one at a time, top to bottom, holding only a
/// few rows: a box pre-reduction by whole factors (every input pixel counted once),
/// then the kernel for the rest, both separable. Pixels are filtered premultiplied,
/// as floats, in the input's encoding or, when asked, in linear light.
///
/// Rows are 8-bit, 4 channels. The output is 8-bit RGBA in the input's alpha mode.
final class StreamingResizer {
    let window: ResizeWindow
    var inputWidth: Int { window.inputWidth }
    var inputHeight: Int { window.inputHeight }
    var outputWidth: Int { window.width }
    var outputHeight: Int { window.height }
    let boxX: Int
    let boxY: Int
    let channels: RowChannels
    let linearLight: Bool
    let loops: ResampleLoops

    /// The box columns the output reads (box columns are `boxX` input columns each).
    private let boxColumns: Range<Int>
    private let boxHeight: Int
    /// The horizontal taps, over box columns, each weight already divided by the
    /// number of input columns its box column sums.
    private let horizontal: TapTable
    private let vertical: TapTable

    /// Box rows waiting for the horizontal pass, ``batchRows`` of them (each
    /// `boxColumns.count` wide), and how many hold a finished box row.
    private let boxRows: UnsafeMutablePointer<SIMD4<Float>>
    private let batchRows: Int
    private var pendingRows = 0
    /// The box row being summed: the first free one of ``boxRows``.
    private var boxRow: UnsafeMutablePointer<SIMD4<Float>> { boxRows + pendingRows * max(1, boxColumns.count) }
    /// One output row summed from the ring.
    private let verticalRow: UnsafeMutablePointer<SIMD4<Float>>
    /// The ring rows under the output row being emitted, one for each of its taps.
    private let tapRows: UnsafeMutablePointer<UnsafePointer<SIMD4<Float>>>
    private let ring: UnsafeMutablePointer<SIMD4<Float>>
    private let ringCapacity: Int
    /// The ring rows a batch is filtered into (the AVX2 loops take them as a list).
    private let batchTargets: UnsafeMutablePointer<UnsafeMutablePointer<Float>?>
    /// With the AVX2 loops and bytes out as they are summed (no alpha to divide out, no
    /// linear light), output rows are emitted two at a time, each ring row read once for
    /// both (``emitPair(_:)``): an output waits for the next one's taps. The two outputs'
    /// weights over the union of their taps (zero where a row is not one of an output's).
    private let emitsPairs: Bool
    private let pairTaps: UnsafeMutablePointer<Float>

    /// The output rows this resizer makes, and the input rows they need.
    let outputRows: Range<Int>
    let inputRows: Range<Int>

    private var rowsInBox = 0
    private var inputRowsSeen: Int
    private var boxRowsDone: Int
    private var nextOutputRow: Int
    private(set) var output: [UInt8]

    /// Box factors leave the kernel a reduction of at least 2 (when there is that much to do).
    /// At most 32,768, so a box column's premultiplied sums (255 * 255 each) fit in an Int32.
    static func boxFactor(input: Int, output: Int) -> Int {
        min(32768, max(1, input / (output * 2)))
    }

    /// A resize of the whole image, or of the band `outputRows` of it (then only the
    /// input rows in ``inputRows`` are used).
    convenience init(
        inputWidth: Int, inputHeight: Int, outputWidth: Int, outputHeight: Int, kernel: ResamplingKernel,
        channels: RowChannels, linearLight: Bool, outputRows: Range<Int>? = nil, loops: ResampleLoops = .best
    ) {
        self.init(
            window: ResizeWindow(
                inputWidth: inputWidth, inputHeight: inputHeight, outputWidth: outputWidth, outputHeight: outputHeight),
            kernel: kernel, channels: channels, linearLight: linearLight, outputRows: outputRows, loops: loops)
    }

    /// The window's rectangle of a resize (all of it, or the band `outputRows` of it,
    /// counted within the window). Taps, buffers and input rows are those the window
    /// needs: a 256-pixel crop of a 100,000,000-pixel-long scaled image costs 256 pixels.
    init(
        window: ResizeWindow, kernel: ResamplingKernel, channels: RowChannels, linearLight: Bool,
        outputRows: Range<Int>? = nil, loops: ResampleLoops = .best
    ) {
        self.window = window
        self.channels = channels
        self.linearLight = linearLight
        self.loops = loops
        boxX = kernel == .box ? 1 : StreamingResizer.boxFactor(input: window.inputWidth, output: window.scaledWidth)
        boxY = kernel == .box ? 1 : StreamingResizer.boxFactor(input: window.inputHeight, output: window.scaledHeight)
        let boxWidth = (window.inputWidth + boxX - 1) / boxX
        boxHeight = (window.inputHeight + boxY - 1) / boxY
        let horizontalWeights = ResampleWeights.cached(
            inputSize: boxWidth, outputSize: window.scaledWidth, kernel: kernel,
            outputs: window.x..<(window.x + window.width))
        // The box columns the window reads: only those are summed.
        let firstColumn = horizontalWeights.starts.min() ?? 0
        let endColumn = zip(horizontalWeights.starts, horizontalWeights.counts).map { $0 + $1 }.max() ?? firstColumn
        boxColumns = firstColumn..<max(firstColumn, endColumn)
        let (width, boxX) = (window.inputWidth, boxX)
        horizontal = TapTable(
            horizontalWeights, firstInput: firstColumn, splat: true,
            inputScale: { 1 / Float(min(boxX, width - $0 * boxX)) })
        let verticalWeights = ResampleWeights.cached(
            inputSize: boxHeight, outputSize: window.scaledHeight, kernel: kernel,
            outputs: window.y..<(window.y + window.height))
        vertical = TapTable(verticalWeights)
        // Rows of one input row each (no vertical box) are filtered four at a time:
        // each tap's weight is loaded once for the four.
        batchRows = boxY == 1 ? 4 : 1
        boxRows = StreamingResizer.allocateLines(batchRows * max(1, boxColumns.count))
        boxRows.initialize(repeating: .zero, count: batchRows * max(1, boxColumns.count))
        verticalRow = .allocate(capacity: window.width)
        verticalRow.initialize(repeating: .zero, count: window.width)
        let band = outputRows ?? 0..<window.height
        emitsPairs = loops == .avx2 && channels == .independent && !linearLight && !window.isCropOnly
        // The rows an output waits on (with pairs, from its first tap to the next one's
        // last), and a batch written past them.
        var span = vertical.stride
        if emitsPairs {
            for y in band.dropLast() {
                let (s0, s1) = (verticalWeights.starts[y], verticalWeights.starts[y + 1])
                let end = max(s0 + verticalWeights.counts[y], s1 + verticalWeights.counts[y + 1])
                span = max(span, end - min(s0, s1))
            }
        }
        tapRows = .allocate(capacity: max(1, span))
        pairTaps = .allocate(capacity: 2 * max(1, span))
        pairTaps.initialize(repeating: 0, count: 2 * max(1, span))
        ringCapacity = span + batchRows
        ring = StreamingResizer.allocateLines(ringCapacity * window.width)
        ring.initialize(repeating: .zero, count: ringCapacity * window.width)
        batchTargets = .allocate(capacity: batchRows)
        batchTargets.initialize(repeating: nil, count: batchRows)
        self.outputRows = band
        let firstBoxRow = band.isEmpty ? 0 : verticalWeights.starts[band.lowerBound]
        let endBoxRow =
            band.map { verticalWeights.starts[$0] + verticalWeights.counts[$0] }.max() ?? firstBoxRow
        inputRows = (firstBoxRow * boxY)..<min(window.inputHeight, endBoxRow * boxY)
        inputRowsSeen = inputRows.lowerBound
        boxRowsDone = firstBoxRow
        nextOutputRow = band.lowerBound
        output = [UInt8](repeating: 0, count: window.width * band.count * 4)
    }

    /// `count` pixels starting on a cache line: the wide loops' loads and stores then
    /// split across lines only where a row's own offset makes them.
    private static func allocateLines(_ count: Int) -> UnsafeMutablePointer<SIMD4<Float>> {
        UnsafeMutableRawPointer.allocate(byteCount: count * MemoryLayout<SIMD4<Float>>.stride, alignment: 64)
            .bindMemory(to: SIMD4<Float>.self, capacity: count)
    }

    deinit {
        boxRows.deallocate()
        verticalRow.deallocate()
        tapRows.deallocate()
        ring.deallocate()
        batchTargets.deallocate()
        pairTaps.deallocate()
        horizontal.deallocate()
        vertical.deallocate()
    }

    /// Whether ``consumeOpaqueRGB(_:at:)`` may be used: the resize scales, and its
    /// channels are filtered alike (there is no straight alpha to divide out).
    var takesOpaqueRGB: Bool { !window.isCropOnly && channels == .independent }

    /// Takes input row `y` as 3 bytes a pixel, every pixel opaque, instead of 4 (a PNG's
    /// RGB rows, without widening them first). The byte after the row's last pixel
    /// must be readable; it is not used. Only when ``takesOpaqueRGB``.
    func consumeOpaqueRGB(_ row: UnsafePointer<UInt8>, at y: Int) {
        guard takesOpaqueRGB, y == inputRowsSeen, y < inputRows.upperBound else { return }
        take(row, bytesPerPixel: 3)
    }

    /// Takes input row `y` (`inputWidth` pixels, 4 bytes each). Rows come in order;
    /// rows the resize does not need (outside ``inputRows``, or again) are ignored.
    func consume(_ row: UnsafePointer<UInt8>, at y: Int) {
        guard y == inputRowsSeen, y < inputRows.upperBound else { return }
        if window.isCropOnly {
            // No scaling: the window's pixels are copied untouched.
            let band = y - window.y - outputRows.lowerBound
            if band >= 0 && band < outputRows.count {
                output.withUnsafeMutableBufferPointer { out in
                    (out.baseAddress! + band * outputWidth * 4).update(from: row + window.x * 4, count: outputWidth * 4)
                }
            }
            inputRowsSeen += 1
            return
        }
        take(row, bytesPerPixel: 4)
    }

    /// Every input row the resize uses has arrived.
    private var inputEnded: Bool { inputRowsSeen == inputHeight || inputRowsSeen == inputRows.upperBound }

    /// Sums the next input row into its box, and ends the box when it is complete.
    private func take(_ row: UnsafePointer<UInt8>, bytesPerPixel: Int) {
        accumulate(row, first: rowsInBox == 0, bytesPerPixel: bytesPerPixel)
        inputRowsSeen += 1
        rowsInBox += 1
        if rowsInBox == boxY || inputEnded { finishBoxRow() }
    }

    /// Takes `count` rows, `bytesPerRow` apart, the first of them input row `y`.
    func consume(_ rows: UnsafePointer<UInt8>, count: Int, bytesPerRow: Int, firstRow y: Int) {
        for i in 0..<count { consume(rows + i * bytesPerRow, at: y + i) }
    }

    /// Adds one input row, reduced horizontally by the box factor, into the box row;
    /// the `first` row of a box replaces what the box row held. Pixels of 4 bytes, or of
    /// 3 (opaque RGB: the fourth lane is set to 255).
    private func accumulate(_ row: UnsafePointer<UInt8>, first: Bool, bytesPerPixel: Int) {
        let (boxX, width) = (self.boxX, inputWidth)
        let straight = channels == .straightAlpha
        if linearLight {
            let table = SRGBTransfer.toLinear255
            table.withUnsafeBufferPointer { lut in
                for column in boxColumns {
                    var sum = SIMD4<Float>.zero
                    var p = row + column * boxX * bytesPerPixel
                    for _ in 0..<min(boxX, width - column * boxX) {
                        let alpha = bytesPerPixel == 4 ? Float(p[3]) : 255
                        var v = SIMD4<Float>(lut[Int(p[0])], lut[Int(p[1])], lut[Int(p[2])], alpha)
                        if straight { v *= SIMD4(v[3], v[3], v[3], 255) * (1 / 255) }
                        sum += v
                        p += bytesPerPixel
                    }
                    let index = column - boxColumns.lowerBound
                    boxRow[index] = sum + (first ? .zero : boxRow[index])
                }
            }
        } else {
            // Integer sums, premultiplied as integers (255 * 255 * box width fits in an Int32),
            // converted to float once per box column instead of once per pixel. One loop
            // for each combination of `straight` and `first`: left to the optimiser, both
            // were tested for every pixel.
            let (start, count) = (row + boxColumns.lowerBound * boxX * bytesPerPixel, boxColumns.count)
            let last = min(boxX, width - (boxColumns.upperBound - 1) * boxX)
            let rgb = bytesPerPixel == 3
            if loops == .avx2 && boxX == 1 && first && !straight && !rgb {
                // The commonest case (opaque or premultiplied rows, no box): bytes to floats.
                UnsafeMutableRawPointer(boxRow).withMemoryRebound(to: Float.self, capacity: count * 4) {
                    cresample_widen(start, count, $0)
                }
                return
            }
            switch (straight, first, rgb) {
            case (false, false, false): Self.sumBoxes(start, boxX, last, count, into: boxRow, false, false, false)
            case (false, true, false): Self.sumBoxes(start, boxX, last, count, into: boxRow, false, true, false)
            case (true, false, false): Self.sumBoxes(start, boxX, last, count, into: boxRow, true, false, false)
            case (true, true, false): Self.sumBoxes(start, boxX, last, count, into: boxRow, true, true, false)
            // Opaque RGB has no straight alpha (``takesOpaqueRGB``).
            case (_, false, true): Self.sumBoxes(start, boxX, last, count, into: boxRow, false, false, true)
            case (_, true, true): Self.sumBoxes(start, boxX, last, count, into: boxRow, false, true, true)
            }
        }
    }

    /// Sums `count` box columns of `boxX` pixels each (the last one `last` pixels) from
    /// `row` into `boxRow`, premultiplying when `straight`, replacing its values when
    /// `first`; pixels of 3 bytes when `rgb` (read as 4, the fourth set to 255).
    @inline(__always)
    private static func sumBoxes(
        _ row: UnsafePointer<UInt8>, _ boxX: Int, _ last: Int, _ count: Int,
        into boxRow: UnsafeMutablePointer<SIMD4<Float>>, _ straight: Bool, _ first: Bool, _ rgb: Bool
    ) {
        let scale: SIMD4<Float> = SIMD4(1 / 255, 1 / 255, 1 / 255, 1)
        let step = rgb ? 3 : 4
        @inline(__always) func pixel(_ p: UnsafeRawPointer) -> SIMD4<Int32> {
            // As one 32-bit word: setting a lane of a SIMD4 went through the stack.
            let word = p.loadUnaligned(as: UInt32.self) | (rgb ? UInt32(0xFF).bigEndian : 0)
            let v = SIMD4<Int32>(truncatingIfNeeded: unsafeBitCast(word, to: SIMD4<UInt8>.self))
            return straight ? v &* SIMD4(v[3], v[3], v[3], 1) : v
        }
        @inline(__always) func store(_ sum: SIMD4<Int32>, _ column: Int) {
            let value = straight ? SIMD4<Float>(sum) * scale : SIMD4<Float>(sum)
            boxRow[column] = first ? value : boxRow[column] + value
        }
        var p = UnsafeRawPointer(row)
        if boxX == 1 {
            for column in 0..<count {
                store(pixel(p), column)
                p += step
            }
            return
        }
        for column in 0..<count {
            var sum = SIMD4<Int32>.zero
            for _ in 0..<(column == count - 1 ? last : boxX) {
                sum &+= pixel(p)
                p += step
            }
            store(sum, column)
        }
    }

    /// Ends the box row being summed; once a batch is full (or the input ends), filters
    /// the batch horizontally into the ring and emits every output row whose taps have
    /// all arrived.
    private func finishBoxRow() {
        // Batched rows are single input rows: their scale is 1. A box of several rows
        // (batches of one) is averaged by its row count.
        let rowScale = 1 / Float(rowsInBox)
        rowsInBox = 0
        pendingRows += 1
        if pendingRows == batchRows || inputEnded { filterPendingRows(rowScale: rowScale) }
    }

    /// Filters the pending box rows horizontally into the ring (averaging each on the
    /// way: the column counts are in the weights, the row count in `rowScale`), then
    /// emits what it can.
    private func filterPendingRows(rowScale: Float) {
        let width = max(1, boxColumns.count)
        var done = 0
        if loops == .avx2 {
            for i in 0..<pendingRows {
                batchTargets[i] = UnsafeMutableRawPointer(ringRow(boxRowsDone + i)).assumingMemoryBound(to: Float.self)
            }
            let taps = horizontal
            UnsafeMutableRawPointer(boxRows).withMemoryRebound(to: Float.self, capacity: batchRows * width * 4) {
                source in
                UnsafeMutableRawPointer(taps.splatWeights).withMemoryRebound(
                    to: Float.self, capacity: max(1, taps.splatCount) * 4
                ) { weights in
                    cresample_horizontal(
                        source, width * 4, Int32(pendingRows), batchTargets, taps.starts, taps.counts, weights,
                        taps.stride, outputWidth, rowScale)
                }
            }
            done = pendingRows
        }
        if pendingRows == 4 && done == 0 {
            filterFour(boxRows, width)
            done = 4
        }
        while done < pendingRows {
            filterOne(boxRows + done * width, into: ringRow(boxRowsDone + done), rowScale: rowScale)
            done += 1
        }
        boxRowsDone += pendingRows
        pendingRows = 0
        emitReadyRows(waitingForPairs: true)
    }

    /// Whether every tap of output row `y` has been filtered.
    private func isReady(_ y: Int) -> Bool { vertical.starts[y] + vertical.counts[y] <= boxRowsDone }

    /// Emits the output rows whose taps have all arrived, in order; with pairs, a row
    /// waits for the next one unless `waitingForPairs` is false (the input has ended).
    private func emitReadyRows(waitingForPairs: Bool) {
        while nextOutputRow < outputRows.upperBound && isReady(nextOutputRow) {
            let y = nextOutputRow
            if emitsPairs && y + 1 < outputRows.upperBound {
                if isReady(y + 1) {
                    emitPair(y)
                    nextOutputRow += 2
                    continue
                }
                if waitingForPairs { return }
            }
            emit(y)
            nextOutputRow += 1
        }
    }

    /// Output rows `y` and `y + 1` at once (``emitsPairs``).
    private func emitPair(_ y: Int) {
        let (start0, count0) = (vertical.starts[y], vertical.counts[y])
        let (start1, count1) = (vertical.starts[y + 1], vertical.counts[y + 1])
        let first = min(start0, start1)
        let count = max(start0 + count0, start1 + count1) - first
        let width = outputWidth
        for i in 0..<count {
            tapRows[i] = UnsafePointer(ring + ((first + i) % ringCapacity) * width)
            let row = first + i
            pairTaps[i] =
                row >= start0 && row < start0 + count0 ? vertical.weights[y * vertical.stride + row - start0] : 0
            pairTaps[count + i] =
                row >= start1 && row < start1 + count1 ? vertical.weights[(y + 1) * vertical.stride + row - start1] : 0
        }
        output.withUnsafeMutableBufferPointer { out in
            let o = out.baseAddress! + (y - outputRows.lowerBound) * width * 4
            UnsafeMutableRawPointer(tapRows).withMemoryRebound(to: UnsafePointer<Float>?.self, capacity: count) {
                cresample_vertical_pair($0, count, pairTaps, pairTaps + count, width, o, o + width * 4)
            }
        }
    }

    private func ringRow(_ boxRowIndex: Int) -> UnsafeMutablePointer<SIMD4<Float>> {
        ring + (boxRowIndex % ringCapacity) * outputWidth
    }

    /// One box row through the horizontal taps.
    private func filterOne(
        _ source: UnsafeMutablePointer<SIMD4<Float>>, into target: UnsafeMutablePointer<SIMD4<Float>>, rowScale: Float
    ) {
        let taps = horizontal
        for x in 0..<outputWidth {
            var p = source + taps.starts[x]
            var w = taps.splatWeights + x * taps.stride
            // Two sums, so consecutive taps do not wait on each other's additions.
            var sum0 = SIMD4<Float>.zero
            var sum1 = SIMD4<Float>.zero
            var remaining = taps.counts[x]
            while remaining >= 2 {
                sum0 += p[0] * w[0]
                sum1 += p[1] * w[1]
                p += 2
                w += 2
                remaining -= 2
            }
            if remaining == 1 { sum0 += p[0] * w[0] }
            target[x] = (sum0 + sum1) * rowScale
        }
    }

    /// Four box rows (single input rows, `width` apart) through the horizontal taps at
    /// once: each weight is loaded once for the four, and the four sums are independent.
    /// The same additions in the same order as ``filterOne(_:into:rowScale:)``.
    private func filterFour(_ source: UnsafeMutablePointer<SIMD4<Float>>, _ width: Int) {
        let taps = horizontal
        let (t0, t1, t2, t3) = (
            ringRow(boxRowsDone), ringRow(boxRowsDone + 1), ringRow(boxRowsDone + 2), ringRow(boxRowsDone + 3)
        )
        for x in 0..<outputWidth {
            var p = source + taps.starts[x]
            var w = taps.splatWeights + x * taps.stride
            var (a0, a1, a2, a3) = (SIMD4<Float>.zero, SIMD4<Float>.zero, SIMD4<Float>.zero, SIMD4<Float>.zero)
            var (b0, b1, b2, b3) = (SIMD4<Float>.zero, SIMD4<Float>.zero, SIMD4<Float>.zero, SIMD4<Float>.zero)
            var remaining = taps.counts[x]
            while remaining >= 2 {
                let (w0, w1) = (w[0], w[1])
                a0 += p[0] * w0
                a1 += p[width] * w0
                a2 += p[2 * width] * w0
                a3 += p[3 * width] * w0
                b0 += p[1] * w1
                b1 += p[width + 1] * w1
                b2 += p[2 * width + 1] * w1
                b3 += p[3 * width + 1] * w1
                p += 2
                w += 2
                remaining -= 2
            }
            if remaining == 1 {
                let w0 = w[0]
                a0 += p[0] * w0
                a1 += p[width] * w0
                a2 += p[2 * width] * w0
                a3 += p[3 * width] * w0
            }
            t0[x] = a0 + b0
            t1[x] = a1 + b1
            t2[x] = a2 + b2
            t3[x] = a3 + b3
        }
    }

    /// Sums the ring's rows under output row `y`'s taps and stores the row: eight pixels
    /// at a time through all the taps, so their sums stay in registers (the same
    /// additions in the same order as one row at a time).
    private func emit(_ y: Int) {
        let (start, count, taps) = (vertical.starts[y], vertical.counts[y], vertical.weights + y * vertical.stride)
        let (width, straight, linear) = (outputWidth, channels == .straightAlpha, linearLight)
        // ResampleWeights gives every output at least one tap; without one, the row would stay transparent.
        guard count > 0 else { return }
        for i in 0..<count { tapRows[i] = UnsafePointer(ring + ((start + i) % ringCapacity) * width) }
        let (rows, sums) = (UnsafePointer(tapRows), verticalRow)
        if loops == .avx2 {
            let quantizes = !straight && !linear
            output.withUnsafeMutableBufferPointer { out in
                let o = out.baseAddress! + (y - outputRows.lowerBound) * width * 4
                UnsafeMutableRawPointer(tapRows).withMemoryRebound(to: UnsafePointer<Float>?.self, capacity: count) {
                    rowList in
                    UnsafeMutableRawPointer(sums).withMemoryRebound(to: Float.self, capacity: width * 4) {
                        cresample_vertical(rowList, count, taps, width, $0, quantizes ? o : nil)
                    }
                }
                guard !quantizes else { return }
                for x in 0..<width {
                    StreamingResizer.store(sums[x], into: o + x * 4, straight: straight, linear: linear)
                }
            }
            return
        }
        var x = 0
        while x + 8 <= width {
            var r = rows[0] + x
            var w = SIMD4<Float>(repeating: taps[0])
            var (s0, s1, s2, s3) = (r[0] * w, r[1] * w, r[2] * w, r[3] * w)
            var (s4, s5, s6, s7) = (r[4] * w, r[5] * w, r[6] * w, r[7] * w)
            for i in 1..<count {
                r = rows[i] + x
                w = SIMD4(repeating: taps[i])
                s0 += r[0] * w
                s1 += r[1] * w
                s2 += r[2] * w
                s3 += r[3] * w
                s4 += r[4] * w
                s5 += r[5] * w
                s6 += r[6] * w
                s7 += r[7] * w
            }
            (sums[x], sums[x + 1], sums[x + 2], sums[x + 3]) = (s0, s1, s2, s3)
            (sums[x + 4], sums[x + 5], sums[x + 6], sums[x + 7]) = (s4, s5, s6, s7)
            x += 8
        }
        while x < width {
            var sum = rows[0][x] * taps[0]
            for i in 1..<count { sum += rows[i][x] * taps[i] }
            sums[x] = sum
            x += 1
        }
        output.withUnsafeMutableBufferPointer { out in
            var o = out.baseAddress! + (y - outputRows.lowerBound) * width * 4
            if !straight && !linear {
                // Every lane is quantised alike: one flat loop over the floats.
                UnsafeMutableRawPointer(sums).withMemoryRebound(to: Float.self, capacity: width * 4) {
                    StreamingResizer.quantize($0, count: width * 4, into: o)
                }
                return
            }
            for x in 0..<width {
                StreamingResizer.store(sums[x], into: o, straight: straight, linear: linear)
                o += 4
            }
        }
    }

    /// `count` filtered values to bytes, each clamped to 0...255 and rounded as
    /// ``store(_:into:straight:linear:)`` rounds (`UInt8(value + 0.5)`), without its
    /// per-value conversion checks, so the loop runs in vector registers.
    @inline(__always)
    static func quantize(_ values: UnsafePointer<Float>, count: Int, into out: UnsafeMutablePointer<UInt8>) {
        // Adding 2^23 rounds a value in 0...2^23 to a whole number (to even at halves),
        // which then sits in the low bits of the float's pattern.
        let magic: Float = 8_388_608
        for i in 0..<count {
            let value = min(max(values[i], 0), 255) + 0.5
            let rounded = (value + magic) - magic
            // Rounded up past the value: truncation is one less.
            let truncated = rounded > value ? rounded - 1 : rounded
            out[i] = UInt8(truncatingIfNeeded: (truncated + magic).bitPattern)
        }
    }

    /// Quantises one filtered pixel, dividing alpha back out when the input was straight.
    @inline(__always)
    static func store(_ pixel: SIMD4<Float>, into out: UnsafeMutablePointer<UInt8>, straight: Bool, linear: Bool) {
        let alpha = min(max(pixel[3], 0), 255)
        var color = SIMD4(pixel[0], pixel[1], pixel[2], 0)
        if straight {
            // Ringing can push premultiplied colour above alpha; a colour never exceeds 255 once divided.
            color = alpha > 0 ? color * (255 / alpha) : .zero
        }
        // Lane by lane: SIMD's `clamped` is a call per pixel here (not inlined), 5% of a thumbnail.
        let red = min(max(color[0], 0), 255)
        let green = min(max(color[1], 0), 255)
        let blue = min(max(color[2], 0), 255)
        if linear {
            out[0] = SRGBTransfer.encode255(red)
            out[1] = SRGBTransfer.encode255(green)
            out[2] = SRGBTransfer.encode255(blue)
        } else {
            out[0] = UInt8(red + 0.5)
            out[1] = UInt8(green + 0.5)
            out[2] = UInt8(blue + 0.5)
        }
        out[3] = UInt8(alpha + 0.5)
    }

    /// The resized pixels. Rows whose input never arrived (the decoder stopped early)
    /// are left transparent black.
    func finish() -> [UInt8] {
        // Rows summed but not yet filtered (a decoder that stopped early) still count.
        if pendingRows > 0 { filterPendingRows(rowScale: 1) }
        // A row waiting for its pair whose pair never came (the input stopped).
        emitReadyRows(waitingForPairs: false)
        return output
    }
}
