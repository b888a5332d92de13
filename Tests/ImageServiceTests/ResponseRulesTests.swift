import Testing

@testable import ImageService

@Suite("Output format negotiation and validators")
struct ResponseRulesTests {
    @Test("the URL's format wins; else WebP when Accept lists it; else PNG with alpha, JPEG without")
    func negotiation() {
        #expect(ResponseRules.format(requested: .png, accept: "image/webp", hasAlpha: false) == (.png, false))
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
            let (format, varies) = ResponseRules.format(requested: nil, accept: accept, hasAlpha: false)
            #expect(format == (webp ? .webp : .jpeg), "\(accept)")
            #expect(varies)
        }
        #expect(ResponseRules.format(requested: nil, accept: nil, hasAlpha: true) == (.png, true))
    }

    @Test("AVIF and JPEG XL are chosen from Accept only where turned on, JPEG XL first, then AVIF, then WebP")
    func modernFormats() {
        let chrome = "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"
        let safari = "image/webp,image/avif,image/jxl,image/heic,image/heic-sequence,video/*;q=0.8,*/*;q=0.5"
        #expect(ResponseRules.format(requested: nil, accept: chrome, hasAlpha: false) == (.webp, true))
        #expect(ResponseRules.format(requested: nil, accept: chrome, hasAlpha: false, autoAVIF: true) == (.avif, true))
        #expect(ResponseRules.format(requested: nil, accept: chrome, hasAlpha: true, autoJXL: true) == (.webp, true))
        #expect(
            ResponseRules.format(requested: nil, accept: safari, hasAlpha: false, autoAVIF: true, autoJXL: true)
                == (.jxl, true))
        #expect(ResponseRules.format(requested: nil, accept: safari, hasAlpha: false, autoAVIF: true) == (.avif, true))
        #expect(
            ResponseRules.format(requested: nil, accept: "image/avif;q=0,image/webp", hasAlpha: false, autoAVIF: true)
                == (.webp, true))
        #expect(
            ResponseRules.format(requested: .jpeg, accept: safari, hasAlpha: false, autoAVIF: true, autoJXL: true)
                == (.jpeg, false))
    }

    @Test("entity tags change with the source's validator, the options and the format, and only then")
    func entityTags() throws {
        var options = ProcessingOptions()
        options.width = 300
        let base = ResponseRules.entityTag(
            source: "https://a/p.jpg", validator: "\"v1\"", options: options, format: .webp)
        #expect(base.hasPrefix("\"") && base.hasSuffix("\"") && base.count == 34)
        #expect(
            base
                == ResponseRules.entityTag(
                    source: "https://a/p.jpg", validator: "\"v1\"", options: options, format: .webp))
        var other = options
        other.height = 10
        let changed = [
            ResponseRules.entityTag(source: "https://a/q.jpg", validator: "\"v1\"", options: options, format: .webp),
            ResponseRules.entityTag(source: "https://a/p.jpg", validator: "\"v2\"", options: options, format: .webp),
            ResponseRules.entityTag(source: "https://a/p.jpg", validator: "\"v1\"", options: other, format: .webp),
            ResponseRules.entityTag(source: "https://a/p.jpg", validator: "\"v1\"", options: options, format: .jpeg),
        ]
        #expect(Set(changed + [base]).count == 5)
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
    }
}
