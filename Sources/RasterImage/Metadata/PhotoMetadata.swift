import Foundation

/// The EXIF fields a page shows about a photo: when it was taken, with what, and where.
/// Read from the EXIF block of a JPEG (APP1), PNG (`eXIf`), WebP (`EXIF`) or TIFF
/// (the file itself), without trusting any offset or count in it: every read is
/// bounds-checked, at most 512 entries are looked at per directory, and text
/// is cut at 256 bytes.
///
/// ```swift
/// if let photo = PhotoMetadata(fileBytes: bytes) {
///     print(photo.dateTaken ?? "-", photo.make ?? "", photo.model ?? "")
/// }
/// ```
public struct PhotoMetadata: Sendable, Hashable, Codable {
    /// `DateTimeOriginal` (else `DateTime`), as ISO 8601 without a zone (`2024-05-01T12:30:00`):
    /// EXIF states no time zone.
    public var dateTaken: String?
    /// The camera's maker and model (`Make`, `Model`).
    public var make: String?
    public var model: String?
    /// The lens (`LensModel`).
    public var lens: String?
    /// Where it was taken, in degrees (south and west negative), from the GPS directory.
    public var latitude: Double?
    public var longitude: Double?

    static let maxEntries = 512
    static let maxText = 256

    /// No fields.
    public init() {}

    /// Whether no field was found.
    public var isEmpty: Bool { self == PhotoMetadata() }

    /// The fields of the EXIF block in `fileBytes` (a whole image file), or `nil` when
    /// it has no EXIF block or none of these fields.
    public init?(fileBytes: some Collection<UInt8>) {
        // Read in place when the bytes are an array already (a whole source: no copy).
        let bytes = fileBytes as? [UInt8] ?? Array(fileBytes.prefix(64 << 20))
        guard let block = PhotoMetadata.exifBlock(in: bytes), let parsed = PhotoMetadata(exif: block[...]),
            !parsed.isEmpty
        else { return nil }
        self = parsed
    }

    /// The fields of an EXIF block (a TIFF structure, "Exif\0\0" first or not).
    init?(exif block: ArraySlice<UInt8>) {
        guard let (tiff, first) = TIFFReader.open(block) else { return nil }
        self.init()
        let root = tiff.entries(at: first)
        make = root[0x010F].flatMap(tiff.text)
        model = root[0x0110].flatMap(tiff.text)
        var date = root[0x0132].flatMap(tiff.text)
        if let exifOffset = root[0x8769].flatMap(tiff.integer) {
            let exif = tiff.entries(at: exifOffset)
            date = exif[0x9003].flatMap(tiff.text) ?? date
            lens = exif[0xA434].flatMap(tiff.text)
        }
        dateTaken = date.flatMap(PhotoMetadata.isoDate)
        if let gpsOffset = root[0x8825].flatMap(tiff.integer) {
            let gps = tiff.entries(at: gpsOffset)
            func coordinate(_ value: UInt16, _ reference: UInt16, negative: String) -> Double? {
                guard let parts = gps[value].flatMap(tiff.rationals), parts.count == 3 else { return nil }
                let degrees = parts[0] + parts[1] / 60 + parts[2] / 3600
                guard degrees.isFinite else { return nil }
                return gps[reference].flatMap(tiff.text)?.uppercased() == negative ? -degrees : degrees
            }
            latitude = coordinate(2, 1, negative: "S").flatMap { abs($0) <= 90 ? $0 : nil }
            longitude = coordinate(4, 3, negative: "W").flatMap { abs($0) <= 180 ? $0 : nil }
            if latitude == nil || longitude == nil { (latitude, longitude) = (nil, nil) }
        }
    }

    /// What a result made from a photo keeps of its EXIF.
    public enum Kept: Sendable, Hashable {
        /// The whole block.
        case all
        /// Only the `Copyright` and `Artist` fields.
        case copyright
    }

    /// An EXIF block (a TIFF structure) to write into a result made from `fileBytes`:
    /// the source's whole block, its `Orientation` set to 1 when `upright` (the result's
    /// pixels are turned already), or a new block holding only its `Copyright` and
    /// `Artist`. `nil` when the source has no EXIF (or none of those fields), or the block
    /// is larger than a JPEG's APP1 can hold (65,527 bytes).
    ///
    /// ```swift
    /// var encoder = JPEGEncoder(quality: 80)
    /// encoder.exif = PhotoMetadata.outputBlock(from: sourceBytes, keeping: .copyright, upright: true)
    /// ```
    public static func outputBlock(from fileBytes: some Collection<UInt8>, keeping: Kept, upright: Bool) -> [UInt8]? {
        // Read in place when the bytes are an array already (a whole source: no copy).
        let bytes = fileBytes as? [UInt8] ?? Array(fileBytes.prefix(64 << 20))
        guard let found = exifBlock(in: bytes) else { return nil }
        guard let (tiff, first) = TIFFReader.open(found) else { return nil }
        var block = tiff.cursor.bytes
        let littleEndian = tiff.cursor.littleEndian
        let root = tiff.entries(at: first)
        switch keeping {
        case .all:
            guard block.count <= 65_527 else { return nil }
            if upright, let orientation = root[0x0112], orientation.type == 3, orientation.valueOffset >= 0,
                orientation.valueOffset + 2 <= block.count
            {
                (block[orientation.valueOffset], block[orientation.valueOffset + 1]) = littleEndian ? (1, 0) : (0, 1)
            }
            return block
        case .copyright:
            let fields = [(UInt16(0x013B), root[0x013B].flatMap(tiff.text)), (0x8298, root[0x8298].flatMap(tiff.text))]
                .compactMap { tag, text in text.map { (tag, Array($0.utf8) + [0]) } }
            guard !fields.isEmpty else { return nil }
            // Big-endian: "MM", 42, the first directory at 8; its entries; no next directory; the texts.
            var out: [UInt8] = [0x4D, 0x4D, 0, 42, 0, 0, 0, 8]
            func append16(_ value: Int) { out += [UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
            func append32(_ value: Int) {
                append16(value >> 16)
                append16(value & 0xFFFF)
            }
            append16(fields.count)
            var dataOffset = 8 + 2 + fields.count * 12 + 4
            var data: [UInt8] = []
            for (tag, text) in fields {
                append16(Int(tag))
                append16(2)
                append32(text.count)
                if text.count <= 4 {
                    out += text + [UInt8](repeating: 0, count: 4 - text.count)
                } else {
                    append32(dataOffset)
                    data += text
                    dataOffset += text.count
                }
            }
            append32(0)
            return out + data
        }
    }

    /// "YYYY:MM:DD HH:MM:SS" as "YYYY-MM-DDTHH:MM:SS"; `nil` for anything else.
    static func isoDate(_ text: String) -> String? {
        let scalars = Array(text.utf8.prefix(19))
        guard scalars.count == 19 else { return nil }
        let digits = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18]
        guard digits.allSatisfy({ (48...57).contains(scalars[$0]) }), scalars[4] == 58, scalars[7] == 58,
            scalars[13] == 58, scalars[16] == 58, scalars[10] == 32 || scalars[10] == 84
        else { return nil }
        var out = scalars
        (out[4], out[7], out[10]) = (45, 45, 84)
        let result = String(decoding: out, as: UTF8.self)
        return result.hasPrefix("0000") ? nil : result
    }

    /// The EXIF block of a JPEG, PNG, WebP or TIFF file; `nil` for other formats or none.
    static func exifBlock(in bytes: [UInt8]) -> ArraySlice<UInt8>? {
        let cursor = BinaryCursor(bytes, littleEndian: false)
        if bytes.starts(with: [0xFF, 0xD8]) {
            // JPEG: segments up to the first scan.
            var offset = 2
            while let marker = cursor.uint8(at: offset), marker == 0xFF, let kind = cursor.uint8(at: offset + 1) {
                if kind == 0xD9 || kind == 0xDA { break }
                if kind == 0xFF || kind == 0x01 || (0xD0...0xD7).contains(kind) {
                    offset += kind == 0xFF ? 1 : 2
                    continue
                }
                guard let length = cursor.uint16(at: offset + 2).map(Int.init), length >= 2 else { break }
                let start = offset + 4
                let end = offset + 2 + length
                guard end <= bytes.count else { break }
                if kind == 0xE1, bytes[start..<end].starts(with: Array("Exif".utf8) + [0, 0]) {
                    return bytes[start..<end]
                }
                offset = end
            }
            return nil
        }
        if bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) {
            // PNG: chunks up to the image data.
            var offset = 8
            while let length = cursor.uint32(at: offset).map(Int.init), let type = cursor.uint32(at: offset + 4) {
                let start = offset + 8
                guard length <= bytes.count - start else { break }
                if type == 0x6558_4966 { return bytes[start..<(start + length)] }  // eXIf
                if type == 0x4944_4154 || type == 0x4945_4E44 { break }  // IDAT, IEND
                offset = start + length + 4
            }
            return nil
        }
        if bytes.count >= 12, bytes.starts(with: Array("RIFF".utf8)), bytes[8..<12].elementsEqual("WEBP".utf8) {
            let little = BinaryCursor(bytes, littleEndian: true)
            var offset = 12
            while let type = cursor.uint32(at: offset), let length = little.uint32(at: offset + 4).map(Int.init) {
                let start = offset + 8
                guard length <= bytes.count - start else { break }
                if type == 0x4558_4946 { return bytes[start..<(start + length)] }  // EXIF
                offset = start + length + (length & 1)
            }
            return nil
        }
        if bytes.starts(with: [0x49, 0x49, 0x2A, 0x00]) || bytes.starts(with: [0x4D, 0x4D, 0x00, 0x2A]) {
            return bytes[...]
        }
        return nil
    }
}

/// Reads TIFF directories and values through a bounds-checked cursor.
struct TIFFReader {
    let cursor: BinaryCursor<[UInt8]>

    /// A reader of an EXIF block ("Exif\0\0" first or not) and the offset of its first
    /// directory; `nil` unless it starts with a TIFF header.
    static func open(_ block: some Collection<UInt8>) -> (reader: TIFFReader, firstDirectory: Int)? {
        var bytes = Array(block)
        let prefix: [UInt8] = Array("Exif".utf8) + [0, 0]
        if bytes.starts(with: prefix) { bytes.removeFirst(prefix.count) }
        guard bytes.count >= 8 else { return nil }
        let littleEndian: Bool
        switch (bytes[0], bytes[1]) {
        case (0x49, 0x49): littleEndian = true
        case (0x4D, 0x4D): littleEndian = false
        default: return nil
        }
        let reader = TIFFReader(cursor: BinaryCursor(bytes, littleEndian: littleEndian))
        guard reader.cursor.uint16(at: 2) == 42, let first = reader.cursor.uint32(at: 4).map(Int.init) else {
            return nil
        }
        return (reader, first)
    }

    /// One directory entry: its type, count and where its value is (inline or at an offset).
    struct Entry {
        let type: UInt16
        let count: Int
        let valueOffset: Int
    }

    /// The entries of the directory at `offset`, by tag (at most `maxEntries` looked at).
    func entries(at offset: Int) -> [UInt16: Entry] {
        guard offset >= 8, let count = cursor.uint16(at: offset) else { return [:] }
        var entries: [UInt16: Entry] = [:]
        for index in 0..<min(Int(count), PhotoMetadata.maxEntries) {
            let entry = offset + 2 + index * 12
            guard let tag = cursor.uint16(at: entry), let type = cursor.uint16(at: entry + 2),
                let count = cursor.uint32(at: entry + 4).map(Int.init)
            else { break }
            let size = count.multipliedReportingOverflow(by: TIFFReader.size(of: type))
            guard !size.overflow else { continue }
            let valueOffset = size.partialValue <= 4 ? entry + 8 : cursor.uint32(at: entry + 8).map(Int.init) ?? -1
            entries[tag] = Entry(type: type, count: count, valueOffset: valueOffset)
        }
        return entries
    }

    static func size(of type: UInt16) -> Int {
        switch type {
        case 1, 2, 6, 7: 1
        case 3, 8: 2
        case 4, 9, 11: 4
        case 5, 10, 12: 8
        default: 1
        }
    }

    /// ASCII text, cut at its NUL and at `maxText` bytes, trimmed; `nil` when empty.
    func text(_ entry: Entry) -> String? {
        guard entry.type == 2, entry.valueOffset >= 0 else { return nil }
        var bytes: [UInt8] = []
        for index in 0..<min(entry.count, PhotoMetadata.maxText) {
            guard let byte = cursor.uint8(at: entry.valueOffset + index), byte != 0 else { break }
            bytes.append(byte)
        }
        let text = String(decoding: bytes.filter { $0 >= 0x20 && $0 < 0x7F }, as: UTF8.self)
            .trimmingCharacters(in: .whitespaces)
        return text.isEmpty ? nil : text
    }

    /// A SHORT or LONG value.
    func integer(_ entry: Entry) -> Int? {
        switch entry.type {
        case 3: cursor.uint16(at: entry.valueOffset).map(Int.init)
        case 4, 13: cursor.uint32(at: entry.valueOffset).map(Int.init)
        default: nil
        }
    }

    /// RATIONAL values (at most three).
    func rationals(_ entry: Entry) -> [Double]? {
        guard entry.type == 5, entry.valueOffset >= 0 else { return nil }
        var values: [Double] = []
        for index in 0..<min(entry.count, 3) {
            guard let numerator = cursor.uint32(at: entry.valueOffset + index * 8),
                let denominator = cursor.uint32(at: entry.valueOffset + index * 8 + 4), denominator != 0
            else { return nil }
            values.append(Double(numerator) / Double(denominator))
        }
        return values
    }
}
