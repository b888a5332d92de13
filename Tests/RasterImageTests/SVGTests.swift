import Foundation
import RasterImage
import Testing

/// SVG sources: sniffing by content, the sanitiser's rules, the hostile classes librsvg
/// cannot survive alone, and rendering against resvg's references
/// (Fixtures/formats, made by Fixtures/generate-formats.py).
@Suite("SVG")
struct SVGTests {
    static func svg(_ body: String, size: String = #"width="64" height="64""#, prolog: String = "") -> [UInt8] {
        Array(
            (prolog + #"<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" "#
                + size + ">" + body + "</svg>").utf8)
    }

    static func error(_ bytes: [UInt8], thumbnail: Bool = false) -> ImageDecodingError? {
        expectDecodingError {
            if thumbnail {
                _ = try ImageDecoder().thumbnail(.bytes(bytes), options: ThumbnailOptions(maxPixelSize: 32))
            } else {
                _ = try ImageDecoder().decode(.bytes(bytes))
            }
        }
    }

    static func sanitized(_ bytes: [UInt8]) throws -> String {
        String(decoding: try ImageDecoder().sanitizedSVG(.bytes(bytes)), as: UTF8.self)
    }

    @Test("SVG is recognised by its root element, past a declaration, comments and a document type")
    func sniffing() {
        let prolog =
            "\u{FEFF}<?xml version=\"1.0\"?>\n<!-- " + String(repeating: "x", count: 2000) + " -->\n"
            + "<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\" \"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd\">\n"
        #expect(ImageFormat.sniff(Self.svg("", prolog: prolog)) == .svg)
        #expect(ImageFormat.sniff(Array(#"<svg:svg xmlns:svg="http://www.w3.org/2000/svg"/>"#.utf8)) == .svg)
        #expect(ImageFormat.sniff(Array("<html><svg></svg></html>".utf8)) == nil)
        #expect(ImageFormat.sniff(Array("<?xml version=\"1.0\"?><rss/>".utf8)) == nil)
        // Past the check's length, the root is not looked for (imgproxy's MAX_SVG_CHECK_BYTES).
        let far = "<!--" + String(repeating: "x", count: ImageFormat.svgCheckLength) + "-->"
        #expect(ImageFormat.sniff(Self.svg("", prolog: far)) == nil)
        #expect(ImageFormat(contentType: "image/svg+xml") == .svg)
    }

    @Test("scripts, event attributes, XInclude, style-sheet instructions and links out are removed")
    func sanitising() throws {
        let document = Self.svg(
            """
            <script>alert(1)</script><rect width="10" height="10" onclick="alert(2)" onload="x()"/>
            <a xlink:href="javascript:alert(3)"><circle r="4"/></a><a href="https://example.com/"><circle r="5"/></a>
            <foreignObject><body xmlns="http://www.w3.org/1999/xhtml">x</body></foreignObject>
            <xi:include xmlns:xi="http://www.w3.org/2001/XInclude" href="/etc/passwd" parse="text"/>
            <use href="#r"/><use xlink:href="other.svg#r"/><image href="file:///etc/passwd"/>
            <image href="http://127.0.0.1:1/x.png"/><feImage href="https://example.com/x.png"/>
            <style>@import url(http://evil/x.css); rect { fill: url(http://evil/p#g) } circle { fill: url(#g) }</style>
            <rect style="fill: url('https://evil/x')" xml:base="http://evil/"/>
            <set attributeName="href" to="javascript:alert(4)"/>
            """, prolog: #"<?xml-stylesheet href="http://evil/s.css" type="text/css"?>"#)
        let safe = try Self.sanitized(document)
        for removed in [
            "script", "alert", "onclick", "onload", "foreignObject", "include", "/etc/passwd", "other.svg", "file:",
            "127.0.0.1", "example.com/x.png", "@import", "evil", "xml-stylesheet", "xml:base", "<set",
        ] {
            #expect(!safe.contains(removed), "\(removed) in \(safe)")
        }
        for kept in [#"href="https://example.com/""#, ##"href="#r""##, "url(#g)", "<circle", "<rect"] {
            #expect(safe.contains(kept), "\(kept) missing from \(safe)")
        }
        // What is kept parses again to the same document (the fuzzer's finding: a style
        // sheet emptied by the rules was written `<style></style>`, read back as `<style/>`).
        #expect(try Self.sanitized(Array(safe.utf8)) == safe)
        let emptied = try Self.sanitized(Self.svg("<style>@import url(http://e/x.css;</style>"))
        let again = try Self.sanitized(Array(emptied.utf8))
        #expect(emptied.contains("<style/>") && again == emptied)
    }

    @Test("a file or a URL an image points to is never read: the rendering is empty")
    func noExternalReads() throws {
        let png = Fixtures.root + "/images/png-rgb8.png"
        for target in ["file://" + png, png, "../images/png-rgb8.png", "http://127.0.0.1:1/x.png"] {
            let document = Self.svg(##"<image href="\##(target)" width="64" height="64"/>"##)
            let image = try ImageDecoder().decode(.bytes(document))
            #expect(image.pixels.allSatisfy { $0 == 0 }, "\(target)")
        }
        // A data: image within the limits is drawn.
        let bytes = Fixtures.bytes("images/png-rgb8.png")
        let inline = Self.svg(
            ##"<image href="data:image/png;base64,\##(Data(bytes).base64EncodedString())" width="64" height="64"/>"##)
        #expect(try ImageDecoder().decode(.bytes(inline)).pixels.contains { $0 != 0 })
    }

    @Test("entity bombs and external entities are refused before anything expands")
    func entities() {
        var laughs = "<!DOCTYPE svg [<!ENTITY lol \"lol\">"
        for level in 1...9 {
            laughs += "<!ENTITY lol\(level) \"" + String(repeating: "&lol\(level - 1);", count: 10) + "\">"
        }
        laughs = laughs.replacingOccurrences(of: "&lol0;", with: "&lol;") + "]>"
        #expect(Self.error(Self.svg("<text>&lol9;</text>", prolog: laughs))?.reason == .unsupported)
        // Quadratic: one large plain entity, referenced many times.
        let big = "<!DOCTYPE svg [<!ENTITY a \"" + String(repeating: "a", count: 1_000) + "\">]>"
        let quadratic = Self.svg("<text>" + String(repeating: "&a;", count: 2_000) + "</text>", prolog: big)
        #expect(Self.error(quadratic)?.reason == .unsupported)
        let external = "<!DOCTYPE svg [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>"
        #expect(Self.error(Self.svg("<text>&x;</text>", prolog: external))?.reason == .corrupt)
        let parameter = "<!DOCTYPE svg [<!ENTITY % p SYSTEM \"http://evil/x.dtd\"> %p;]>"
        #expect(Self.error(Self.svg("", prolog: parameter))?.reason == .unsupported)
        // Illustrator's namespace entities are plain text: kept and expanded.
        let illustrator = #"<!DOCTYPE svg [<!ENTITY ns_svg "http://www.w3.org/2000/svg">]>"#
        let drawn = Array(
            (illustrator + #"<svg xmlns="&ns_svg;" width="8" height="8"><rect width="8" height="8"/></svg>"#).utf8)
        #expect((try? ImageDecoder().decode(.bytes(drawn)))?.width == 8)
    }

    @Test("use cycles and copies, deep nesting, filter bombs and gradient floods are refused within the limits")
    func hostile() {
        #expect(
            Self.error(Self.svg(##"<g id="a"><use href="#b"/></g><g id="b"><use href="#a"/></g>"##))?.reason
                == .unsupported)
        // Ten levels of ten copies: 10^10 elements once expanded.
        var copies = #"<defs><rect id="l0" width="1" height="1"/>"#
        for level in 1...10 {
            copies +=
                ##"<g id="l\##(level)">"## + String(repeating: ##"<use href="#l\##(level - 1)"/>"##, count: 10) + "</g>"
        }
        #expect(Self.error(Self.svg(copies + "</defs><use href=\"#l10\"/>"))?.reason == .unsupported)
        let deep = String(repeating: "<g>", count: 10_000) + String(repeating: "</g>", count: 10_000)
        #expect(Self.error(Self.svg(deep))?.reason == .unsupported)
        let convolve =
            #"<filter id="f"><feConvolveMatrix order="300" kernelMatrix="1"/></filter><rect filter="url(#f)" width="9" height="9"/>"#
        #expect(Self.error(Self.svg(convolve))?.reason == .unsupported)
        let blurs =
            #"<filter id="f">"# + String(repeating: #"<feGaussianBlur stdDeviation="50"/>"#, count: 400) + "</filter>"
        #expect(Self.error(Self.svg(blurs + #"<rect filter="url(#f)" width="9" height="9"/>"#))?.reason == .unsupported)
        let filtered =
            #"<filter id="f"><feGaussianBlur stdDeviation="5"/></filter>"#
            + String(repeating: #"<rect filter="url(#f)" width="9" height="9"/>"#, count: 3_000)
        #expect(Self.error(Self.svg(filtered))?.reason == .unsupported)
        let stops =
            #"<linearGradient id="g">"# + String(repeating: #"<stop offset="0.5"/>"#, count: 200_000)
            + "</linearGradient>"
        #expect(Self.error(Self.svg(stops))?.reason != nil)
    }

    @Test("huge sizes are drawn within the pixel limit, or at the size asked for; octaves and radii are lowered")
    func sizesAndLowering() throws {
        let huge = Self.svg(#"<rect width="10" height="10"/>"#, size: #"width="200000" height="200000""#)
        // Drawn at the pixel limit's size, as imgproxy's vector guard draws it, not refused.
        var limited = DecodingOptions()
        limited.limits.maxPixelsPerFrame = 1_000_000
        let guarded = try ImageDecoder(options: limited).decode(.bytes(huge))
        #expect(guarded.width == 1000 && guarded.height == 1000)
        #expect(try ImageDecoder(options: limited).info(.bytes(huge)).width == 1000)
        // A thumbnail draws the vector at the thumbnail's size, whatever its own.
        let thumbnail = try ImageDecoder().thumbnail(.bytes(huge), options: ThumbnailOptions(maxPixelSize: 50))
        #expect(thumbnail.width == 50 && thumbnail.height == 50)
        let viewBox = Self.svg("", size: #"viewBox="0 0 1e300 1e300""#)
        #expect(Self.error(viewBox)?.reason == .corrupt)
        let turbulence =
            #"<filter id="t"><feTurbulence baseFrequency="0.05" numOctaves="1000000000"/><feMorphology radius="100000"/></filter>"#
            + #"<rect filter="url(#t)" width="64" height="64"/>"#
        let safe = try Self.sanitized(Self.svg(turbulence))
        #expect(safe.contains(#"numOctaves="8""#) && safe.contains(#"radius="32""#), "\(safe)")
        #expect(try ImageDecoder().decode(.bytes(Self.svg(turbulence))).width == 64)
    }

    @Test("rendering matches resvg's: at the intrinsic size, and as a thumbnail drawn at its final size")
    func references() throws {
        let folder = Fixtures.root + "/formats"
        let names = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".svg") }.sorted()
        #expect(names.count >= 5)
        for name in names {
            let source = ImageSource.file(path: folder + "/" + name)
            let stem = String(name.dropLast(4))
            let image = try ImageDecoder().decode(source)
            let reference = try ImageDecoder().decode(.file(path: folder + "/" + stem + ".resvg.png"))
            #expect(image.width == reference.width && image.height == reference.height, "\(name)")
            let diff = differenceOverWhite(image, reference)
            #expect(diff.mean < 2.5 && diff.max < 200, "\(name): \(diff)")
            // The thumbnail against resvg's own rendering at that size.
            let small = try ImageDecoder().thumbnail(source, options: ThumbnailOptions(maxPixelSize: 48))
            let smallReference = try ImageDecoder().decode(.file(path: folder + "/" + stem + ".resvg48.png"))
            #expect(
                small.width == smallReference.width && small.height == smallReference.height,
                "\(name): \(small.width)x\(small.height), resvg \(smallReference.width)x\(smallReference.height)")
            let smallDiff = differenceOverWhite(small, smallReference)
            #expect(smallDiff.mean < 4, "\(name) at 48: \(smallDiff)")
        }
    }

    /// Channel differences with both images composited over white.
    func differenceOverWhite(_ a: RasterImage, _ b: RasterImage) -> (mean: Double, max: Int) {
        let first = a.straightAlpha().pixels
        let second = b.straightAlpha().pixels
        guard first.count == second.count else { return (255, 255) }
        var total = 0
        var largest = 0
        for pixel in stride(from: 0, to: first.count, by: 4) {
            for channel in 0..<3 {
                func flat(_ p: [UInt8]) -> Int {
                    (Int(p[pixel + channel]) * Int(p[pixel + 3]) + 255 * (255 - Int(p[pixel + 3])) + 127) / 255
                }
                let d = abs(flat(first) - flat(second))
                total += d
                largest = max(largest, d)
            }
        }
        return (Double(total) / Double(first.count / 4 * 3), largest)
    }
}
