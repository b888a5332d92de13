import Foundation
import ImageLoader
import RasterImage
import Testing

@testable import ImageService

@Suite("Output format negotiation and validators")
struct ResponseRulesTests {
    /// The features of a request with `accept` under the given switches.
    static func features(
        _ accept: String?, autoWebP: Bool = true, autoAVIF: Bool = false, autoJXL: Bool = false,
        enforce: Set<ProcessingOptions.Format> = []
    ) -> ClientFeatures {
        var configuration = ImageService.Configuration()
        (configuration.autoWebP, configuration.autoAVIF, configuration.autoJXL) = (autoWebP, autoAVIF, autoJXL)
        configuration.enforceWebP = enforce.contains(.webp)
        configuration.enforceAVIF = enforce.contains(.avif)
        configuration.enforceJXL = enforce.contains(.jxl)
        return ClientFeatures(accept: accept, dpr: [], width: [], configuration: configuration)
    }

    static func format(
        _ requested: ProcessingOptions.Format?, _ features: ClientFeatures, source: ImageFormat? = .jpeg,
        animated: Bool = false, alpha: Bool = false, preferred: [ProcessingOptions.Format] = [.jpeg, .png, .gif]
    ) -> ProcessingOptions.Format {
        ResponseRules.outputFormat(
            requested: requested, features: features, source: source, animated: animated, expectsTransparency: alpha,
            preferred: preferred)
    }

    @Test("the URL's format wins; else WebP when Accept lists it (q above 0, no wildcards); else the preferred")
    func negotiation() {
        #expect(Self.format(.png, Self.features("image/webp")) == .png)
        let browsers = [
            ("image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8", true),  // Chrome
            ("image/avif,image/webp,*/*", true),  // Firefox
            ("image/webp;q=0.9, image/jpeg", true),
            ("image/WEBP", true),
            ("image/webp;q=0", false),
            ("image/png,image/svg+xml,image/*;q=0.8,video/*;q=0.8,*/*;q=0.5", false),  // Safari before WebP
            ("*/*", false),
            ("image/*", false),
            ("", false),
            ("image/webpx", false),
        ]
        for (accept, webp) in browsers {
            #expect(Self.format(nil, Self.features(accept), source: .tiff) == (webp ? .webp : .jpeg), "\(accept)")
            // Off (imgproxy's default), Accept changes nothing.
            #expect(Self.format(nil, Self.features(accept, autoWebP: false), source: .tiff) == .jpeg, "\(accept)")
        }
        #expect(Self.format(nil, Self.features(nil), source: .tiff, alpha: true) == .png)
    }

    @Test("AVIF and JPEG XL are chosen from Accept only where turned on, JPEG XL first, then AVIF, then WebP")
    func modernFormats() {
        let chrome = "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"
        let safari = "image/webp,image/avif,image/jxl,image/heic,image/heic-sequence,video/*;q=0.8,*/*;q=0.5"
        #expect(Self.format(nil, Self.features(chrome)) == .webp)
        #expect(Self.format(nil, Self.features(chrome, autoAVIF: true)) == .avif)
        #expect(Self.format(nil, Self.features(chrome, autoJXL: true), alpha: true) == .webp)
        #expect(Self.format(nil, Self.features(safari, autoAVIF: true, autoJXL: true)) == .jxl)
        #expect(Self.format(nil, Self.features(safari, autoAVIF: true)) == .avif)
        #expect(Self.format(nil, Self.features("image/avif;q=0,image/webp", autoAVIF: true)) == .webp)
        #expect(Self.format(.jpeg, Self.features(safari, autoAVIF: true, autoJXL: true)) == .jpeg)
        // An animation: JPEG XL and AVIF are for stills, WebP keeps the frames.
        #expect(Self.format(nil, Self.features(safari, autoAVIF: true, autoJXL: true), animated: true) == .webp)
    }

    // imgproxy's processing.go `determineOutputFormat` and its preferred-format tests.
    @Test(
        "without a format: the source's when preferred, else the first preferred that holds the animation and alpha"
    )
    func preferredFormats() {
        let none = Self.features(nil)
        let cases: [(ImageFormat, Bool, Bool, [ProcessingOptions.Format], ProcessingOptions.Format)] = [
            (.gif, true, false, [.jpeg, .png, .gif], .gif),  // an animated GIF stays one
            (.gif, false, true, [.jpeg, .png, .gif], .gif),  // a still GIF too
            (.webp, true, false, [.jpeg, .png, .gif], .gif),  // an animated WebP: the first format with frames
            (.webp, false, true, [.jpeg, .png, .gif], .png),
            (.webp, false, false, [.jpeg, .png, .gif], .jpeg),
            (.png, false, false, [.jpeg, .png, .gif], .png),
            (.tiff, false, true, [.jpeg, .png, .gif], .png),
            (.heif, false, false, [.jpeg, .png, .gif], .jpeg),
            (.png, false, true, [.webp, .jpeg], .webp),
            (.bmp, true, true, [.jpeg], .jpeg),  // nothing fits: the first
            (.avif, false, false, [.avif, .jpeg], .avif),
        ]
        for (source, animated, alpha, preferred, expected) in cases {
            let chosen = Self.format(nil, none, source: source, animated: animated, alpha: alpha, preferred: preferred)
            #expect(chosen == expected, "\(source) animated \(animated) alpha \(alpha) \(preferred)")
        }
    }

    @Test("enforced formats replace the URL's for clients that take them; AVIF and JPEG XL only for stills")
    func enforced() {
        let all = "image/jxl,image/avif,image/webp"
        #expect(Self.format(.png, Self.features(all, autoWebP: false, enforce: [.webp])) == .webp)
        #expect(Self.format(.png, Self.features(all, autoWebP: false, enforce: [.avif, .webp])) == .avif)
        #expect(
            Self.format(.gif, Self.features(all, autoWebP: false, enforce: [.avif, .webp]), animated: true) == .webp)
        #expect(Self.format(.png, Self.features(all, autoWebP: false, enforce: [.jxl])) == .jxl)
        #expect(Self.format(.png, Self.features("image/png", autoWebP: false, enforce: [.jxl, .avif, .webp])) == .png)
        // Enforcing also prefers.
        #expect(Self.format(nil, Self.features(all, autoWebP: false, enforce: [.webp]), source: .png) == .webp)
    }

    // imgproxy's conditionalheaders request tests and processing_handler_test.go's buster tests.
    @Test(
        "validators: the source's passed on, busters wrap and unwrap them, switched off they are neither sent nor read")
    func validators() throws {
        var validators = ImageService.Validators()
        #expect(validators.entityTag(source: "\"loremipsumdolor\"") == "\"loremipsumdolor\"")
        #expect(validators.lastModified(source: "Wed, 21 Oct 2015 07:28:00 GMT") == "Wed, 21 Oct 2015 07:28:00 GMT")
        #expect(validators.lastModified(source: "yesterday") == nil)
        validators.entityTagBuster = "buster"
        #expect(validators.entityTag(source: "\"loremipsumdolor\"") == "\"buster/ImxvcmVtaXBzdW1kb2xvciI\"")
        #expect(validators.entityTag(source: "loremipsumdolor") == "\"buster/bG9yZW1pcHN1bWRvbG9y\"")
        let unwrapped = validators.conditions(ifNoneMatch: "\"buster/bG9yZW1pcHN1bWRvbG9y\"", ifModifiedSince: nil)
        #expect(unwrapped.ifNoneMatch == "loremipsumdolor")
        // Another buster, or none: nothing asked, not even the date.
        let stale = validators.conditions(
            ifNoneMatch: "\"old/bG9yZW1pcHN1bWRvbG9y\"", ifModifiedSince: "Wed, 21 Oct 2015 07:28:00 GMT")
        #expect(stale.isEmpty)
        let buster = try #require(HTTPDate.parse("Thu, 25 Feb 2021 01:45:00 GMT"))
        validators.lastModifiedBuster = buster
        #expect(validators.lastModified(source: "Wed, 21 Oct 2015 07:28:00 GMT") == "Thu, 25 Feb 2021 01:45:00 GMT")
        #expect(validators.lastModified(source: "Fri, 26 Feb 2021 01:45:00 GMT") == "Fri, 26 Feb 2021 01:45:00 GMT")
        #expect(validators.conditions(ifNoneMatch: nil, ifModifiedSince: "Wed, 21 Oct 2015 07:28:00 GMT").isEmpty)
        #expect(
            validators.conditions(ifNoneMatch: nil, ifModifiedSince: "Fri, 26 Feb 2021 01:45:00 GMT").ifModifiedSince
                != nil)
        validators = ImageService.Validators()
        validators.entityTags = false
        validators.lastModified = false
        #expect(
            validators.entityTag(source: "\"a\"") == nil
                && validators.lastModified(source: "Wed, 21 Oct 2015 07:28:00 GMT") == nil)
        #expect(validators.conditions(ifNoneMatch: "\"a\"", ifModifiedSince: "Wed, 21 Oct 2015 07:28:00 GMT").isEmpty)
    }

    @Test("Cache-Control by imgproxy's rules: exp caps the TTL, then the source's passed through, then the TTL")
    func caching() {
        let now = Date(timeIntervalSince1970: 1_000_000)
        #expect(ClientCaching.maxAge(4242).value(at: now) == "max-age=4242, public")
        #expect(ClientCaching.maxAge(0).value(at: now) == "no-cache")
        let hour = now.addingTimeInterval(3600)
        #expect(ClientCaching.until(hour, cap: 4242, otherwise: .maxAge(9)).value(at: now) == "max-age=3600, public")
        #expect(ClientCaching.until(hour, cap: 60, otherwise: .maxAge(9)).value(at: now) == "max-age=60, public")
        #expect(
            ClientCaching.until(now.addingTimeInterval(-5), cap: 60, otherwise: .maxAge(9)).value(at: now)
                == "max-age=9, public")
        #expect(ClientCaching.verbatim("max-age=1234, public").value(at: now) == "max-age=1234, public")
    }

    @Test(
        "a passed-through Cache-Control ages: max-age and s-maxage lose the time since, other directives stay; any size"
    )
    func agedCaching() {
        let now = Date(timeIntervalSince1970: 1_000_000)
        let since = now.addingTimeInterval(-400)
        #expect(
            ClientCaching.aged("public, max-age=1000, s-maxage=2000, stale-if-error=60", since: since).value(at: now)
                == "public, max-age=600, s-maxage=1600, stale-if-error=60")
        #expect(ClientCaching.aged("max-age=100", since: since).value(at: now) == "max-age=0")
        // Values from an origin, however large or small, never trap.
        #expect(ClientCaching.aged("max-age=-9223372036854775808", since: since).value(at: now) == "max-age=0")
        #expect(
            ClientCaching.aged("max-age=9223372036854775807", since: .distantPast).value(at: now)
                == "max-age=\(Int.max - Int(Int32.max))")
        #expect(
            ClientCaching.aged("max-age=\"50\", no-transform", since: now).value(at: now) == "max-age=50, no-transform")
    }

    @Test("If-None-Match: any listed tag, weak or strong, or *")
    func ifNoneMatch() {
        let tag = "\"abc\""
        #expect(ResponseRules.matches(ifNoneMatch: "\"abc\"", tag: tag))
        #expect(ResponseRules.matches(ifNoneMatch: "W/\"abc\"", tag: tag))
        #expect(ResponseRules.matches(ifNoneMatch: "\"x\", \"abc\"", tag: tag))
        #expect(ResponseRules.matches(ifNoneMatch: "*", tag: tag))
        #expect(!ResponseRules.matches(ifNoneMatch: "\"abd\"", tag: tag))
        #expect(!ResponseRules.matches(ifNoneMatch: "", tag: tag))
        // As imgproxy compares them: an unquoted tag matches its quoted form.
        #expect(ResponseRules.matches(ifNoneMatch: "abc", tag: tag))
    }
}
