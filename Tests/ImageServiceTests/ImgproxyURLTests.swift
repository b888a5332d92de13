import Foundation
import Testing

@testable import ImageService

/// The URL builder against the `imgproxy` package from PyPI (1.0.0): the literals below
/// are its output for the same options (scripts/imgproxy-urls.py prints them), so equal
/// strings mean the same URL, signature included; and the service's parser reads back
/// what the builder writes.
@Suite("ImgproxyURL: building and signing URLs")
struct ImgproxyURLTests {
    static let signature = ProcessingURLTests.signature
    static let photo = "local:///jpeg-800x600.jpg"

    /// The client writes its extra options first, then the gravity, then the resize.
    static func client(
        _ source: String, _ advanced: [String], type: String = "auto", width: Int = 0, height: Int = 0,
        gravity: String = "ce", enlarge: Bool = false, format: String? = nil
    ) -> ImgproxyURL {
        var url = ImgproxyURL(source: source, format: format)
        for option in advanced {
            let parts = option.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            url.options.append(.init(parts[0], Array(parts.dropFirst())))
        }
        let gravityParts = gravity.split(separator: ":").map(String.init)
        url.options.append(.init("g", gravityParts))
        return url.resize(type, width: width, height: height, enlarge: enlarge)
    }

    @Test("the builder's signed URLs equal the PyPI client's, option for option")
    func matchesTheClient() {
        let cases: [(ImgproxyURL, String)] = [
            (
                Self.client(
                    "https://example.com/photos/cat.jpg", [], type: "fill", width: 300, height: 200, format: "webp"),
                "/U4oKpEcrJLG5CkKRGzQj7eVDPXHzQQIjQXWrWUi8BfI/g:ce/rs:fill:300:200:0/aHR0cHM6Ly9leGFtcGxlLmNvbS9waG90b3MvY2F0LmpwZw.webp"
            ),
            (
                Self.client(
                    "http://127.0.0.1:8080/a b.png?x=1&y=2", ["q:80"], width: 512, height: 512, gravity: "sm",
                    enlarge: true),
                "/aQIM8Wge0CLw_JTO1co1nc4HCintGlwKxtgxHdpoB_A/q:80/g:sm/rs:auto:512:512:1/aHR0cDovLzEyNy4wLjAuMTo4MDgwL2EgYi5wbmc_eD0xJnk9Mg"
            ),
            (
                Self.client(
                    Self.photo, ["c:400:300:nowe", "bg:ffffff", "sh:0.5"], type: "fill", width: 200, height: 150,
                    format: "jpg"),
                "/UYlKMGvJMPi4g7RQABeR7le4yCdF_lnhnwsqAdZD1Yw/c:400:300:nowe/bg:ffffff/sh:0.5/g:ce/rs:fill:200:150:0/bG9jYWw6Ly8vanBlZy04MDB4NjAwLmpwZw.jpg"
            ),
            (
                Self.client(
                    Self.photo, ["pd:10:20", "bg:255:0:0", "bl:1.5"], type: "fit", width: 160, height: 160,
                    format: "png"),
                "/dEtIKmshjdWQE_fSdBBblw1ScP-IIq08OFfnUsGQiK0/pd:10:20/bg:255:0:0/bl:1.5/g:ce/rs:fit:160:160:0/bG9jYWw6Ly8vanBlZy04MDB4NjAwLmpwZw.png"
            ),
            (
                Self.client(
                    Self.photo, ["rot:90", "fl:1:0", "ar:0", "cb:v2"], type: "fill", width: 90, height: 120,
                    gravity: "fp:0.3:0.7", format: "webp"),
                "/X2i7NJ1x-pOYCyqPn8QUxACoMsPuNpTa4lTR9OZnpnc/rot:90/fl:1:0/ar:0/cb:v2/g:fp:0.3:0.7/rs:fill:90:120:0/bG9jYWw6Ly8vanBlZy04MDB4NjAwLmpwZw.webp"
            ),
            (
                Self.client(
                    Self.photo, ["ex:1:so", "exar:0", "mw:50", "fq:webp:60:jpeg:70", "mb:20000"], type: "fit",
                    width: 300, height: 300, gravity: "ea:10:0.1", format: "webp"),
                "/Liz3ZQQ7FBA4m2_1gQ6H1vSrbtXJEfd6NsXtfq27Xl0/ex:1:so/exar:0/mw:50/fq:webp:60:jpeg:70/mb:20000/g:ea:10:0.1/rs:fit:300:300:0/bG9jYWw6Ly8vanBlZy04MDB4NjAwLmpwZw.webp"
            ),
            (
                Self.client(
                    Self.photo, ["t:10:ffffff:1:0", "pix:4", "z:0.5", "dpr:2", "fn:photo", "att:1", "exp:4102444800"],
                    width: 100),
                "/jnJ3M5l_diJVrVVqZ6NHV3scrqqdYwnqdi-FpuVLgmg/t:10:ffffff:1:0/pix:4/z:0.5/dpr:2/fn:photo/att:1/exp:4102444800/g:ce/rs:auto:100:0:0/bG9jYWw6Ly8vanBlZy04MDB4NjAwLmpwZw"
            ),
            (
                Self.client(
                    Self.photo, ["wm:0.5:soea:5:5:0.2", "sm:1", "kcr:1", "scp:0", "eth:0"], type: "fill-down",
                    width: 120, height: 80, format: "png"),
                "/rUfEM_YkA7PZliRVpNO9ejb-yC3THoZQZTH7gksduEo/wm:0.5:soea:5:5:0.2/sm:1/kcr:1/scp:0/eth:0/g:ce/rs:fill-down:120:80:0/bG9jYWw6Ly8vanBlZy04MDB4NjAwLmpwZw.png"
            ),
        ]
        for (built, expected) in cases {
            #expect(built.signed(with: Self.signature) == expected)
        }
        // The typed helpers write the same options.
        let typed = ImgproxyURL(source: "https://example.com/photos/cat.jpg", format: "webp").gravity("ce")
            .resize("fill", width: 300, height: 200)
        #expect(typed.signed(with: Self.signature) == cases[0].1)
    }

    @Test("what the builder writes, the service's parser reads back: options, source, format, signature")
    func roundTrip() throws {
        let sources = [
            "https://example.com/photos/cat.jpg", "http://127.0.0.1:8080/a b.png?x=1&y=2#frag", "local:///dir/ünï.png",
            "s3://bucket/key%20with%20escapes.jpg",
        ]
        for source in sources {
            for encoding in [ImgproxyURL.SourceEncoding.base64, .plain] {
                let url = ImgproxyURL(source: source, format: "webp", sourceEncoding: encoding)
                    .quality(70).gravity("fp", "0.3", "0.7").resize("fill", width: 120, height: 80, enlarge: true)
                    .option("bl", "1.5")
                let parsed = try ProcessingURL.parse(
                    url.signed(with: Self.signature), signature: Self.signature, allowsUnsigned: false)
                #expect(parsed.format == .webp, "\(source) \(encoding)")
                #expect(parsed.options.quality == 70 && parsed.options.blur == 1.5, "\(source) \(encoding)")
                #expect(parsed.options.resizingType == .fill && parsed.options.width == 120 && parsed.options.enlarge)
                let unsigned = try ProcessingURL.parse(url.unsigned, signature: nil, allowsUnsigned: true)
                #expect(unsigned.source == parsed.source, "\(source) \(encoding)")
                switch parsed.source {
                case .remote(let remote):
                    #expect(
                        remote.absoluteString.removingPercentEncoding == source.removingPercentEncoding,
                        "\(source) \(encoding)")
                case .local(let path):
                    #expect("local://" + path == source, "\(source) \(encoding)")
                }
            }
        }
    }
}
