/// Recognises SVG by content, as imgproxy does: after an optional byte-order mark,
/// spaces, the XML declaration, comments, processing instructions and a document
/// type, the first element is `svg` (with or without a namespace prefix).
enum SVGSniffer {
    /// Whether `bytes` (a file's first bytes) start like markup: a `<` after a
    /// byte-order mark and spaces.
    static func mayBeMarkup(_ bytes: [UInt8]) -> Bool {
        var index = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        return index < bytes.count && bytes[index] == UInt8(ascii: "<")
    }

    static func isSVG(_ collection: some Collection<UInt8>) -> Bool {
        // Binary data is told apart by its first bytes, before any copy of the rest.
        guard mayBeMarkup(Array(collection.prefix(64))) else { return false }
        let bytes = Array(collection)
        var index = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        func starts(_ text: String) -> Bool {
            let pattern = Array(text.utf8)
            return index + pattern.count <= bytes.count && Array(bytes[index..<index + pattern.count]) == pattern
        }
        func skip(past end: String) -> Bool {
            let pattern = Array(end.utf8)
            while index + pattern.count <= bytes.count {
                if Array(bytes[index..<index + pattern.count]) == pattern {
                    index += pattern.count
                    return true
                }
                index += 1
            }
            return false
        }
        while index < bytes.count {
            let byte = bytes[index]
            if [0x20, 0x09, 0x0A, 0x0D].contains(byte) {
                index += 1
            } else if starts("<?") {
                guard skip(past: "?>") else { return false }
            } else if starts("<!--") {
                guard skip(past: "-->") else { return false }
            } else if starts("<!DOCTYPE") {
                // Up to the '>' that ends it, past an internal subset in brackets.
                var depth = 0
                while index < bytes.count {
                    if bytes[index] == UInt8(ascii: "[") { depth += 1 }
                    if bytes[index] == UInt8(ascii: "]") { depth -= 1 }
                    if bytes[index] == UInt8(ascii: ">") && depth <= 0 { break }
                    index += 1
                }
                guard index < bytes.count else { return false }
                index += 1
            } else if byte == UInt8(ascii: "<") {
                index += 1
                var name: [UInt8] = []
                while index < bytes.count, name.count < 64,
                    ![0x20, 0x09, 0x0A, 0x0D, UInt8(ascii: ">"), UInt8(ascii: "/")].contains(bytes[index])
                {
                    name.append(bytes[index])
                    index += 1
                }
                guard index < bytes.count else { return false }
                let local = name.split(separator: UInt8(ascii: ":")).last.map(Array.init) ?? []
                return local == Array("svg".utf8)
            } else {
                return false
            }
        }
        return false
    }
}
