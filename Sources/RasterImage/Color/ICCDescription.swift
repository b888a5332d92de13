import Foundation

/// The name an ICC profile gives itself (its `desc` tag: ICC v2 `textDescriptionType`
/// or v4 `multiLocalizedUnicodeType`, the first record), read with bounds-checked
/// offsets, at most 256 characters. `nil` when the profile has none or is malformed.
///
/// ```swift
/// if let profile = image.iccProfile { print(ICCDescription.name(of: profile) ?? "unnamed") }  // "Display P3"
/// ```
public enum ICCDescription {
    static let maxCharacters = 256
    static let maxTags = 1024

    public static func name(of profile: some Collection<UInt8>) -> String? {
        let bytes = Array(profile.prefix(4 << 20))
        let cursor = BinaryCursor(bytes, littleEndian: false)
        guard bytes.count >= 132, let count = cursor.uint32(at: 128).map(Int.init) else { return nil }
        for index in 0..<min(count, maxTags) {
            let entry = 132 + index * 12
            guard let signature = cursor.uint32(at: entry), let offset = cursor.uint32(at: entry + 4).map(Int.init),
                let size = cursor.uint32(at: entry + 8).map(Int.init)
            else { return nil }
            guard signature == 0x6465_7363 else { continue }  // 'desc'
            guard offset <= bytes.count, size <= bytes.count - offset, size >= 12 else { return nil }
            return text(BinaryCursor(Array(bytes[offset..<(offset + size)]), littleEndian: false))
        }
        return nil
    }

    private static func text(_ tag: BinaryCursor<[UInt8]>) -> String? {
        switch tag.uint32(at: 0) {
        case 0x6465_7363:  // 'desc': a count, then ASCII with its NUL
            guard let length = tag.uint32(at: 8).map(Int.init) else { return nil }
            var bytes: [UInt8] = []
            for index in 0..<min(length, maxCharacters) {
                guard let byte = tag.uint8(at: 12 + index), byte != 0 else { break }
                bytes.append(byte)
            }
            return clean(String(decoding: bytes, as: UTF8.self))
        case 0x6D6C_7563:  // 'mluc': records of (language, country, length, offset) of UTF-16BE text
            guard let records = tag.uint32(at: 8), records > 0, let recordSize = tag.uint32(at: 12).map(Int.init),
                recordSize >= 12, let length = tag.uint32(at: 16 + 4).map(Int.init),
                let offset = tag.uint32(at: 16 + 8).map(Int.init)
            else { return nil }
            var units: [UInt16] = []
            for index in 0..<min(length / 2, maxCharacters) {
                guard let unit = tag.uint16(at: offset + index * 2) else { return nil }
                units.append(unit)
            }
            return clean(String(decoding: units, as: UTF16.self))
        default:
            return nil
        }
    }

    private static func clean(_ text: String) -> String? {
        let kept = String(String.UnicodeScalarView(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }))
        let trimmed = kept.trimmingCharacters(in: .whitespaces)
        return trimmed.isEmpty ? nil : trimmed
    }
}
