import Foundation

/// Makes an SVG document safe to render and to serve: what runs, what reaches outside
/// the document, and what costs more than ``SVGLimits`` allow is removed, lowered or
/// refused, and the document is written out again from what was kept.
///
/// - Removed: `script`, `foreignObject` and other elements that embed or run content,
///   XInclude, animations of links, every `on*` attribute, `xml:base`, processing
///   instructions (`xml-stylesheet` among them), comments and the document type.
/// - Links: `use`, `textPath`, gradients, patterns, filters and the rest may point only
///   inside the document (`#id`); `image` and `feImage` may also hold a raster image as
///   a `data:` URL, whose header is checked against the pixel limit; `a` may link to
///   `http` and `https` pages. Any other link is removed, as is any `url(...)` in
///   attributes and style sheets that leaves the document, and any `@import`.
/// - Bounded: bytes, elements (with the copies `<use>` makes counted, and reference
///   cycles refused), depth, entity expansion, filter primitives and the elements
///   filters apply to, convolution order and gradient stops (refused past their
///   limits); morphology radii and turbulence octaves (lowered to their limits).
///
/// ```swift
/// let safe = try SVGSanitizer(limits: SVGLimits()).sanitize(Array(svgText.utf8))
/// // safe.bytes: the document to render or serve; safe.width, safe.height: its size in pixels
/// ```
struct SVGSanitizer {
    let limits: SVGLimits
    /// The pixel limit a `data:` image inside the document is checked against.
    var decodingLimits = DecodingLimits()

    /// A sanitised document and what the renderer needs to bound its work.
    struct Sanitized {
        /// The document, UTF-8, without a document type.
        let bytes: [UInt8]
        /// Its intrinsic size in CSS pixels (`width`/`height`, else the `viewBox`'s, else 100x100).
        let width: Double
        let height: Double
        /// The most primitives of any one filter, and how many elements filters apply to.
        let largestFilter: Int
        let filteredElements: Int
    }

    /// Elements removed with their content: they run, embed or fetch content.
    static let removedElements: Set<Substring> = [
        "script", "foreignObject", "iframe", "embed", "object", "form", "audio", "video", "canvas", "handler",
        "listener", "include", "fallback",
    ]

    static let animations: Set<Substring> = ["set", "animate", "animateTransform", "animateMotion", "animateColor"]

    func sanitize(_ bytes: [UInt8]) throws(ImageDecodingError) -> Sanitized {
        let document: SVGDocument
        do {
            document = try bytes.withUnsafeBytes { try SVGDocument($0, limits: limits) }
        } catch let error as ImageDecodingError {
            throw error
        } catch {
            throw ImageDecodingError(.corrupt, format: .svg, message: "\(error)")
        }
        guard document.root.localName == "svg" else {
            throw ImageDecodingError(.unrecognizedFormat, format: .svg, message: "the root element is not svg")
        }
        var state = State()
        try clean(document.root, state: &state)
        try checkReferences(document.root, state: state)
        let (width, height) = try SVGSanitizer.intrinsicSize(of: document.root)
        var output: [UInt8] = Array("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n".utf8)
        output.reserveCapacity(bytes.count + 64)
        SVGSanitizer.write(document.root, into: &output)
        return Sanitized(
            bytes: output, width: width, height: height, largestFilter: state.largestFilter,
            filteredElements: state.filteredElements)
    }

    /// What the walk counts.
    private struct State {
        var primitives = 0
        var stops = 0
        var largestFilter = 0
        var filteredElements = 0
        var ids: [String: SVGDocument.Element] = [:]
    }

    private func refuse(_ message: String) -> ImageDecodingError {
        ImageDecodingError(.unsupported, format: .svg, message: message)
    }

    private func clean(_ element: SVGDocument.Element, state: inout State) throws(ImageDecodingError) {
        let local = element.localName
        var attributes: [(name: String, value: String)] = []
        for attribute in element.attributes {
            if let kept = try cleanAttribute(attribute, of: local) { attributes.append(kept) }
        }
        element.attributes = attributes
        if let id = element.attribute("id"), state.ids[id] == nil { state.ids[id] = element }
        if element.attribute("filter").map({ $0 != "none" }) == true
            || element.attribute("style").map({ $0.contains("filter") }) == true
        {
            state.filteredElements += 1
            guard state.filteredElements <= limits.maxFilteredElements else {
                throw refuse("filters applied to more than \(limits.maxFilteredElements) elements")
            }
        }
        switch local {
        case "filter":
            let primitives = element.children.count {
                if case .element(let child) = $0 { child.localName.hasPrefix("fe") } else { false }
            }
            state.largestFilter = max(state.largestFilter, primitives)
        case "feConvolveMatrix":
            let order = (element.attribute("order") ?? "3").split { $0 == " " || $0 == "," }.compactMap { Double($0) }
            guard order.allSatisfy({ $0 >= 1 && $0 <= Double(limits.maxConvolveOrder) }) else {
                throw refuse("an feConvolveMatrix of order over \(limits.maxConvolveOrder)")
            }
        case "feMorphology":
            lower("radius", of: element, to: limits.maxMorphologyRadius)
        case "feTurbulence":
            lower("numOctaves", of: element, to: Double(limits.maxTurbulenceOctaves))
        case "stop":
            state.stops += 1
            guard state.stops <= limits.maxGradientStops else {
                throw refuse("more than \(limits.maxGradientStops) gradient stops")
            }
        default: break
        }
        if local.hasPrefix("fe") {
            state.primitives += 1
            guard state.primitives <= limits.maxFilterPrimitives else {
                throw refuse("more than \(limits.maxFilterPrimitives) filter primitives")
            }
        }
        var kept: [SVGDocument.Node] = []
        for child in element.children {
            switch child {
            case .text(let text):
                kept.append(.text(local == "style" ? SVGSanitizer.cleanStyleSheet(text) : text))
            case .element(let inner):
                if SVGSanitizer.removedElements.contains(inner.localName) { continue }
                // An animation of a link could set it to anything once shown.
                if SVGSanitizer.animations.contains(inner.localName),
                    let target = inner.attribute("attributeName"), target.hasSuffix("href")
                {
                    continue
                }
                try clean(inner, state: &state)
                kept.append(child)
            }
        }
        element.children = kept
    }

    /// Lowers a numeric attribute's values to `limit` (each of a list).
    private func lower(_ name: String, of element: SVGDocument.Element, to limit: Double) {
        guard let index = element.attributes.firstIndex(where: { $0.name == name }) else { return }
        let values = element.attributes[index].value.split { $0 == " " || $0 == "," }.map { Double($0) ?? 0 }
        element.attributes[index].value = values.map { value in
            let bounded = value.isFinite ? min(value, limit) : 0
            return bounded == bounded.rounded() ? String(Int(bounded)) : String(bounded)
        }.joined(separator: " ")
    }

    /// The attribute as kept, or `nil` when it goes.
    private func cleanAttribute(_ attribute: (name: String, value: String), of element: Substring)
        throws(ImageDecodingError)
        -> (name: String, value: String)?
    {
        let local = SVGDocument.localName(attribute.name)
        let lead = Array(local.utf8.prefix(2))
        if lead.count == 2 && lead[0] | 0x20 == UInt8(ascii: "o") && lead[1] | 0x20 == UInt8(ascii: "n") { return nil }
        if attribute.name == "xml:base" { return nil }
        if local == "href" {
            let target = attribute.value.trimmingCharacters(in: .whitespacesAndNewlines)
            if target.hasPrefix("#") { return attribute }
            switch element {
            case "image", "feImage":
                return try isSafeImage(target) ? attribute : nil
            case "a":
                let lower = target.lowercased()
                return lower.hasPrefix("http://") || lower.hasPrefix("https://") ? attribute : nil
            default:
                return nil
            }
        }
        if SVGSanitizer.mayReachOut(attribute.value) {
            let cleaned = SVGSanitizer.cleanStyleSheet(attribute.value)
            return cleaned.isEmpty ? nil : (attribute.name, cleaned)
        }
        return attribute
    }

    /// A `data:` URL of a raster image whose header decodes within the pixel limit.
    private func isSafeImage(_ target: String) throws(ImageDecodingError) -> Bool {
        guard target.lowercased().hasPrefix("data:image/"), let comma = target.firstIndex(of: ",") else { return false }
        let header = target[..<comma].lowercased()
        guard header.hasSuffix(";base64"), !header.contains("svg") else { return false }
        guard let bytes = Base64.decode(target[target.index(after: comma)...]) else { return false }
        guard let format = ImageFormat.sniff(bytes), format != .svg else { return false }
        var limits = decodingLimits
        limits.maxInputBytes = min(limits.maxInputBytes, self.limits.maxBytes)
        guard let info = try? ImageDecoder().info(.bytes(bytes), options: DecodingOptions(limits: limits)) else {
            return false
        }
        return info.frameCount == 1
    }

    /// Whether `text` holds a `url(` or an `@import` (in any case), found without a copy.
    static func mayReachOut(_ text: String) -> Bool {
        var previous: (UInt8, UInt8, UInt8) = (0, 0, 0)
        for byte in text.utf8 {
            let lower = byte | 0x20
            if byte == UInt8(ascii: "(") && previous == (UInt8(ascii: "u"), UInt8(ascii: "r"), UInt8(ascii: "l")) {
                return true
            }
            if byte == UInt8(ascii: "@") { return true }
            previous = (previous.1, previous.2, lower)
        }
        return false
    }

    /// A style sheet (or a style attribute's declarations) without `@import` rules and
    /// with every `url(...)` that leaves the document replaced by `none`.
    static func cleanStyleSheet(_ text: String) -> String {
        var result = ""
        var rest = Substring(text)
        while let range = rest.range(of: "url(", options: .caseInsensitive) {
            result += rest[..<range.lowerBound]
            guard let close = rest[range.upperBound...].firstIndex(of: ")") else {
                rest = ""
                break
            }
            let target = rest[range.upperBound..<close].trimmingCharacters(in: CharacterSet(charactersIn: " \t\n\r\"'"))
            result += target.hasPrefix("#") ? "url(\(target))" : "none"
            rest = rest[rest.index(after: close)...]
        }
        result += rest
        // @import rules: removed up to their semicolon.
        while let range = result.range(of: "@import", options: .caseInsensitive) {
            let end = result[range.upperBound...].firstIndex(of: ";").map { result.index(after: $0) } ?? result.endIndex
            result.removeSubrange(range.lowerBound..<end)
        }
        return result
    }

    /// Counts the elements `<use>` copies make, refusing cycles and more than the limit.
    private func checkReferences(_ root: SVGDocument.Element, state: State) throws(ImageDecodingError) {
        var sizes: [ObjectIdentifier: Int] = [:]
        var visiting: Set<ObjectIdentifier> = []
        func size(_ element: SVGDocument.Element, depth: Int) throws(ImageDecodingError) -> Int {
            let key = ObjectIdentifier(element)
            if let known = sizes[key] { return known }
            guard depth <= limits.maxDepth * 2 else { throw refuse("references nested too deeply") }
            guard visiting.insert(key).inserted else { throw refuse("a reference cycle") }
            var total = 1
            for child in element.children {
                if case .element(let inner) = child { total += try size(inner, depth: depth + 1) }
                guard total <= limits.maxElements else {
                    throw refuse("more than \(limits.maxElements) elements in use")
                }
            }
            if element.localName == "use", let href = element.attribute("href"), href.hasPrefix("#"),
                let target = state.ids[String(href.dropFirst())]
            {
                total += try size(target, depth: depth + 1)
            }
            guard total <= limits.maxElements else { throw refuse("more than \(limits.maxElements) elements in use") }
            visiting.remove(key)
            sizes[key] = total
            return total
        }
        _ = try size(root, depth: 0)
    }

    /// The root's size in CSS pixels: `width` and `height` (px, pt, pc, mm, cm, in, or
    /// none), else the `viewBox`'s, with a missing one from the aspect ratio; 100x100
    /// when neither says.
    static func intrinsicSize(of root: SVGDocument.Element) throws(ImageDecodingError) -> (Double, Double) {
        let box = root.attribute("viewBox")?.split { $0 == " " || $0 == "," || $0 == "\n" || $0 == "\t" }
            .compactMap { Double($0) }
        let viewBox: (Double, Double)? =
            box.flatMap {
                $0.count == 4 && $0[2] > 0 && $0[3] > 0 && $0[2].isFinite && $0[3].isFinite ? ($0[2], $0[3]) : nil
            }
        var width = root.attribute("width").flatMap(length)
        var height = root.attribute("height").flatMap(length)
        switch (width, height, viewBox) {
        case (nil, nil, let box?): (width, height) = (box.0, box.1)
        case (let w?, nil, let box?): height = w * box.1 / box.0
        case (nil, let h?, let box?): width = h * box.0 / box.1
        default: break
        }
        let size = (width ?? 100, height ?? 100)
        guard size.0 > 0, size.1 > 0, size.0.isFinite, size.1.isFinite, size.0 < 1e9, size.1 < 1e9 else {
            throw ImageDecodingError(.corrupt, format: .svg, message: "the size \(size.0)x\(size.1)")
        }
        return size
    }

    /// A length in CSS pixels; `nil` for percentages and what cannot be read.
    static func length(_ text: String) -> Double? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let units: [(String, Double)] = [
            ("px", 1), ("pt", 4.0 / 3), ("pc", 16), ("mm", 96 / 25.4), ("cm", 96 / 2.54), ("in", 96), ("em", 16),
            ("ex", 8),
        ]
        for (unit, factor) in units where trimmed.hasSuffix(unit) {
            return Double(trimmed.dropLast(unit.count)).map { $0 * factor }
        }
        return Double(trimmed)
    }

    /// The element written out, attributes and text escaped.
    static func write(_ element: SVGDocument.Element, into output: inout [UInt8]) {
        output.append(UInt8(ascii: "<"))
        output += element.name.utf8
        for (name, value) in element.attributes {
            output.append(UInt8(ascii: " "))
            output += name.utf8
            output += "=\"".utf8
            escape(value, attribute: true, into: &output)
            output.append(UInt8(ascii: "\""))
        }
        // Empty text is no content: `<style></style>` and `<style/>` read back the same.
        let children = element.children.filter { if case .text(let text) = $0 { !text.isEmpty } else { true } }
        guard !children.isEmpty else {
            output += "/>".utf8
            return
        }
        output.append(UInt8(ascii: ">"))
        for child in children {
            switch child {
            case .text(let text): escape(text, attribute: false, into: &output)
            case .element(let inner): write(inner, into: &output)
            }
        }
        output += "</".utf8
        output += element.name.utf8
        output.append(UInt8(ascii: ">"))
    }

    private static func escape(_ text: String, attribute: Bool, into output: inout [UInt8]) {
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "&"): output += "&amp;".utf8
            case UInt8(ascii: "<"): output += "&lt;".utf8
            case UInt8(ascii: ">"): output += "&gt;".utf8
            case UInt8(ascii: "\"") where attribute: output += "&quot;".utf8
            case 0x0A where attribute: output += "&#10;".utf8
            case 0x0D: output += "&#13;".utf8
            case 0x09 where attribute: output += "&#9;".utf8
            default: output.append(byte)
            }
        }
    }
}

/// Base64 as `data:` URLs carry it (whitespace ignored), decoded without Foundation's allocation of a string copy.
enum Base64 {
    static func decode(_ text: Substring) -> [UInt8]? {
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count * 3 / 4)
        var buffer: UInt32 = 0
        var bits = 0
        for byte in text.utf8 {
            let value: UInt8
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = byte - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = byte - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0") + 52
            case UInt8(ascii: "+"), UInt8(ascii: "-"): value = 62
            case UInt8(ascii: "/"), UInt8(ascii: "_"): value = 63
            case UInt8(ascii: "="), 0x20, 0x09, 0x0A, 0x0D: continue
            default: return nil
            }
            buffer = buffer << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        return output
    }
}
