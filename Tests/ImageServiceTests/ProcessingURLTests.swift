import Foundation
import Testing

@testable import ImageService

/// imgproxy's URL format and signatures. The signatures below were computed with
/// Python's `hmac` and `hashlib`, and the URLs in `clientURLs` were made by the
/// `imgproxy` package from PyPI (1.0.0): both independent of this code.
@Suite("Processing URLs and signatures")
struct ProcessingURLTests {
    static let key = "943b421c9eb07c830af81030552c86009268de4e532ba2ee2eab8247c6da0881"
    static let salt = "520f986b998545b4785e0defbc4f3c1203f22de2374a3d53cb7a7fe9fea309c5"
    static let signature = try! URLSignature(hexPairs: [(key, salt)])
    /// base64url of http://img.example.com/pretty/image.jpg
    static let encoded = "aHR0cDovL2ltZy5leGFtcGxlLmNvbS9wcmV0dHkvaW1hZ2UuanBn"

    @Test("signatures computed elsewhere verify; any change to path or signature does not")
    func signatures() throws {
        let vectors = [
            ("/rs:fill:300:400:0/g:sm/\(Self.encoded).png", "Doh68Kklui8ULk4PZhaEESn42s4sw40HsXB7pNJvuvI"),
            (
                "/rs:fit:300:300/plain/http://img.example.com/pretty/image.jpg@png",
                "CamYhHohoRpPKf4Y7VpcGlcD1aw2aOHWflhV7gk-Tr8"
            ),
            (
                "/w:200/q:80/aHR0cDovL2ltZy5leGFt/cGxlLmNvbS9wcmV0dHkvaW1hZ2UuanBn.webp",
                "OFCZ-eNePC-RUV1k9vXz2lE_SMpOjPrgtfXuTAc0qgc"
            ),
        ]
        for (path, expected) in vectors {
            #expect(Self.signature.sign(path) == expected)
            #expect(Self.signature.isValid(expected, for: path))
            #expect(!Self.signature.isValid(expected, for: path + "x"))
            var flipped = Array(expected)
            flipped[5] = flipped[5] == "A" ? "B" : "A"
            #expect(!Self.signature.isValid(String(flipped), for: path))
            #expect(!Self.signature.isValid(expected.dropLast(2), for: path))
            #expect(Self.signature.isValid(expected + "=", for: path))  // padding is tolerated
            #expect(!Self.signature.isValid("not+base64/", for: path))
            let parsed = try ProcessingURL.parse(
                "/\(expected)\(path)", signature: Self.signature, allowsUnsigned: false)
            #expect(parsed.source == .remote(URL(string: "http://img.example.com/pretty/image.jpg")!))
        }
    }

    @Test("rotation: any configured pair verifies; bad hex is refused at start-up")
    func rotation() throws {
        let path = "/rs:fill:300:400:0/g:sm/\(Self.encoded).png"
        let rotated = try URLSignature(hexPairs: [("00ff", "01"), (Self.key, Self.salt)])
        #expect(rotated.isValid("Doh68Kklui8ULk4PZhaEESn42s4sw40HsXB7pNJvuvI", for: path))
        let old = try URLSignature(hexPairs: [("00ff", "01")])
        #expect(!old.isValid("Doh68Kklui8ULk4PZhaEESn42s4sw40HsXB7pNJvuvI", for: path))
        #expect(throws: URLSignature.InvalidKey.self) { try URLSignature(hexPairs: [("xyz", "00")]) }
        #expect(throws: URLSignature.InvalidKey.self) { try URLSignature(hexPairs: [("", "00")]) }
        #expect(throws: URLSignature.InvalidKey.self) { try URLSignature(hexPairs: [("00", "0")]) }
        #expect(!URLSignature(pairs: []).isValid("Doh68Kklui8ULk4PZhaEESn42s4sw40HsXB7pNJvuvI", for: path))
    }

    @Test("URLs made by the imgproxy package from PyPI parse to what was asked")
    func clientURLs() throws {
        let fill = try ProcessingURL.parse(
            "/U4oKpEcrJLG5CkKRGzQj7eVDPXHzQQIjQXWrWUi8BfI/g:ce/rs:fill:300:200:0/aHR0cHM6Ly9leGFtcGxlLmNvbS9waG90b3MvY2F0LmpwZw.webp",
            signature: Self.signature, allowsUnsigned: false)
        #expect(fill.source == .remote(URL(string: "https://example.com/photos/cat.jpg")!))
        #expect(fill.options.resizingType == .fill && fill.options.width == 300 && fill.options.height == 200)
        #expect(fill.options.gravity == .center && !fill.options.enlarge && fill.format == .webp)

        let auto = try ProcessingURL.parse(
            "/aQIM8Wge0CLw_JTO1co1nc4HCintGlwKxtgxHdpoB_A/q:80/g:sm/rs:auto:512:512:1/aHR0cDovLzEyNy4wLjAuMTo4MDgwL2EgYi5wbmc_eD0xJnk9Mg",
            signature: Self.signature, allowsUnsigned: false)
        #expect(auto.options.quality == 80 && auto.options.gravity == .smart && auto.options.enlarge)
        #expect(auto.options.resizingType == .auto && auto.options.width == 512 && auto.format == nil)
        guard case .remote(let url) = auto.source else {
            Issue.record("got \(auto.source)")
            return
        }
        #expect(url.host == "127.0.0.1" && url.port == 8080 && url.query == "x=1&y=2")

        let unsigned = "/insecure/g:ce/rs:fit:100:0:0/aHR0cHM6Ly9leGFtcGxlLmNvbS9kb2cucG5n"
        #expect(throws: ProcessingURL.Failure.unsignedNotAllowed) {
            try ProcessingURL.parse(unsigned, signature: Self.signature, allowsUnsigned: false)
        }
        let allowed = try ProcessingURL.parse(unsigned, signature: nil, allowsUnsigned: true)
        #expect(allowed.options.width == 100 && allowed.options.height == 0)
        #expect(allowed.source == .remote(URL(string: "https://example.com/dog.png")!))
    }

    @Test("every option, by its short and its long name")
    func options() throws {
        func parse(_ options: String) throws -> ProcessingOptions {
            try ProcessingURL.parse("/_/\(options)/\(Self.encoded)", signature: nil, allowsUnsigned: true).options
        }
        for name in ["rs", "resize"] {
            let o = try parse("\(name):force:10:20:t")
            #expect(o.resizingType == .force && o.width == 10 && o.height == 20 && o.enlarge)
            let partial = try parse("\(name):fill::30")
            #expect(partial.resizingType == .fill && partial.width == 0 && partial.height == 30)
        }
        for name in ["s", "size"] {
            let o = try parse("\(name):7:8:1")
            #expect(o.width == 7 && o.height == 8 && o.enlarge)
        }
        for name in ["rt", "resizing_type"] {
            for type in ProcessingOptions.ResizingType.allCases {
                #expect(try parse("\(name):\(type.rawValue)").resizingType == type)
            }
        }
        for name in ["w", "width"] { #expect(try parse("\(name):640").width == 640) }
        for name in ["h", "height"] { #expect(try parse("\(name):480").height == 480) }
        for name in ["g", "gravity"] {
            for type in ProcessingOptions.GravityType.allCases where type != .smart && type != .focusPoint {
                let plain = ProcessingOptions.Gravity(type)
                #expect(try parse("\(name):\(type.rawValue)").gravity == plain)
                // Offsets of nothing, as builders that write every argument send them
                #expect(try parse("\(name):\(type.rawValue):0:0").gravity == plain)
                #expect(try parse("\(name):\(type.rawValue)::0.0").gravity == plain)
                // Offsets: pixels, fractions, negative
                #expect(try parse("\(name):\(type.rawValue):10:-0.25").gravity == .init(type, x: 10, y: -0.25))
            }
            #expect(try parse("\(name):sm").gravity == .smart)
            #expect(try parse("\(name):fp:0.25:1").gravity == .init(.focusPoint, x: 0.25, y: 1))
        }
        for name in ["q", "quality"] {
            #expect(try parse("\(name):75").quality == 75)
            #expect(try parse("\(name):0").quality == nil)
        }
        for name in ["f", "format", "ext"] {
            #expect(try parse("\(name):jpg").format == .jpeg)
            #expect(try parse("\(name):png").format == .png)
            #expect(try parse("\(name):webp").format == .webp)
        }
        #expect(try parse("dpr:2").dpr == 2)
        #expect(try parse("dpr:1.5").dpr == 1.5)
        for name in ["el", "enlarge"] {
            #expect(try parse("\(name):1").enlarge)
            #expect(try !parse("\(name):false").enlarge)
        }
        // An extend that asks for no padding (what builders that write every argument send)
        for text in ["rs:fit:30:40:1:0", "rs:fit:30:40:1:false", "rs:fit:30:40:1:", "s:30:40:1:f", "ex:0", "extend:f"] {
            let o = try parse("w:30/h:40/el:1/\(text)")
            #expect(o.width == 30 && o.height == 40 && o.enlarge, "\(text)")
        }
        // Later options override earlier ones; the extension sets the format.
        let combined = try ProcessingURL.parse(
            "/_/w:10/size:20:30/\(Self.encoded).png", signature: nil, allowsUnsigned: true)
        #expect(combined.options.width == 20 && combined.options.height == 30 && combined.format == .png)
    }

    @Test("unknown or malformed options and sources are 404s (imgproxy's status), signatures 403s; nothing traps")
    func failures() {
        let bad: [(String, ProcessingURL.Failure)] = [
            ("/_/w:-1/\(Self.encoded)", .invalidArgument(option: "w", value: "-1")),
            ("/_/w:1e3/\(Self.encoded)", .invalidArgument(option: "w", value: "1e3")),
            ("/_/w:99999999999999999999/\(Self.encoded)", .invalidArgument(option: "w", value: "99999999999999999999")),
            ("/_/w:100001/\(Self.encoded)", .invalidArgument(option: "w", value: "100001")),
            ("/_/w:/\(Self.encoded)", .invalidArgument(option: "w", value: "")),
            ("/_/w:1:2/\(Self.encoded)", .invalidArgument(option: "w", value: "1:2")),
            ("/_/rs:stretch:1:1/\(Self.encoded)", .invalidArgument(option: "rs", value: "stretch:1:1")),
            ("/_/g:no:0:nan/\(Self.encoded)", .invalidArgument(option: "g", value: "no:0:nan")),
            ("/_/g:no:0:0:0/\(Self.encoded)", .invalidArgument(option: "g", value: "no:0:0:0")),
            ("/_/cropp:10:10/\(Self.encoded)", .unknownOption("cropp")),
            (
                "/_/rs:fit:1:1:0:1:ce:0:0:x/\(Self.encoded)",
                .invalidArgument(option: "rs", value: "fit:1:1:0:1:ce:0:0:x")
            ),
            ("/_/s:1:1:0:x/\(Self.encoded)", .invalidArgument(option: "s", value: "1:1:0:x")),
            ("/_/ex:1:sm/\(Self.encoded)", .invalidArgument(option: "ex", value: "1:sm")),
            ("/_/g:sm:1/\(Self.encoded)", .invalidArgument(option: "g", value: "sm:1")),
            ("/_/g:fp:0.5/\(Self.encoded)", .invalidArgument(option: "g", value: "fp:0.5")),
            ("/_/g:fp:0.5:1.5/\(Self.encoded)", .invalidArgument(option: "g", value: "fp:0.5:1.5")),
            ("/_/g:no:1e3/\(Self.encoded)", .invalidArgument(option: "g", value: "no:1e3")),
            ("/_/c:-1:10/\(Self.encoded)", .invalidArgument(option: "c", value: "-1:10")),
            ("/_/t:300/\(Self.encoded)", .invalidArgument(option: "t", value: "300")),
            ("/_/t:10:zzzzzz/\(Self.encoded)", .invalidArgument(option: "t", value: "10:zzzzzz")),
            ("/_/pd:1:2:3:4:5/\(Self.encoded)", .invalidArgument(option: "pd", value: "1:2:3:4:5")),
            ("/_/pd:-1/\(Self.encoded)", .invalidArgument(option: "pd", value: "-1")),
            ("/_/rot:45/\(Self.encoded)", .invalidArgument(option: "rot", value: "45")),
            ("/_/fl:yes/\(Self.encoded)", .invalidArgument(option: "fl", value: "yes")),
            ("/_/bg:12345/\(Self.encoded)", .invalidArgument(option: "bg", value: "12345")),
            ("/_/bg:1:2/\(Self.encoded)", .invalidArgument(option: "bg", value: "1:2")),
            ("/_/bg:256:0:0/\(Self.encoded)", .invalidArgument(option: "bg", value: "256:0:0")),
            ("/_/bl:-2/\(Self.encoded)", .invalidArgument(option: "bl", value: "-2")),
            ("/_/sh:inf/\(Self.encoded)", .invalidArgument(option: "sh", value: "inf")),
            ("/_/pix:1.5/\(Self.encoded)", .invalidArgument(option: "pix", value: "1.5")),
            ("/_/wm:2/\(Self.encoded)", .invalidArgument(option: "wm", value: "2")),
            ("/_/wm:0.5:sm/\(Self.encoded)", .invalidArgument(option: "wm", value: "0.5:sm")),
            ("/_/fq:jpeg/\(Self.encoded)", .invalidArgument(option: "fq", value: "jpeg")),
            ("/_/fq:pdf:10/\(Self.encoded)", .invalidArgument(option: "fq", value: "pdf:10")),
            ("/_/mb:-5/\(Self.encoded)", .invalidArgument(option: "mb", value: "-5")),
            ("/_/z:0/\(Self.encoded)", .invalidArgument(option: "z", value: "0")),
            ("/_/exp:soon/\(Self.encoded)", .invalidArgument(option: "exp", value: "soon")),
            ("/_/exp:1000/\(Self.encoded)", .expired),
            ("/_/pr:nope/\(Self.encoded)", .unknownPreset("nope")),
            ("/_/msr:1/\(Self.encoded)", .forbiddenOption("msr")),
            ("/_/skp:exe/\(Self.encoded)", .invalidArgument(option: "skp", value: "exe")),
            ("/_/fn:%%%:1/\(Self.encoded)", .invalidArgument(option: "fn", value: "%%%:1")),
            ("/_/extend:yes/\(Self.encoded)", .invalidArgument(option: "extend", value: "yes")),
            ("/_/q:101/\(Self.encoded)", .invalidArgument(option: "q", value: "101")),
            ("/_/dpr:0/\(Self.encoded)", .invalidArgument(option: "dpr", value: "0")),
            ("/_/dpr:nan/\(Self.encoded)", .invalidArgument(option: "dpr", value: "nan")),
            ("/_/el:yes/\(Self.encoded)", .invalidArgument(option: "el", value: "yes")),
            ("/_/g:center/\(Self.encoded)", .invalidArgument(option: "g", value: "center")),
            ("/_/\(Self.encoded).pdf", .cannotWrite("pdf")),  // imgproxy Pro writes PDF: 422, cannot save
            ("/_/\(Self.encoded).xyz", .invalidArgument(option: "ext", value: "xyz")),
            ("/_/w:10", .malformedPath),
            ("/_", .malformedPath),
            ("", .malformedPath),
            ("/_/w:10/%%%", .invalidSource("not base64url")),
            ("/_/w:10/plain/ftp://example.com/a.png", .invalidSource("scheme ftp is not served")),
            ("/_/w:10/plain/file:///etc/passwd", .invalidSource("scheme file is not served")),
            ("/_/w:10/plain/http:///nohost.png", .invalidSource("no host")),
            ("/AAAA/w:10/\(Self.encoded)", .badSignature),
        ]
        for (path, expected) in bad {
            #expect(throws: expected, "\(path)") {
                try ProcessingURL.parse(path, signature: Self.signature, allowsUnsigned: true)
            }
        }
        #expect(ProcessingURL.Failure.badSignature.status == 403)
        #expect(ProcessingURL.Failure.forbiddenOption("msr").status == 403)
        #expect(ProcessingURL.Failure.expired.status == 404)
        #expect(ProcessingURL.Failure.unknownOption("x").status == 404)
    }

    @Test("plain sources: percent-decoded, with an @ extension; local sources by path")
    func plainAndLocal() throws {
        let plain = try ProcessingURL.parse(
            "/_/w:10/plain/https%3A%2F%2Fexample.com%2Fa%20b.jpg%3Fv%3D2@webp", signature: nil, allowsUnsigned: true)
        #expect(plain.format == .webp)
        guard case .remote(let url) = plain.source else {
            Issue.record("got \(plain.source)")
            return
        }
        #expect(url.host == "example.com" && url.query == "v=2")
        let local = try ProcessingURL.parse(
            "/_/w:10/plain/local:///photos/cat.png", signature: nil, allowsUnsigned: true)
        #expect(local.source == .local(path: "/photos/cat.png"))
        #expect(throws: ProcessingURL.Failure.self) {
            try ProcessingURL.parse("/_/w:10/plain/local://host/cat.png", signature: nil, allowsUnsigned: true)
        }
    }
}
