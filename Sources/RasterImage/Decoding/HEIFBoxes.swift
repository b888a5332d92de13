/// What the boxes of a HEIF or AVIF file (ISO/IEC 23008-12, an ISO base media file)
/// say about its primary image, read before any codec sees the file: the stored size
/// (`ispe`), the tiles of a grid (`dimg` references), and the transformations
/// (`clap`, `irot`, `imir`) in the order the file lists them.
///
/// libheif 1.15 applies the transformations itself but does not say what they are, and
/// the image's ``Orientation`` is the rotation and mirroring as metadata (as EXIF
/// orientation is for JPEG): so this reads them. Every read is bounds-checked; boxes
/// are counted against ``DecodingLimits/maxMetadataBlocks``; what this cannot make sense
/// of is left to the codec library to report.
struct HEIFBoxes {
    /// A transformative property of the primary image.
    enum Transform: Equatable {
        /// `clap`: the clean aperture, as a rectangle of the stored image.
        case crop(x: Int, y: Int, width: Int, height: Int)
        /// `irot`: turned counter-clockwise by `quarterTurns` × 90°.
        case rotate(quarterTurns: Int)
        /// `imir`: mode 0 exchanges top and bottom, mode 1 left and right (HEIF's
        /// amendment 2 wording; libavif's `avifImageMirror.mode`).
        case mirror(mode: Int)
    }

    /// The major brand and the compatible brands of `ftyp`.
    var brands: [String] = []
    /// The primary item's ID (`pitm`).
    var primaryItem: UInt32?
    /// How many items the file declares (`iinf`).
    var itemCount = 0
    /// Whether a top-level box (the media data, usually) runs past the end of the bytes:
    /// the file was cut short.
    var isTruncated = false
    /// The stored size of the image `item` (`ispe`), before any transformation.
    var storedSize: (width: Int, height: Int)? { size(of: item) }
    /// The image's transformations, in the order listed.
    var transforms: [Transform] { transforms(of: item) }
    /// The images a grid is made of (the image's `dimg` references).
    var tileItems: [UInt32] { references[item] ?? [] }
    /// The stored size of the first tile of a grid.
    var tileSize: (width: Int, height: Int)? { tileItems.first.flatMap(size(of:)) }

    /// The coded samples of a pixel in quarters (4:0:0 4, 4:2:0 6, 4:2:2 8, 4:4:4 12),
    /// from the image's (or its first tile's) `hvcC` or `av1C`; `nil` when neither says.
    var chromaQuarters: Int? {
        for candidate in [item] + tileItems.prefix(1) {
            for index in associations[candidate] ?? [] {
                guard let property = property(index) else { continue }
                let start = property.body.lowerBound
                if property.type == "hvcC", let format = reader.uint8(start + 16) {
                    return [4, 6, 8, 12][Int(format & 3)]
                }
                if property.type == "av1C", let flags = reader.uint8(start + 2) {
                    // mono_chrome, chroma_subsampling_x, chroma_subsampling_y: bits 4, 3, 2.
                    if flags & 0x10 != 0 { return 4 }
                    switch (flags >> 3 & 1, flags >> 2 & 1) {
                    case (1, 1): return 6
                    case (1, 0): return 8
                    default: return 12
                    }
                }
            }
        }
        return nil
    }

    /// Whether the image is coded predictively from other images (a `pred` reference,
    /// HEIF's 'pred' brand): its picture is only the difference from theirs.
    var isPredicted: Bool { predictedItems.contains(item) }

    /// The item the facts above describe: the primary item unless ``describing(_:)`` chose another.
    private(set) var item: UInt32 = 0
    private var properties: [(type: String, body: Range<Int>)] = []
    private var associations: [UInt32: [Int]] = [:]
    private var references: [UInt32: [UInt32]] = [:]
    private var predictedItems: Set<UInt32> = []
    private var reader: BoxReader

    /// The same boxes describing image `item` (the one libheif decodes, when it chose
    /// another than `pitm` names).
    func describing(_ item: UInt32) -> HEIFBoxes {
        var copy = self
        copy.item = item
        return copy
    }

    private func property(_ index: Int) -> (type: String, body: Range<Int>)? {
        index >= 1 && index <= properties.count ? properties[index - 1] : nil
    }

    private func size(of item: UInt32) -> (width: Int, height: Int)? {
        for index in associations[item] ?? [] {
            guard let property = property(index), property.type == "ispe" else { continue }
            guard let width = reader.uint32(property.body.lowerBound + 4),
                let height = reader.uint32(property.body.lowerBound + 8)
            else { return nil }
            return (Int(width), Int(height))
        }
        return nil
    }

    private func transforms(of item: UInt32) -> [Transform] {
        var transforms: [Transform] = []
        for index in associations[item] ?? [] {
            guard let property = property(index) else { continue }
            let start = property.body.lowerBound
            switch property.type {
            case "irot":
                if let angle = reader.uint8(start) { transforms.append(.rotate(quarterTurns: Int(angle & 3))) }
            case "imir":
                if let mode = reader.uint8(start) { transforms.append(.mirror(mode: Int(mode & 1))) }
            case "clap":
                if let stored = size(of: item),
                    let crop = reader.cleanAperture(start, width: stored.width, height: stored.height)
                {
                    transforms.append(crop)
                }
            default: break
            }
        }
        return transforms
    }

    /// How an image with these transformations is shown, as an orientation, and the
    /// crop to apply to the stored pixels first; `nil` when the transformations cannot
    /// be written that way (a crop after a rotation, or more than one of a kind), and
    /// the codec library must apply them itself.
    var orientationAndCrop: (orientation: Orientation, crop: (x: Int, y: Int, width: Int, height: Int)?)? {
        var crop: (x: Int, y: Int, width: Int, height: Int)?
        var rotation: Int?
        var mirror: Int?
        for transform in transforms {
            switch transform {
            case .crop(let x, let y, let width, let height):
                guard crop == nil, rotation == nil, mirror == nil else { return nil }
                crop = (x, y, width, height)
            case .rotate(let turns):
                guard rotation == nil, mirror == nil else { return nil }
                rotation = turns
            case .mirror(let mode):
                guard mirror == nil else { return nil }
                mirror = mode
            }
        }
        return (HEIFBoxes.orientation(quarterTurns: rotation ?? 0, mirror: mirror), crop)
    }

    /// The orientation of an image turned counter-clockwise by `quarterTurns` × 90°,
    /// then mirrored (`mirror`: 0 top to bottom, 1 left to right), as EXIF writes it.
    static func orientation(quarterTurns: Int, mirror: Int?) -> Orientation {
        // Counter-clockwise quarter turns 0...3 are EXIF 1, 8, 3, 6.
        switch (quarterTurns & 3, mirror) {
        case (0, nil): .up
        case (1, nil): .left
        case (2, nil): .down
        case (3, nil): .right
        case (0, 1): .upMirrored
        case (0, _): .downMirrored
        case (2, 1): .downMirrored
        case (2, _): .upMirrored
        // 90° clockwise then left-right is the transpose (5); then top-bottom, the transverse (7).
        case (3, 1): .leftMirrored
        case (3, _): .rightMirrored
        // 90° counter-clockwise is 90° clockwise and a half turn: the mirrors swap.
        case (1, 1): .rightMirrored
        default: .leftMirrored
        }
    }

    /// Reads the boxes of `bytes`; throws only for a box count over the limit.
    init(_ bytes: UnsafeRawBufferPointer, limits: DecodingLimits, format: ImageFormat) throws {
        let reader = BoxReader(bytes: bytes)
        self.reader = reader
        var budget = Budget(limit: limits.maxMetadataBlocks, format: format)
        var metaRange: Range<Int>?
        let topLevel = try reader.boxes(in: 0..<bytes.count, budget: &budget)
        isTruncated = reader.runsPastEnd(after: topLevel.last?.body.upperBound ?? 0)
        for box in topLevel {
            switch box.type {
            case "ftyp": brands = reader.brands(box.body)
            case "meta" where metaRange == nil: metaRange = box.body
            default: break
            }
        }
        guard let meta = metaRange, meta.count >= 4 else { return }
        for box in try reader.boxes(in: meta.lowerBound + 4..<meta.upperBound, budget: &budget) {
            switch box.type {
            case "pitm":
                let version = reader.uint8(box.body.lowerBound)
                primaryItem =
                    version == 0
                    ? reader.uint16(box.body.lowerBound + 4).map(UInt32.init) : reader.uint32(box.body.lowerBound + 4)
            case "iinf":
                let version = reader.uint8(box.body.lowerBound) ?? 0
                let start = box.body.lowerBound + (version == 0 ? 6 : 8)
                guard start <= box.body.upperBound else { break }
                itemCount += try reader.boxes(in: start..<box.body.upperBound, budget: &budget)
                    .filter { $0.type == "infe" }.count
            case "iref":
                let wide = reader.uint8(box.body.lowerBound) != 0
                for reference in try reader.boxes(in: box.body.lowerBound + 4..<box.body.upperBound, budget: &budget)
                where reference.type == "dimg" || reference.type == "pred" {
                    let targets = reader.references(reference.body, wide: wide)
                    try budget.spend(targets.to.count)
                    if reference.type == "pred" {
                        predictedItems.insert(targets.from)
                    } else {
                        references[targets.from, default: []] += targets.to
                    }
                }
            case "iprp":
                for child in try reader.boxes(in: box.body, budget: &budget) {
                    if child.type == "ipco" {
                        properties = try reader.boxes(in: child.body, budget: &budget).map { ($0.type, $0.body) }
                    } else if child.type == "ipma" {
                        try reader.associations(child.body, into: &associations, budget: &budget)
                    }
                }
            default: break
            }
        }
        item = primaryItem ?? 0
    }

    /// Counts boxes against ``DecodingLimits/maxMetadataBlocks``.
    struct Budget {
        var left: Int
        let limit: Int
        let format: ImageFormat

        init(limit: Int, format: ImageFormat) {
            self.left = limit
            self.limit = limit
            self.format = format
        }

        mutating func spend(_ count: Int) throws {
            left -= count
            if left < 0 { throw ImageDecodingError(.tooManyMetadataBlocks(limit: limit), format: format) }
        }
    }
}

/// Bounds-checked big-endian reads and box walks over a file's bytes.
struct BoxReader {
    let bytes: UnsafeRawBufferPointer

    func uint8(_ offset: Int) -> UInt8? {
        offset >= 0 && offset < bytes.count ? bytes[offset] : nil
    }

    func uint16(_ offset: Int) -> UInt16? {
        guard let a = uint8(offset), let b = uint8(offset + 1) else { return nil }
        return UInt16(a) << 8 | UInt16(b)
    }

    func uint32(_ offset: Int) -> UInt32? {
        guard let a = uint16(offset), let b = uint16(offset + 2) else { return nil }
        return UInt32(a) << 16 | UInt32(b)
    }

    func uint64(_ offset: Int) -> UInt64? {
        guard let a = uint32(offset), let b = uint32(offset + 4) else { return nil }
        return UInt64(a) << 32 | UInt64(b)
    }

    func fourCC(_ offset: Int) -> String? {
        guard offset >= 0, offset + 4 <= bytes.count else { return nil }
        let scalars = (offset..<offset + 4).map { Character(Unicode.Scalar(bytes[$0])) }
        return String(scalars)
    }

    /// The boxes that fill `range`, each with its type and body; stops at the first box
    /// that does not fit.
    func boxes(in range: Range<Int>, budget: inout HEIFBoxes.Budget) throws -> [(type: String, body: Range<Int>)] {
        var result: [(type: String, body: Range<Int>)] = []
        var offset = range.lowerBound
        while offset + 8 <= range.upperBound {
            guard let size32 = uint32(offset), let type = fourCC(offset + 4) else { break }
            var header = 8
            var size = Int(size32)
            if size32 == 1 {
                guard let large = uint64(offset + 8), large <= UInt64(range.upperBound - offset) else { break }
                size = Int(large)
                header = 16
            } else if size32 == 0 {
                size = range.upperBound - offset
            }
            guard size >= header, size <= range.upperBound - offset else { break }
            try budget.spend(1)
            result.append((type, offset + header..<offset + size))
            offset += size
        }
        return result
    }

    /// Whether a box header at `offset` declares more bytes than there are. A few bytes
    /// too few for a header (padding after the last box) are not a box.
    func runsPastEnd(after offset: Int) -> Bool {
        guard offset + 8 <= bytes.count, let size = uint32(offset) else { return false }
        if size == 1 { return uint64(offset + 8).map { $0 > UInt64(bytes.count - offset) } ?? true }
        return size > 1 && Int(size) > bytes.count - offset
    }

    /// A reference box's `from` item and its `to` items (16- or 32-bit IDs).
    func references(_ body: Range<Int>, wide: Bool) -> (from: UInt32, to: [UInt32]) {
        let idSize = wide ? 4 : 2
        let read: (Int) -> UInt32? = { wide ? uint32($0) : uint16($0).map(UInt32.init) }
        guard let from = read(body.lowerBound), let count = uint16(body.lowerBound + idSize) else { return (0, []) }
        var targets: [UInt32] = []
        var offset = body.lowerBound + idSize + 2
        for _ in 0..<Int(count) {
            guard offset + idSize <= body.upperBound, let target = read(offset) else { break }
            targets.append(target)
            offset += idSize
        }
        return (from, targets)
    }

    func brands(_ body: Range<Int>) -> [String] {
        var brands: [String] = []
        if let major = fourCC(body.lowerBound) { brands.append(major) }
        var offset = body.lowerBound + 8
        while offset + 4 <= body.upperBound, brands.count < 64, let brand = fourCC(offset) {
            brands.append(brand)
            offset += 4
        }
        return brands
    }

    /// `ipma`: every item's property indices (1-based; 0 is none).
    func associations(
        _ body: Range<Int>, into associations: inout [UInt32: [Int]], budget: inout HEIFBoxes.Budget
    ) throws {
        guard let version = uint8(body.lowerBound), let flags = uint32(body.lowerBound).map({ $0 & 0xFF_FFFF }),
            let count = uint32(body.lowerBound + 4)
        else { return }
        var offset = body.lowerBound + 8
        for _ in 0..<min(Int(count), body.count) {
            let id: UInt32?
            if version < 1 {
                id = uint16(offset).map(UInt32.init)
                offset += 2
            } else {
                id = uint32(offset)
                offset += 4
            }
            guard let id, let associationCount = uint8(offset) else { return }
            offset += 1
            var indices: [Int] = []
            for _ in 0..<Int(associationCount) {
                if flags & 1 != 0 {
                    guard let value = uint16(offset) else { return }
                    indices.append(Int(value & 0x7FFF))
                    offset += 2
                } else {
                    guard let value = uint8(offset) else { return }
                    indices.append(Int(value & 0x7F))
                    offset += 1
                }
            }
            try budget.spend(1)
            associations[id, default: []] += indices
        }
    }

    /// `clap` as a rectangle of a `width` × `height` image, rounded as libheif rounds it
    /// and clamped to the image; `nil` when it is malformed or empty.
    func cleanAperture(_ start: Int, width: Int, height: Int) -> HEIFBoxes.Transform? {
        var values: [Int64] = []
        for index in 0..<8 {
            guard let value = uint32(start + index * 4) else { return nil }
            // Offsets (the last four) are signed numerators over unsigned denominators.
            values.append(index == 4 || index == 6 ? Int64(Int32(bitPattern: value)) : Int64(value))
        }
        guard values[1] != 0, values[3] != 0, values[5] != 0, values[7] != 0 else { return nil }
        let apertureWidth = Double(values[0]) / Double(values[1])
        let apertureHeight = Double(values[2]) / Double(values[3])
        let centreX = Double(values[4]) / Double(values[5]) + Double(width - 1) / 2
        let centreY = Double(values[6]) / Double(values[7]) + Double(height - 1) / 2
        let left = max(0, (centreX - (apertureWidth - 1) / 2).rounded())
        let right = min(Double(width - 1), (centreX + (apertureWidth - 1) / 2).rounded())
        let top = max(0, (centreY - (apertureHeight - 1) / 2).rounded())
        let bottom = min(Double(height - 1), (centreY + (apertureHeight - 1) / 2).rounded())
        guard left.isFinite, right.isFinite, top.isFinite, bottom.isFinite, left <= right, top <= bottom else {
            return nil
        }
        return .crop(x: Int(left), y: Int(top), width: Int(right - left) + 1, height: Int(bottom - top) + 1)
    }
}
