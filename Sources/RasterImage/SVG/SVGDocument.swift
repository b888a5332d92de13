/// An XML document as the SVG sanitiser needs it: elements with their attributes in
/// order, and text. Parsed by a small reader of its own rather than libxml2, so that
/// everything that can grow is counted as it is read: bytes, elements, depth, and the
/// text internal entities add. The rest of XML is dropped or refused, never fetched:
/// comments and processing instructions are dropped; the document type declaration is
/// read only for internal entities whose value is plain text (Illustrator declares its
/// namespaces so); entities with markup, parameter entities and external entities
/// (whose references are then undefined) are refused.
struct SVGDocument {
    /// One element: its qualified name, attributes in document order, and children.
    final class Element {
        let name: String
        /// The name without its namespace prefix.
        let localName: Substring
        var attributes: [(name: String, value: String)]
        var children: [Node] = []

        init(name: String, attributes: [(name: String, value: String)]) {
            self.name = name
            self.localName = SVGDocument.localName(name)
            self.attributes = attributes
        }

        /// The value of the attribute whose local name is `local` (`href` finds `xlink:href`).
        func attribute(_ local: String) -> String? {
            attributes.first { $0.name == local || SVGDocument.localName($0.name) == local }?.value
        }
    }

    /// A qualified name without its namespace prefix.
    static func localName(_ name: String) -> Substring {
        guard let colon = name.utf8.firstIndex(of: UInt8(ascii: ":")) else { return Substring(name) }
        return name[name.index(after: colon)...]
    }

    enum Node {
        case element(Element)
        case text(String)
    }

    let root: Element
    /// How many elements were read.
    let elementCount: Int

    init(_ bytes: UnsafeRawBufferPointer, limits: SVGLimits) throws(ImageDecodingError) {
        guard bytes.count <= limits.maxBytes else {
            throw ImageDecodingError(.tooManyBytes(bytes: bytes.count, limit: limits.maxBytes), format: .svg)
        }
        var reader = Reader(bytes: bytes, limits: limits)
        (root, elementCount) = try reader.document()
    }

    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        let limits: SVGLimits
        var at = 0
        var entities: [String: String] = [:]
        var expanded = 0

        init(bytes: UnsafeRawBufferPointer, limits: SVGLimits) {
            self.bytes = bytes
            self.limits = limits
        }

        func fail(_ message: String) -> ImageDecodingError {
            ImageDecodingError(.corrupt, format: .svg, message: message)
        }
        func unsupported(_ message: String) -> ImageDecodingError {
            ImageDecodingError(.unsupported, format: .svg, message: message)
        }

        func starts(_ text: StaticString, at offset: Int? = nil) -> Bool {
            let start = offset ?? at
            let count = text.utf8CodeUnitCount
            guard start + count <= bytes.count else { return false }
            for index in 0..<count where bytes[start + index] != text.utf8Start[index] { return false }
            return true
        }

        /// The offset of `text` from `at` on, or `nil`.
        func find(_ text: StaticString) -> Int? {
            let count = text.utf8CodeUnitCount
            var index = at
            while index + count <= bytes.count {
                if bytes[index] == text.utf8Start[0] && starts(text, at: index) { return index }
                index += 1
            }
            return nil
        }

        static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }

        mutating func skipSpaces() { while at < bytes.count && Reader.isSpace(bytes[at]) { at += 1 } }

        mutating func document() throws(ImageDecodingError) -> (Element, Int) {
            if starts("\u{FEFF}") { at += 3 }
            if bytes.count >= 2 && (bytes[0] == 0xFE && bytes[1] == 0xFF || bytes[0] == 0xFF && bytes[1] == 0xFE) {
                throw unsupported("UTF-16 documents")
            }
            // The prolog: declaration, comments, instructions, the document type.
            while true {
                skipSpaces()
                if starts("<?") {
                    guard let end = find("?>") else { throw fail("an unterminated processing instruction") }
                    if starts("<?xml ") || starts("<?xml\t") || starts("<?xml\n") {
                        let declaration = String(
                            decoding: UnsafeRawBufferPointer(rebasing: bytes[at..<end]), as: UTF8.self
                        )
                        .lowercased()
                        if let range = declaration.range(of: "encoding") {
                            let value = declaration[range.upperBound...].drop {
                                $0 == " " || $0 == "=" || $0 == "\"" || $0 == "'"
                            }
                            .prefix { $0 != "\"" && $0 != "'" }
                            guard ["utf-8", "utf8", "us-ascii", "ascii"].contains(String(value)) else {
                                throw unsupported("the encoding \(value)")
                            }
                        }
                    }
                    at = end + 2
                } else if starts("<!--") {
                    guard let end = find("-->") else { throw fail("an unterminated comment") }
                    at = end + 3
                } else if starts("<!DOCTYPE") {
                    try doctype()
                } else {
                    break
                }
            }
            guard at < bytes.count, bytes[at] == UInt8(ascii: "<") else { throw fail("no root element") }
            var count = 0
            let root = try element(depth: 1, count: &count)
            return (root, count)
        }

        /// `<!DOCTYPE name [internal subset]>`: internal entities with plain-text values are kept.
        mutating func doctype() throws(ImageDecodingError) {
            at += 9
            while at < bytes.count && bytes[at] != UInt8(ascii: "[") && bytes[at] != UInt8(ascii: ">") {
                if bytes[at] == UInt8(ascii: "\"") || bytes[at] == UInt8(ascii: "'") {
                    try skipQuoted()
                } else {
                    at += 1
                }
            }
            guard at < bytes.count else { throw fail("an unterminated document type") }
            if bytes[at] == UInt8(ascii: "[") {
                at += 1
                while true {
                    skipSpaces()
                    guard at < bytes.count else { throw fail("an unterminated document type") }
                    if bytes[at] == UInt8(ascii: "]") {
                        at += 1
                        break
                    }
                    if starts("<!--") {
                        guard let end = find("-->") else { throw fail("an unterminated comment") }
                        at = end + 3
                    } else if starts("<!ENTITY") {
                        try entityDeclaration()
                    } else if starts("<!") || starts("<?") {
                        // Element, attribute-list and notation declarations, instructions: skipped.
                        at += 2
                        while at < bytes.count && bytes[at] != UInt8(ascii: ">") {
                            if bytes[at] == UInt8(ascii: "\"") || bytes[at] == UInt8(ascii: "'") {
                                try skipQuoted()
                            } else {
                                at += 1
                            }
                        }
                        at += 1
                    } else if bytes[at] == UInt8(ascii: "%") {
                        throw unsupported("parameter entities")
                    } else {
                        throw fail("an unexpected character in the document type")
                    }
                }
                skipSpaces()
            }
            guard at < bytes.count, bytes[at] == UInt8(ascii: ">") else { throw fail("an unterminated document type") }
            at += 1
        }

        mutating func skipQuoted() throws(ImageDecodingError) {
            let quote = bytes[at]
            at += 1
            while at < bytes.count && bytes[at] != quote { at += 1 }
            guard at < bytes.count else { throw fail("an unterminated quoted value") }
            at += 1
        }

        /// `<!ENTITY name "text">`: kept when the text has no markup and no references;
        /// external (`SYSTEM`, `PUBLIC`) and parameter (`%`) entities are not.
        mutating func entityDeclaration() throws(ImageDecodingError) {
            at += 8
            skipSpaces()
            if at < bytes.count && bytes[at] == UInt8(ascii: "%") { throw unsupported("parameter entities") }
            let name = readName()
            skipSpaces()
            guard !name.isEmpty, at < bytes.count else { throw fail("an incomplete entity declaration") }
            if bytes[at] == UInt8(ascii: "\"") || bytes[at] == UInt8(ascii: "'") {
                let start = at + 1
                try skipQuoted()
                let value = UnsafeRawBufferPointer(rebasing: bytes[start..<at - 1])
                guard !value.contains(UInt8(ascii: "<")), !value.contains(UInt8(ascii: "&")),
                    !value.contains(UInt8(ascii: "%"))
                else { throw unsupported("an entity with markup or references (\(name))") }
                guard entities.count < 1_000 else { throw unsupported("more than 1000 entities") }
                entities[name] = String(decoding: value, as: UTF8.self)
            }
            // An external entity is left undeclared: a reference to it is an error.
            while at < bytes.count && bytes[at] != UInt8(ascii: ">") {
                if bytes[at] == UInt8(ascii: "\"") || bytes[at] == UInt8(ascii: "'") {
                    try skipQuoted()
                } else {
                    at += 1
                }
            }
            at += 1
        }

        mutating func readName() -> String {
            let start = at
            while at < bytes.count {
                let byte = bytes[at]
                if Reader.isSpace(byte) || byte == UInt8(ascii: ">") || byte == UInt8(ascii: "/")
                    || byte == UInt8(ascii: "=") || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'")
                    || byte == UInt8(ascii: "<")
                {
                    break
                }
                at += 1
            }
            return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<at]), as: UTF8.self)
        }

        /// An element from its `<` to its end tag.
        mutating func element(depth: Int, count: inout Int) throws(ImageDecodingError) -> Element {
            guard depth <= limits.maxDepth else {
                throw unsupported("elements nested deeper than \(limits.maxDepth)")
            }
            count += 1
            guard count <= limits.maxElements else { throw unsupported("more than \(limits.maxElements) elements") }
            at += 1
            let name = readName()
            guard !name.isEmpty else { throw fail("an element without a name") }
            var attributes: [(name: String, value: String)] = []
            while true {
                skipSpaces()
                guard at < bytes.count else { throw fail("an unterminated start tag") }
                if bytes[at] == UInt8(ascii: ">") {
                    at += 1
                    break
                }
                if starts("/>") {
                    at += 2
                    return Element(name: name, attributes: attributes)
                }
                let attribute = readName()
                skipSpaces()
                guard !attribute.isEmpty, at < bytes.count, bytes[at] == UInt8(ascii: "=") else {
                    throw fail("an attribute without a value")
                }
                at += 1
                skipSpaces()
                guard at < bytes.count, bytes[at] == UInt8(ascii: "\"") || bytes[at] == UInt8(ascii: "'") else {
                    throw fail("an unquoted attribute value")
                }
                let start = at + 1
                try skipQuoted()
                let raw = UnsafeRawBufferPointer(rebasing: bytes[start..<at - 1])
                guard !raw.contains(UInt8(ascii: "<")) else { throw fail("< in an attribute value") }
                guard !attributes.contains(where: { $0.name == attribute }) else {
                    throw fail("the attribute \(attribute) twice")
                }
                attributes.append((attribute, try decodeText(raw)))
            }
            let element = Element(name: name, attributes: attributes)
            // Content up to the end tag.
            while true {
                guard at < bytes.count else { throw fail("\(name) is not closed") }
                if starts("</") {
                    at += 2
                    let closing = readName()
                    skipSpaces()
                    guard closing == name, at < bytes.count, bytes[at] == UInt8(ascii: ">") else {
                        throw fail("\(name) is closed by \(closing)")
                    }
                    at += 1
                    return element
                } else if starts("<!--") {
                    guard let end = find("-->") else { throw fail("an unterminated comment") }
                    at = end + 3
                } else if starts("<![CDATA[") {
                    at += 9
                    guard let end = find("]]>") else { throw fail("an unterminated CDATA section") }
                    element.children.append(
                        .text(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[at..<end]), as: UTF8.self)))
                    at = end + 3
                } else if starts("<?") {
                    guard let end = find("?>") else { throw fail("an unterminated processing instruction") }
                    at = end + 2
                } else if starts("<!") {
                    throw fail("a declaration inside an element")
                } else if bytes[at] == UInt8(ascii: "<") {
                    element.children.append(.element(try self.element(depth: depth + 1, count: &count)))
                } else {
                    let start = at
                    while at < bytes.count && bytes[at] != UInt8(ascii: "<") { at += 1 }
                    element.children.append(.text(try decodeText(UnsafeRawBufferPointer(rebasing: bytes[start..<at]))))
                }
            }
        }

        /// Text with its references replaced: the five predefined entities, character
        /// references, and the document's plain-text entities (counted as they expand).
        mutating func decodeText(_ raw: UnsafeRawBufferPointer) throws(ImageDecodingError) -> String {
            guard raw.contains(UInt8(ascii: "&")) else { return String(decoding: raw, as: UTF8.self) }
            var output: [UInt8] = []
            output.reserveCapacity(raw.count)
            var index = 0
            while index < raw.count {
                let byte = raw[index]
                guard byte == UInt8(ascii: "&") else {
                    output.append(byte)
                    index += 1
                    continue
                }
                guard let end = raw[index...].firstIndex(of: UInt8(ascii: ";")), end - index <= 64 else {
                    throw fail("an unterminated reference")
                }
                let name = String(decoding: UnsafeRawBufferPointer(rebasing: raw[index + 1..<end]), as: UTF8.self)
                index = end + 1
                switch name {
                case "lt": output.append(UInt8(ascii: "<"))
                case "gt": output.append(UInt8(ascii: ">"))
                case "amp": output.append(UInt8(ascii: "&"))
                case "quot": output.append(UInt8(ascii: "\""))
                case "apos": output.append(UInt8(ascii: "'"))
                default:
                    if name.hasPrefix("#") {
                        let digits = name.dropFirst()
                        let value =
                            digits.hasPrefix("x") ? UInt32(digits.dropFirst(), radix: 16) : UInt32(digits, radix: 10)
                        guard let value, value > 0, let scalar = Unicode.Scalar(value) else {
                            throw fail("a bad character reference")
                        }
                        output += Array(String(Character(scalar)).utf8)
                    } else if let replacement = entities[name] {
                        expanded += replacement.utf8.count
                        guard expanded <= limits.maxEntityExpansionBytes else {
                            throw unsupported("entities expanding past \(limits.maxEntityExpansionBytes) bytes")
                        }
                        output += Array(replacement.utf8)
                    } else {
                        throw fail("an undefined entity \(name)")
                    }
                }
            }
            return String(decoding: output, as: UTF8.self)
        }
    }
}
