import CDeflate
import CPNG
import ImageLoaderSupport

/// Writes the common PNG (up to ``maxFilteredBytes`` of image data) in one piece: the
/// rows filtered here with SIMD, then compressed in one call, instead of a row at a time
/// through libpng's filters and zlib's streaming deflate (four times as long on a
/// 512 x 384 photograph). Larger images go through libpng, which streams.
///
/// Each row gets whichever of the five filters leaves the smallest sum of residuals
/// (libpng's heuristic). Three compressors are tried on a band from the middle of the
/// image, and the smallest result decides for the whole of it:
/// - ``HuffmanDeflate``, literals only, which wins on photographs: their filtered rows
///   are noise, and matches there cost more bits than they save;
/// - zlib's run-length strategy, for noise with runs in it (a JPEG'd diagram);
/// - libdeflate at the requested level, which wins on drawings, text and flat colour,
///   where long matches pay.
enum PNGWriter {
    /// The most filtered image data written in one piece: as much as the reader's
    /// one-piece path inflates (an 8-megapixel RGBA image).
    static let maxFilteredBytes = PNGImageData.maxInflatedBytes

    /// A band of at least this many bytes of filtered rows chooses the compressor.
    static let minSampleBytes = 32 << 10

    /// Which of the RGBA bytes are written, as which PNG colour type.
    enum Layout {
        /// Red as grey (the image is grey): colour type 0.
        case grey
        /// Red as grey, and alpha: colour type 4.
        case greyAlpha
        /// Colour type 2.
        case rgb
        /// Colour type 6.
        case rgba

        var channels: Int {
            switch self {
            case .grey: 1
            case .greyAlpha: 2
            case .rgb: 3
            case .rgba: 4
            }
        }

        var colorType: UInt8 {
            switch self {
            case .grey: 0
            case .greyAlpha: 4
            case .rgb: 2
            case .rgba: 6
            }
        }
    }

    /// The PNG file for `height` rows of `bytesPerRow` bytes, 4 bytes a pixel (RGBA),
    /// written in `layout`. `level` is 0 (stored) to 9. Nil when the image is too large
    /// for this path (or empty), or compression failed.
    static func write(
        pixels: UnsafeBufferPointer<UInt8>, width: Int, height: Int, bytesPerRow: Int, layout: Layout, level: Int,
        iccProfile: [UInt8]
    ) -> [UInt8]? {
        let channels = layout.channels
        guard width > 0, height > 0, let base = pixels.baseAddress,
            let rowBytes = Checked.multiply(width, channels),
            let filteredBytes = Checked.add(rowBytes, 1).flatMap({ Checked.multiply($0, height) }),
            filteredBytes <= maxFilteredBytes,
            let pixelBytes = Checked.multiply(bytesPerRow, height - 1).flatMap({ Checked.add($0, width * 4) }),
            pixelBytes <= pixels.count,
            iccProfile.count <= 1 << 30
        else { return nil }
        let filtered = UnsafeMutableRawBufferPointer.allocate(byteCount: filteredBytes, alignment: 16)
        defer { filtered.deallocate() }
        filter(
            base, width: width, height: height, bytesPerRow: bytesPerRow, channels: channels,
            adaptive: level > 0, into: filtered.baseAddress!.assumingMemoryBound(to: UInt8.self))
        guard let data = compress(UnsafeRawBufferPointer(filtered), rowStride: rowBytes + 1, level: level) else {
            return nil
        }
        var header = [UInt8]()
        header.appendBigEndian(UInt32(width))
        header.appendBigEndian(UInt32(height))
        header += [8, layout.colorType, 0, 0, 0]
        var file: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        file.reserveCapacity(data.count + iccProfile.count + 128)
        file.appendChunk("IHDR", header)
        if !iccProfile.isEmpty {
            let compressed = iccProfile.withUnsafeBytes { deflate($0, level: 9) }
            guard let compressed else { return nil }
            file.appendChunk("iCCP", Array("ICC profile".utf8) + [0, 0] + compressed)
        }
        file.appendChunk("IDAT", data)
        file.appendChunk("IEND", [])
        return file
    }

    // MARK: Filtering

    /// Filters every row into `output` (a filter type byte, then the residuals, for each row).
    private static func filter(
        _ pixels: UnsafePointer<UInt8>, width: Int, height: Int, bytesPerRow: Int, channels: Int, adaptive: Bool,
        into output: UnsafeMutablePointer<UInt8>
    ) {
        let rowBytes = width * channels
        // Two packed rows (RGB, when the alpha is dropped), a zero row above the first,
        // and the four filtered candidates.
        let scratch = UnsafeMutablePointer<UInt8>.allocate(capacity: rowBytes * 7)
        defer { scratch.deallocate() }
        let zero = scratch + rowBytes * 2
        zero.initialize(repeating: 0, count: rowBytes)
        let candidates = scratch + rowBytes * 3
        var previous = UnsafePointer(zero)
        for y in 0..<height {
            let source = pixels + y * bytesPerRow
            var row = source
            if channels != 4 {
                let packed = scratch + (y & 1) * rowBytes
                switch channels {
                case 3: for x in 0..<width { (packed + x * 3).update(from: source + x * 4, count: 3) }
                case 2:
                    for x in 0..<width {
                        packed[x * 2] = source[x * 4]
                        packed[x * 2 + 1] = source[x * 4 + 3]
                    }
                default: for x in 0..<width { packed[x] = source[x * 4] }
                }
                row = UnsafePointer(packed)
            }
            let out = output + y * (rowBytes + 1)
            if adaptive {
                let type =
                    switch channels {
                    case 3: chooseFilter(row, previous, rowBytes, bytesPerPixel: 3, candidates)
                    case 4: chooseFilter(row, previous, rowBytes, bytesPerPixel: 4, candidates)
                    default: chooseFilter(row, previous, rowBytes, bytesPerPixel: channels, candidates)
                    }
                out[0] = UInt8(type)
                (out + 1).update(
                    from: type == 0 ? row : UnsafePointer(candidates + (type - 1) * rowBytes),
                    count: rowBytes)
            } else {
                out[0] = 0
                (out + 1).update(from: row, count: rowBytes)
            }
            previous = row
        }
    }

    /// Writes Sub, Up, Average and Paeth of `row` into `candidates` (one row each) and
    /// returns the type (0 to 4) whose residuals, read as signed bytes, have the
    /// smallest sum of magnitudes; the first such in type order.
    @inline(__always)
    private static func chooseFilter(
        _ row: UnsafePointer<UInt8>, _ previous: UnsafePointer<UInt8>, _ count: Int, bytesPerPixel: Int,
        _ candidates: UnsafeMutablePointer<UInt8>
    ) -> Int {
        let (sub, up, average, paeth) = (candidates, candidates + count, candidates + count * 2, candidates + count * 3)
        var sums = SIMD8<Int>.zero
        // The first pixel has nothing to its left: a byte at a time, as does the tail.
        func scalar(_ i: Int) {
            let x = row[i]
            let b = previous[i]
            let (a, c) = i >= bytesPerPixel ? (row[i - bytesPerPixel], previous[i - bytesPerPixel]) : (0, 0)
            let predicted = PNGFilter.paeth(
                SIMD4(repeating: Int16(a)), SIMD4(repeating: Int16(b)), SIMD4(repeating: Int16(c)))[0]
            sub[i] = x &- a
            up[i] = x &- b
            average[i] = x &- UInt8((UInt16(a) + UInt16(b)) >> 1)
            paeth[i] = x &- UInt8(truncatingIfNeeded: predicted)
            sums &+= SIMD8(
                magnitude(x), magnitude(sub[i]), magnitude(up[i]), magnitude(average[i]), magnitude(paeth[i]), 0, 0,
                0)
        }
        let head = min(bytesPerPixel, count)
        for i in 0..<head { scalar(i) }
        var i = head
        let (current, above) = (UnsafeRawPointer(row), UnsafeRawPointer(previous))
        while i + 16 <= count {
            // 16-bit lanes hold the sums of up to 128 vectors (2 bytes of at most 255 each).
            var lanes = (SIMD8<UInt16>.zero, SIMD8<UInt16>.zero, SIMD8<UInt16>.zero, SIMD8<UInt16>.zero)
            var lanePaeth = SIMD8<UInt16>.zero
            let end = min(count - 15, i + 16 * 128)
            while i < end {
                let x = (current + i).loadUnaligned(as: SIMD16<UInt8>.self)
                let a = (current + i - bytesPerPixel).loadUnaligned(as: SIMD16<UInt8>.self)
                let b = (above + i).loadUnaligned(as: SIMD16<UInt8>.self)
                let c = (above + i - bytesPerPixel).loadUnaligned(as: SIMD16<UInt8>.self)
                let s = x &- a
                let u = x &- b
                let v = x &- ((a & b) &+ ((a ^ b) &>> 1))
                let p = x &- paethPredictor(a, b, c)
                UnsafeMutableRawPointer(sub + i).storeBytes(of: s, as: SIMD16<UInt8>.self)
                UnsafeMutableRawPointer(up + i).storeBytes(of: u, as: SIMD16<UInt8>.self)
                UnsafeMutableRawPointer(average + i).storeBytes(of: v, as: SIMD16<UInt8>.self)
                UnsafeMutableRawPointer(paeth + i).storeBytes(of: p, as: SIMD16<UInt8>.self)
                lanes.0 &+= pairSums(x)
                lanes.1 &+= pairSums(s)
                lanes.2 &+= pairSums(u)
                lanes.3 &+= pairSums(v)
                lanePaeth &+= pairSums(p)
                i += 16
            }
            sums &+= SIMD8(
                total(lanes.0), total(lanes.1), total(lanes.2), total(lanes.3), total(lanePaeth), 0, 0, 0)
        }
        while i < count {
            scalar(i)
            i += 1
        }
        var best = 0
        for type in 1..<5 where sums[type] < sums[best] { best = type }
        return best
    }

    /// A residual read as a signed byte, its magnitude.
    @inline(__always)
    private static func magnitude(_ byte: UInt8) -> Int { Int(min(byte, 0 &- byte)) }

    /// The magnitudes of 16 residuals (as signed bytes), summed in pairs into 16-bit lanes.
    @inline(__always)
    private static func pairSums(_ residuals: SIMD16<UInt8>) -> SIMD8<UInt16> {
        let magnitudes = unsafeBitCast(pointwiseMin(residuals, 0 &- residuals), to: SIMD8<UInt16>.self)
        return (magnitudes & 0xFF) &+ (magnitudes &>> 8)
    }

    @inline(__always)
    private static func total(_ lanes: SIMD8<UInt16>) -> Int {
        var sum = 0
        for k in 0..<8 { sum += Int(lanes[k]) }
        return sum
    }

    /// The Paeth predictor of 16 bytes, in 8-bit lanes: |p - a| = |b - c|, |p - b| = |a - c|,
    /// and |p - c| = |(a - c) + (b - c)|, their sum when both differences have one sign
    /// (saturated: only its order against the other two matters) and their difference
    /// otherwise.
    @inline(__always)
    private static func paethPredictor(_ a: SIMD16<UInt8>, _ b: SIMD16<UInt8>, _ c: SIMD16<UInt8>) -> SIMD16<UInt8> {
        let distanceA = pointwiseMax(b, c) &- pointwiseMin(b, c)
        let distanceB = pointwiseMax(a, c) &- pointwiseMin(a, c)
        let sum = distanceA &+ distanceB
        let saturated = sum.replacing(with: 255, where: sum .< distanceA)
        let difference = pointwiseMax(distanceA, distanceB) &- pointwiseMin(distanceA, distanceB)
        let distanceC = saturated.replacing(with: difference, where: (b .< c) .^ (a .< c))
        let bOrC = c.replacing(with: b, where: distanceB .<= distanceC)
        return bOrC.replacing(with: a, where: (distanceA .<= distanceB) .& (distanceA .<= distanceC))
    }

    // MARK: Compression

    /// The zlib stream of `filtered` (rows of `rowStride` bytes): stored at level 0,
    /// otherwise from whichever compressor does best on a band of rows from the middle
    /// (on a tie, the fastest).
    private static func compress(_ filtered: UnsafeRawBufferPointer, rowStride: Int, level: Int) -> [UInt8]? {
        guard level > 0 else { return deflate(filtered, level: 0) }
        let rows = filtered.count / rowStride
        let sampleRows = min(rows, max(rows / 16, (minSampleBytes + rowStride - 1) / rowStride))
        let start = (rows - sampleRows) / 2 * rowStride
        let sample = UnsafeRawBufferPointer(rebasing: filtered[start..<start + sampleRows * rowStride])
        // Fastest first.
        let compressors: [(UnsafeRawBufferPointer) -> [UInt8]?] = [
            HuffmanDeflate.zlib, runLengthDeflate, { deflate($0, level: level) },
        ]
        var best: (index: Int, stream: [UInt8])?
        for (index, compressor) in compressors.enumerated() {
            guard let stream = compressor(sample) else { continue }
            if stream.count < best?.stream.count ?? .max { best = (index, stream) }
        }
        guard let best else { return nil }
        if sampleRows == rows { return best.stream }
        return compressors[best.index](filtered) ?? deflate(filtered, level: level)
    }

    /// libdeflate's zlib stream of `data` at `level` (0 to 12).
    static func deflate(_ data: UnsafeRawBufferPointer, level: Int) -> [UInt8]? {
        guard let compressor = libdeflate_alloc_compressor(Int32(level)) else { return nil }
        defer { libdeflate_free_compressor(compressor) }
        let capacity = libdeflate_zlib_compress_bound(compressor, data.count)
        return compressed(capacity: capacity) {
            libdeflate_zlib_compress(compressor, data.baseAddress, data.count, $0, capacity)
        }
    }

    /// zlib's run-length (Z_RLE) stream of `data`; nil when it would not fit in
    /// libdeflate's bound (then libdeflate's own stream is smaller anyway).
    static func runLengthDeflate(_ data: UnsafeRawBufferPointer) -> [UInt8]? {
        let capacity = libdeflate_zlib_compress_bound(nil, data.count)
        return compressed(capacity: capacity) {
            cpng_zlib_compress_rle(data.baseAddress?.assumingMemoryBound(to: UInt8.self), data.count, $0, capacity)
        }
    }

    /// The bytes `body` writes into a buffer of `capacity`, given how many it wrote (0: failure).
    static func compressed(capacity: Int, _ body: (UnsafeMutablePointer<UInt8>) -> Int) -> [UInt8]? {
        var written = 0
        let bytes = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
            written = body(buffer.baseAddress!)
            count = written
        }
        return written > 0 ? bytes : nil
    }
}

extension [UInt8] {
    fileprivate mutating func appendBigEndian(_ value: UInt32) {
        append(contentsOf: [
            UInt8(value >> 24), UInt8(truncatingIfNeeded: value >> 16),
            UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value),
        ])
    }

    /// Appends a chunk: its length, type, data and the CRC of type and data.
    mutating func appendChunk(_ type: String, _ data: [UInt8]) {
        appendBigEndian(UInt32(data.count))
        let start = count
        append(contentsOf: type.utf8)
        append(contentsOf: data)
        let crc = withUnsafeBufferPointer { libdeflate_crc32(0, $0.baseAddress! + start, $0.count - start) }
        appendBigEndian(crc)
    }
}

extension PNGWriter {
    /// `png` (a file this library wrote) with a chunk of `type` and `data` put before its
    /// first IDAT, where ancillary chunks such as eXIf belong; `png` as it is when no
    /// IDAT is found.
    static func inserting(chunk type: String, _ data: [UInt8], into png: [UInt8]) -> [UInt8] {
        let cursor = BinaryCursor(png, littleEndian: false)
        var offset = 8
        while let length = cursor.uint32(at: offset).map(Int.init), let kind = cursor.uint32(at: offset + 4) {
            if kind == 0x4944_4154 {  // IDAT
                var chunk: [UInt8] = []
                chunk.appendChunk(type, data)
                return Array(png[..<offset]) + chunk + Array(png[offset...])
            }
            guard length <= png.count - offset - 12 else { break }
            offset += 12 + length
        }
        return png
    }
}
