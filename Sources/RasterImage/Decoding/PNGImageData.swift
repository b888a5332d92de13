import CDeflate
import ImageLoaderSupport

/// The image data of the common PNG (8 bits a sample, not interlaced, a few megapixels)
/// read in one piece: its IDAT chunks inflated into one buffer by libdeflate or ISA-L
/// (``ZlibInflate``; 1.6x and 2.3x zlib's streaming speed on photos), and unfiltered
/// with SIMD, instead of row by row through libpng's scalar filters.
///
/// libpng still reads everything before the image data (signature, IHDR, PLTE, tRNS,
/// iCCP, eXIf) and answers for every image this path declines. It declines before
/// writing any row: at any irregularity (a bad CRC, a filter byte out of range, too
/// little or too much compressed data, a critical chunk it does not expect, data that
/// ends early) the caller reads the image again with libpng, which reports it exactly
/// as before. Only well-formed data is decoded here, and to the same pixels, with one
/// exception: ISA-L takes a zlib stream whose unused distance table is incomplete, which
/// zlib refuses (see ``ZlibInflate``); such an image decodes here where libpng reports
/// it corrupt.
struct PNGImageData {
    /// The most inflated image data this path holds at once (an 8-megapixel RGBA
    /// image); larger images stream through libpng, a row at a time.
    static let maxInflatedBytes = 32 << 20

    /// How a pixel's samples become RGBA.
    enum Samples {
        case gray(transparent: UInt8?)
        case grayAlpha
        case rgb(transparent: SIMD3<UInt8>?)
        case rgba
        /// 256 entries of RGBA (indices past the palette are opaque black, as in libpng).
        case palette([SIMD4<UInt8>])

        var channels: Int {
            switch self {
            case .gray, .palette: 1
            case .grayAlpha: 2
            case .rgb: 3
            case .rgba: 4
            }
        }
    }

    let width: Int
    let height: Int
    let samples: Samples

    /// What the chunks after the image data said.
    struct Trailer {
        /// The orientation of an eXIf chunk after the image data, if any.
        var orientation: Orientation?
    }

    /// Writes every row, top to bottom, into `target` (4 bytes a pixel) and returns the
    /// trailer; nil, having written nothing, when this path declines the image.
    /// `reader` holds the whole PNG, its signature at offset 0; it is read in one piece,
    /// so a file much larger than its image data (long ancillary chunks) is declined.
    func read(_ reader: ByteReader, limits: DecodingLimits, into target: RowTarget) -> Trailer? {
        let rowBytes = width * samples.channels
        guard let inflatedBytes = Checked.add(rowBytes, 1).flatMap({ Checked.multiply($0, height) }),
            inflatedBytes <= PNGImageData.maxInflatedBytes,
            reader.size <= inflatedBytes + inflatedBytes / 2 + (1 << 20),
            // The inflated data, the compressed data joined for libdeflate (at most about as large), the file.
            inflatedBytes * 2 + reader.size <= limits.maxWorkingBytes
        else { return nil }
        // A read error declines too: libpng meets it again and reports it.
        let trailer = try? reader.withContiguousBytes { bytes in
            read(bytes, rowBytes: rowBytes, inflatedBytes: inflatedBytes, into: target)
        }
        return trailer ?? nil
    }

    private func read(
        _ bytes: UnsafeRawBufferPointer, rowBytes: Int, inflatedBytes: Int, into target: RowTarget
    ) -> Trailer? {
        var chunks = ChunkWalker(bytes: bytes)
        guard let compressed = chunks.imageData(maxBytes: inflatedBytes + inflatedBytes / 1000 + 1024),
            let trailer = chunks.trailer()
        else { return nil }
        // Slack for the filters' reads past a row (see PNGFilter.undo).
        let inflated = UnsafeMutablePointer<UInt8>.allocate(capacity: inflatedBytes + 8)
        defer { inflated.deallocate() }
        // Inflating writes every byte it is asked for (or the path declines): only the slack is set here.
        (inflated + inflatedBytes).initialize(repeating: 0, count: 8)
        guard ZlibInflate.inflate(compressed, into: inflated, count: inflatedBytes) else { return nil }
        for y in 0..<height where inflated[y * (rowBytes + 1)] > 4 { return nil }
        // Opaque RGB rows go to a resize as they are, without widening them to RGBA first
        // (each row is followed by the next one's filter byte, or by the slack).
        var opaqueRGB: StreamingResizer?
        if case .rgb(transparent: nil) = samples, let resizing = target as? ResizingTarget,
            resizing.resizer.takesOpaqueRGB
        {
            opaqueRGB = resizing.resizer
        }
        let zeros = UnsafeMutablePointer<UInt8>.allocate(capacity: rowBytes + 8)
        defer { zeros.deallocate() }
        zeros.initialize(repeating: 0, count: rowBytes + 8)
        var y = 0
        while y < height {
            let row = inflated + y * (rowBytes + 1) + 1
            let previous = y == 0 ? UnsafePointer(zeros) : UnsafePointer(row - rowBytes - 1)
            var rows = 1
            let types = (row[-1], y + 1 < height ? row[rowBytes] : 0)
            if samples.channels >= 3 && PNGFilter.isPixelwise(types.0) && PNGFilter.isPixelwise(types.1) {
                PNGFilter.undo(
                    types, rows: row, row + rowBytes + 1, previous: previous, count: rowBytes,
                    bytesPerPixel: samples.channels)
                rows = 2
            } else {
                PNGFilter.undo(row[-1], row: row, previous: previous, count: rowBytes, bytesPerPixel: samples.channels)
            }
            for r in 0..<rows {
                if let opaqueRGB {
                    opaqueRGB.consumeOpaqueRGB(row + r * (rowBytes + 1), at: y + r)
                } else {
                    expand(row + r * (rowBytes + 1), into: target.rows(y + r, count: 1))
                    target.commit(y + r, count: 1)
                }
            }
            y += rows
        }
        return trailer
    }

    /// One unfiltered row of samples as RGBA.
    private func expand(_ row: UnsafeMutablePointer<UInt8>, into out: UnsafeMutablePointer<UInt8>) {
        let source = UnsafeRawPointer(row)
        let destination = UnsafeMutableRawPointer(out)
        switch samples {
        case .rgba:
            destination.copyMemory(from: source, byteCount: width * 4)
        case .rgb(let transparent):
            // As 32-bit words (the fourth byte read is the next pixel's, the next row's filter
            // byte, or the slack after the last row): setting a lane of a SIMD4 went through
            // the stack, a stalled load per pixel.
            if let transparent {
                let key = UInt32(transparent[0]) | UInt32(transparent[1]) << 8 | UInt32(transparent[2]) << 16
                for x in 0..<width {
                    let color = UInt32(littleEndian: (source + x * 3).loadUnaligned(as: UInt32.self)) & 0xFF_FFFF
                    let pixel = color == key ? color : color | 0xFF00_0000
                    (destination + x * 4).storeBytes(of: pixel.littleEndian, as: UInt32.self)
                }
            } else {
                for x in 0..<width {
                    let pixel = UInt32(littleEndian: (source + x * 3).loadUnaligned(as: UInt32.self)) | 0xFF00_0000
                    (destination + x * 4).storeBytes(of: pixel.littleEndian, as: UInt32.self)
                }
            }
        case .gray(let transparent):
            for x in 0..<width {
                let g = row[x]
                let alpha: UInt8 = g == transparent ? 0 : 255
                (destination + x * 4).storeBytes(of: SIMD4(g, g, g, alpha), as: SIMD4<UInt8>.self)
            }
        case .grayAlpha:
            for x in 0..<width {
                let (g, a) = (row[2 * x], row[2 * x + 1])
                (destination + x * 4).storeBytes(of: SIMD4(g, g, g, a), as: SIMD4<UInt8>.self)
            }
        case .palette(let entries):
            entries.withUnsafeBufferPointer { table in
                for x in 0..<width {
                    (destination + x * 4).storeBytes(of: table[Int(row[x])], as: SIMD4<UInt8>.self)
                }
            }
        }
    }
}

/// Walks a PNG's chunks in memory, from just after its signature.
private struct ChunkWalker {
    let bytes: UnsafeRawBufferPointer
    var offset = 8

    /// libpng's limit on any chunk other than IDAT (`png_set_chunk_malloc_max` in the shim).
    static let maxChunkBytes = 8_000_000

    struct Header {
        let length: Int
        let type: UInt32
        var isCritical: Bool { type & 0x2000_0000 == 0 }
    }

    static let idat: UInt32 = 0x4944_4154
    static let iend: UInt32 = 0x4945_4E44
    static let exif: UInt32 = 0x6558_4966

    /// The chunks' lengths, types and CRCs, read with bounds checks.
    private let fields: BinaryCursor<UnsafeRawBufferPointer>

    init(bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
        fields = BinaryCursor(bytes, littleEndian: false)
    }

    /// The chunk at `offset`, when it is whole (its CRC included) and well formed: a
    /// length of at most 2^31 - 1, a type of four ASCII letters.
    func header() -> Header? {
        guard let length = fields.uint32(at: offset), let type = fields.uint32(at: offset + 4),
            length <= 0x7FFF_FFFF, Int(length) <= bytes.count - 12 - offset
        else { return nil }
        for shift in stride(from: 0, to: 32, by: 8) {
            let letter = UInt8(truncatingIfNeeded: type >> UInt32(shift)) | 0x20
            guard letter >= 0x61 && letter <= 0x7A else { return nil }
        }
        return Header(length: Int(length), type: type)
    }

    /// Whether the CRC of the chunk `header` at `offset` matches its type and data.
    func intact(_ header: Header) -> Bool {
        let crc = libdeflate_crc32(0, bytes.baseAddress! + offset + 4, 4 + header.length)
        return crc == fields.uint32(at: offset + 8 + header.length)
    }

    /// The data of the chunk `header` at `offset`.
    func data(_ header: Header) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: bytes[(offset + 8)..<(offset + 8 + header.length)])
    }

    mutating func advance(past header: Header) { offset += 12 + header.length }

    /// The data of the IDAT chunks, in order, each CRC checked; nil when there is none,
    /// they are not consecutive, or together exceed `maxBytes`. Leaves `offset` at the
    /// chunk after the last IDAT.
    mutating func imageData(maxBytes: Int) -> [UnsafeRawBufferPointer]? {
        while let header = header(), header.type != ChunkWalker.idat {
            guard header.type != ChunkWalker.iend, header.length <= ChunkWalker.maxChunkBytes else { return nil }
            advance(past: header)
        }
        var parts: [UnsafeRawBufferPointer] = []
        var total = 0
        while let header = header(), header.type == ChunkWalker.idat {
            total += header.length
            guard total <= maxBytes, intact(header) else { return nil }
            parts.append(data(header))
            advance(past: header)
        }
        return total > 0 ? parts : nil
    }

    /// The chunks after the image data, up to IEND: only ancillary ones (whose CRC
    /// errors libpng ignores too), a trailing eXIf read for its orientation.
    mutating func trailer() -> PNGImageData.Trailer? {
        var trailer = PNGImageData.Trailer()
        while let header = header() {
            if header.type == ChunkWalker.iend {
                return header.length == 0 && intact(header) ? trailer : nil
            }
            guard !header.isCritical, header.length <= ChunkWalker.maxChunkBytes else { return nil }
            if header.type == ChunkWalker.exif && trailer.orientation == nil && intact(header) {
                trailer.orientation = EXIF.orientation(in: data(header).bindMemory(to: UInt8.self))
            }
            advance(past: header)
        }
        return nil
    }
}

/// PNG's five row filters, undone in place (8-bit samples).
enum PNGFilter {
    /// Undoes filter `type` (0 to 4) on `row`, `count` bytes of pixels `bytesPerPixel`
    /// wide, given the unfiltered row above (zeros for the first). Rows of 3 or 4 bytes
    /// a pixel are done a pixel at a time in SIMD; both rows may be read 8 bytes past
    /// `count`, and `row`'s bytes there are written back unchanged.
    static func undo(
        _ type: UInt8, row: UnsafeMutablePointer<UInt8>, previous: UnsafePointer<UInt8>, count: Int,
        bytesPerPixel: Int
    ) {
        switch (type, bytesPerPixel) {
        case (2, _):
            for i in 0..<count { row[i] &+= previous[i] }
        case (1...4, 4):
            pixelwise(type, row, previous, count, bytesPerPixel: 4)
        case (1...4, 3):
            pixelwise(type, row, previous, count, bytesPerPixel: 3)
        case (1, _):
            for i in bytesPerPixel..<max(bytesPerPixel, count) { row[i] &+= row[i - bytesPerPixel] }
        case (3, _):
            for i in 0..<min(bytesPerPixel, count) { row[i] &+= previous[i] >> 1 }
            for i in bytesPerPixel..<max(bytesPerPixel, count) {
                row[i] &+= UInt8((UInt16(row[i - bytesPerPixel]) + UInt16(previous[i])) >> 1)
            }
        case (4, _):
            for i in 0..<count {
                let left = i >= bytesPerPixel ? Int16(row[i - bytesPerPixel]) : 0
                let upLeft = i >= bytesPerPixel ? Int16(previous[i - bytesPerPixel]) : 0
                let up = Int16(previous[i])
                let predicted = paeth(SIMD4(repeating: left), SIMD4(repeating: up), SIMD4(repeating: upLeft))
                row[i] &+= UInt8(truncatingIfNeeded: predicted[0])
            }
        default:
            break
        }
    }

    /// Undoes Sub, Average or Paeth (`types`, 1, 3 or 4 each) on two consecutive rows at
    /// once, the second a pixel behind the first. Each pixel waits on the one to its
    /// left (a chain of a dozen steps for Paeth); two rows make two independent chains,
    /// which the processor runs side by side. Pixels of 3 or 4 bytes; the rows are read
    /// and written as in ``undo(_:row:previous:count:bytesPerPixel:)``.
    static func undo(
        _ types: (UInt8, UInt8), rows first: UnsafeMutablePointer<UInt8>, _ second: UnsafeMutablePointer<UInt8>,
        previous: UnsafePointer<UInt8>, count: Int, bytesPerPixel: Int
    ) {
        if bytesPerPixel == 4 {
            pairwise(types, first, second, previous, count, bytesPerPixel: 4)
        } else {
            pairwise(types, first, second, previous, count, bytesPerPixel: 3)
        }
    }

    /// Whether filter `type` waits on the pixel to the left (Sub, Average, Paeth):
    /// two such rows are undone together.
    static func isPixelwise(_ type: UInt8) -> Bool { type == 1 || type == 3 || type == 4 }

    /// The prediction of filter `type` (1, 3 or 4) for each lane.
    @inline(__always)
    private static func predict(
        _ type: UInt8, _ left: SIMD4<Int16>, _ up: SIMD4<Int16>, _ upLeft: SIMD4<Int16>
    ) -> SIMD4<Int16> {
        switch type {
        case 1: left
        case 3: (left &+ up) &>> 1
        default: paeth(left, up, upLeft)
        }
    }

    /// Stores an unfiltered pixel's bytes; lanes in `keep` (the fourth of a 3-byte
    /// pixel, which belongs to the next one) get back their `raw` byte.
    @inline(__always)
    private static func store(
        _ value: SIMD4<Int16>, keeping raw: SIMD4<UInt8>, where keep: SIMDMask<SIMD4<Int8>>,
        at pointer: UnsafeMutableRawPointer
    ) {
        let bytes = SIMD4<UInt8>(truncatingIfNeeded: value).replacing(with: raw, where: keep)
        pointer.storeBytes(of: bytes, as: SIMD4<UInt8>.self)
    }

    @inline(__always)
    private static func pairwise(
        _ types: (UInt8, UInt8), _ first: UnsafeMutablePointer<UInt8>, _ second: UnsafeMutablePointer<UInt8>,
        _ previous: UnsafePointer<UInt8>, _ count: Int, bytesPerPixel: Int
    ) {
        let (rowA, rowB) = (UnsafeMutableRawPointer(first), UnsafeMutableRawPointer(second))
        let above = UnsafeRawPointer(previous)
        let keep = SIMDMask<SIMD4<Int8>>(arrayLiteral: false, false, false, bytesPerPixel == 3)
        // The first row's pixel i, and the second row's pixel i - 1, whose pixels above
        // (the first row's i - 1 and i - 2) are kept in registers, not read back.
        var (leftA, upLeftA) = (SIMD4<Int16>.zero, SIMD4<Int16>.zero)
        var (leftB, upLeftB) = (SIMD4<Int16>.zero, SIMD4<Int16>.zero)
        var bytesA = rowA.loadUnaligned(as: SIMD4<UInt8>.self)
        var bytesB = rowB.loadUnaligned(as: SIMD4<UInt8>.self)
        var i = 0
        while i < count {
            let nextA = (rowA + i + bytesPerPixel).loadUnaligned(as: SIMD4<UInt8>.self)
            let upA = SIMD4<Int16>(truncatingIfNeeded: (above + i).loadUnaligned(as: SIMD4<UInt8>.self))
            let valueA = (SIMD4<Int16>(truncatingIfNeeded: bytesA) &+ predict(types.0, leftA, upA, upLeftA)) & 0xFF
            store(valueA, keeping: bytesA, where: keep, at: rowA + i)
            if i > 0 {
                let nextB = (rowB + i).loadUnaligned(as: SIMD4<UInt8>.self)
                let predicted = predict(types.1, leftB, leftA, upLeftB)
                let valueB = (SIMD4<Int16>(truncatingIfNeeded: bytesB) &+ predicted) & 0xFF
                store(valueB, keeping: bytesB, where: keep, at: rowB + i - bytesPerPixel)
                (leftB, upLeftB, bytesB) = (valueB, leftA, nextB)
            }
            (leftA, upLeftA, bytesA) = (valueA, upA, nextA)
            i += bytesPerPixel
        }
        if count > 0 {
            let valueB = (SIMD4<Int16>(truncatingIfNeeded: bytesB) &+ predict(types.1, leftB, leftA, upLeftB)) & 0xFF
            store(valueB, keeping: bytesB, where: keep, at: rowB + count - bytesPerPixel)
        }
    }

    /// The Paeth predictor of each lane: whichever of left, up and up-left is nearest
    /// to left + up - up-left, preferring them in that order. Written with min and max
    /// of 16-bit lanes (one instruction each in SSE2) to keep the chain from one pixel
    /// to the next short.
    @inline(__always)
    static func paeth(_ left: SIMD4<Int16>, _ up: SIMD4<Int16>, _ upLeft: SIMD4<Int16>) -> SIMD4<Int16> {
        let towardUp = up &- upLeft
        let towardLeft = left &- upLeft
        let both = towardUp &+ towardLeft
        let distanceLeft = pointwiseMax(towardUp, 0 &- towardUp)
        let distanceUp = pointwiseMax(towardLeft, 0 &- towardLeft)
        let distanceUpLeft = pointwiseMax(both, 0 &- both)
        let nearest = pointwiseMin(pointwiseMin(distanceLeft, distanceUp), distanceUpLeft)
        let upOrUpLeft = upLeft.replacing(with: up, where: distanceUp .== nearest)
        return upOrUpLeft.replacing(with: left, where: distanceLeft .== nearest)
    }

    /// Sub (1), Average (3) or Paeth (4) a pixel at a time, as 16-bit lanes; the fourth
    /// lane of a 3-byte pixel keeps its byte. Inlined for each constant pixel width.
    @inline(__always)
    private static func pixelwise(
        _ type: UInt8, _ row: UnsafeMutablePointer<UInt8>, _ previous: UnsafePointer<UInt8>, _ count: Int,
        bytesPerPixel: Int
    ) {
        let (current, above) = (UnsafeMutableRawPointer(row), UnsafeRawPointer(previous))
        let keep = SIMDMask<SIMD4<Int8>>(arrayLiteral: false, false, false, bytesPerPixel == 3)
        var left = SIMD4<Int16>.zero
        var upLeft = SIMD4<Int16>.zero
        var i = 0
        // Each pixel's bytes are loaded before the pixel before it is stored: a 3-byte
        // pixel's load would otherwise overlap that store and wait for it.
        var bytes = current.loadUnaligned(as: SIMD4<UInt8>.self)
        while i < count {
            let next = (current + i + bytesPerPixel).loadUnaligned(as: SIMD4<UInt8>.self)
            let raw = SIMD4<Int16>(truncatingIfNeeded: bytes)
            let up = SIMD4<Int16>(truncatingIfNeeded: (above + i).loadUnaligned(as: SIMD4<UInt8>.self))
            let value = (raw &+ predict(type, left, up, upLeft)) & 0xFF
            store(value, keeping: bytes, where: keep, at: current + i)
            bytes = next
            left = value
            upLeft = up
            i += bytesPerPixel
        }
    }
}
