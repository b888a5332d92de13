// The fuzz targets: each feeds one parser of untrusted input through the library.
// A target returns normally for every input: a typed error is the right answer to
// bad bytes; a trap, a leak or a hang is a finding.
import CFuzzDriver
import Foundation

@testable import ImageLoader
@testable import ImageService
@testable import ObjectStorage
@testable import RasterImage

/// Decoding limits small enough that a fuzzer explores error paths instead of
/// waiting on legitimate large allocations (the limits' own checks are what is tested).
nonisolated let fuzzLimits: DecodingLimits = {
    var limits = DecodingLimits()
    limits.maxPixelsPerFrame = 4_000_000
    limits.maxTotalBytes = 64 << 20
    limits.maxWorkingBytes = 64 << 20
    limits.maxTotalPixels = 16_000_000
    limits.maxFrames = 200
    return limits
}()

/// One decoder through the public API: info, a full decode, a thumbnail that fills a
/// small box, and a truncation-tolerant decode.
func fuzzDecoder(_ format: ImageFormat, _ bytes: [UInt8]) {
    guard ImageFormat.sniff(bytes) == format else { return }
    let decoder = ImageDecoder(options: DecodingOptions(limits: fuzzLimits))
    _ = try? decoder.info(.bytes(bytes))
    _ = try? decoder.decode(.bytes(bytes), options: DecodingOptions(limits: fuzzLimits, frames: .all))
    _ = try? decoder.decode(
        .bytes(bytes), options: DecodingOptions(limits: fuzzLimits, frames: .first, allowsTruncatedData: true))
    let fill = ThumbnailOptions(width: 17, height: 9, fit: .fill)
    _ = try? decoder.thumbnail(.bytes(bytes), limits: fuzzLimits, options: fill)
    var fit = ThumbnailOptions(maxPixelSize: 24)
    fit.allowsUpscaling = true
    _ = try? decoder.thumbnail(.bytes(bytes), limits: fuzzLimits, options: fit)
    // Options chosen from the header that the thumbnail's own decode reads.
    _ = try? decoder.thumbnail(.bytes(bytes), limits: fuzzLimits) { info in
        var chosen = ThumbnailOptions(maxPixelSize: min(64, max(1, info.width / 4)), fit: info.hasAlpha ? .fill : .fit)
        chosen.frames = info.frameCount > 1 ? .all : .first
        return chosen
    }
}

/// Header lines "Name: value" (the first line may be a status code), as a response
/// the cache stores, then every rule of the policy over it.
func fuzzCachePolicy(_ bytes: [UInt8]) {
    let text = String(decoding: bytes, as: UTF8.self)
    var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    let status = lines.first.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) } ?? 200
    if lines.first.flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) }) != nil { lines.removeFirst() }
    let headers = lines.compactMap { line -> HeaderField? in
        guard let colon = line.firstIndex(of: ":") else { return nil }
        return HeaderField(String(line[..<colon]), String(line[line.index(after: colon)...]))
    }
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let response = StoredResponse(
        url: "https://example.com/a.png", status: status, headers: headers, requestTime: now.addingTimeInterval(-1),
        responseTime: now)
    let policy = HTTPCachePolicy()
    for at in [now, now.addingTimeInterval(86_400 * 365)] {
        let evaluation = policy.evaluate(response, now: at)
        _ = evaluation.lifetime - evaluation.age
    }
    _ = HTTPCachePolicy(useServerCachePolicy: true, defaultMaxAge: 60).freshnessLifetime(response)
    _ = policy.isStorable(response)
    _ = policy.matchesVary(response, requestHeaders: headers)
    _ = policy.varyingRequestHeaders(for: response, requestHeaders: headers)
    _ = policy.conditionalHeaders(for: response)
    _ = policy.notModified(headers, matches: response)
    _ = policy.updating(response, with: headers, requestTime: now, responseTime: now)
    // The failure memory reads max-age the same way.
    _ = CacheControl(headerValues: response.values("Cache-Control")).maxAge.map(TimeInterval.init)
}

func fuzzHTTPDate(_ bytes: [UInt8]) {
    let text = String(decoding: bytes, as: UTF8.self)
    if let date = HTTPDate.parse(text) {
        // Whatever parses must format and parse back to the same second.
        let again = HTTPDate.parse(HTTPDate.format(date))
        if again != date { fatalError("HTTP date does not round-trip: \(text)") }
    }
    _ = HTTPDate.format(Date(timeIntervalSince1970: Double(bytes.count) * 1e15))
}

nonisolated let entryDirectory = NSTemporaryDirectory() + "imageloader-fuzz-\(getpid())"

/// The entry format, straight and through a cache folder that holds the bytes as an entry.
func fuzzDiskEntry(_ bytes: [UInt8]) {
    for kind in [EntryFile.Kind.response, .failure] {
        // A decoded entry re-encodes to the bytes it was read from.
        if case .valid(let metadata, let body) = EntryFile.decode(bytes, kind: kind),
            EntryFile.encode(metadata: metadata, body: body, kind: kind) != bytes
        {
            fatalError("entry does not round-trip")
        }
    }
    guard let cache = try? DiskCache(directory: entryDirectory, maxBytes: 1 << 20) else { return }
    let key = "https://example.com/fuzz.png"
    let path = entryDirectory + "/entries/" + DiskCache.hash(of: key) + ".response"
    FileManager.default.createFile(atPath: path, contents: Data(bytes))
    _ = cache.response(for: key)
    _ = cache.statistics
    // The index too: the same bytes as the access index, read by a new cache.
    FileManager.default.createFile(atPath: entryDirectory + "/index.json", contents: Data(bytes))
    _ = try? DiskCache(directory: entryDirectory, maxBytes: 1 << 20).statistics
}

func fuzzSniff(_ bytes: [UInt8]) {
    _ = ImageFormat.sniff(bytes)
    let text = String(decoding: bytes.prefix(64), as: UTF8.self)
    _ = ImageFormat(contentType: text)
    _ = try? AcceptedContentTypes.default.validate(bytes.prefix(64), declaredContentType: text)
    _ = try? AcceptedContentTypes.default.validate(bytes.prefix(64), declaredContentType: nil)
}

nonisolated let fuzzSignature = try! URLSignature(hexPairs: [(key: "0123456789abcdef", salt: "fedcba9876543210")])

/// A request path (the first line) and an Accept or If-None-Match value (the second)
/// through the service's URL parsing, signed and not, with presets and security options,
/// and everything the options decide: the plan of sizes for sources of extreme sizes,
/// the whole processing of a small image (crops, canvases, filters, the watermark at
/// every position), the source policy, the format negotiation and the entity-tag match.
func fuzzProcessingURL(_ bytes: [UInt8]) {
    let text = String(decoding: bytes, as: UTF8.self)
    let lines = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
    let path = String(lines[0])
    let header = lines.count > 1 ? String(lines[1]) : "image/webp,*/*"
    var parsed: [ProcessingURL] = []
    for allowsUnsigned in [true, false] {
        if let url = try? ProcessingURL.parse(path, signature: fuzzSignature, allowsUnsigned: allowsUnsigned) {
            parsed.append(url)
        }
    }
    // The same path under a valid signature, so the options are reached whatever the first segment.
    if let slash = path.utf8.dropFirst().firstIndex(of: UInt8(ascii: "/")) {
        let signed = path[slash...]
        let resigned = "/" + fuzzSignature.sign(signed) + signed
        for rules in [fuzzRules, fuzzInfoRules, fuzzOnlyPresets] {
            if let url = try? ProcessingURL.parse(
                resigned, signature: fuzzSignature, allowsUnsigned: false, rules: rules)
            {
                parsed.append(url)
            }
        }
    }
    if let options = try? ProcessingURL.parseOptions(Substring(path), rules: fuzzRules) {
        parsed.append(ProcessingURL(options: options, source: .local(path: "/a.png")))
    }
    let policy = SourcePolicy(
        allowedPrefixes: ["https://images.example.com/", "https://*.example.*/a*/"], localRoot: entryDirectory)
    for url in parsed {
        for (width, height) in [(1, 1), (100_000, 1), (1, 100_000), (65_535, 65_535), (3, 7)] {
            for maxSide in [1, 8192, Int.max] {
                _ = url.options.thumbnailOptions(sourceWidth: width, sourceHeight: height, maxResultSide: maxSide)
                _ = ImgproxyGeometry(
                    options: url.options, sourceWidth: width, sourceHeight: height, maxResultSide: maxSide)
            }
        }
        // The whole processing of a 7x5 image, limited so the fuzzer explores, not allocates.
        let processor = RequestProcessor(
            options: url.options,
            limits: EffectiveLimits(
                maxSourceBytes: 1 << 20, maxSourcePixels: 1 << 20, maxResultSide: 64, maxAnimationFrames: 1,
                maxAnimationFramePixels: 1 << 20),
            decodingLimits: fuzzLimits, exif: nil, format: { _, _ in .png }, encoders: ResultEncoders(.init()),
            shrinkOnLoad: .fastest, watermark: fuzzWatermark)
        _ = try? processor.encoded(fuzzSmallPNG, decoder: ImageDecoder())
        _ = try? policy.check(url.source)
        _ = ResponseRules.contentDisposition(
            filename: url.options.filename, source: path, format: url.format, attachment: url.options.returnAttachment)
        var features = ClientFeatures()
        features.prefers = [.webp, .avif]
        for hasAlpha in [false, true] {
            _ = ResponseRules.outputFormat(
                requested: url.format, features: features, source: .gif, animated: hasAlpha,
                expectsTransparency: hasAlpha, preferred: [.jpeg, .png, .gif])
            _ = ResponseRules.accepts("image/webp", in: header)
        }
    }
    _ = ResponseRules.matches(ifNoneMatch: header, tag: "\"abc\"")
    if let address = IPAddress(header) {
        _ = NetworkPolicy.isPublic(address)
        _ = address.description
    }
}

nonisolated let fuzzRules: URLRules = {
    var rules = URLRules()
    rules.allowsSecurityOptions = true
    try? rules.addPreset("default=q:70")
    try? rules.addPreset("p=rs:fill:10:10/pr:q")
    try? rules.addPreset("q=pr:p/bl:1")
    return rules
}()

nonisolated let fuzzInfoRules: URLRules = {
    var rules = fuzzRules
    rules.forInfo = true
    return rules
}()

nonisolated let fuzzOnlyPresets: URLRules = {
    var rules = fuzzRules
    rules.onlyPresets = true
    return rules
}()

/// A 7x5 RGBA PNG with a gradient and some transparency, and its header.
nonisolated let fuzzSmallPNG: [UInt8] = {
    var pixels: [UInt8] = []
    for i in 0..<35 {
        let alpha: UInt8 = i % 4 == 0 ? 0 : 255
        pixels += [UInt8(i * 7), UInt8(255 - i * 7), 90, alpha]
    }
    return (try? PNGEncoder().encode(RasterImage(width: 7, height: 5, pixels: pixels)!)) ?? []
}()
nonisolated let fuzzWatermark = WatermarkImage(
    image: RasterImage(width: 3, height: 2, pixels: [UInt8](repeating: 200, count: 24))!, opacity: 0.7)

/// An image file's EXIF block and an ICC profile, as ``PhotoMetadata`` and
/// ``ICCDescription`` read them: the first byte says which.
func fuzzMetadata(_ bytes: [UInt8]) {
    guard let first = bytes.first else { return }
    let rest = bytes.dropFirst()
    switch first % 3 {
    case 0: _ = PhotoMetadata(fileBytes: rest)
    case 1: _ = PhotoMetadata(exif: rest)
    default: _ = ICCDescription.name(of: rest)
    }
}

/// A zlib stream through both of ``ZlibInflate``'s engines. When both take it, the
/// bytes must be the same; libdeflate must not take a stream ISA-L declines (that would
/// be a fault in the checks around ISA-L). ISA-L may take a stream libdeflate declines:
/// it does not refuse an incomplete distance table that the data never uses, as zlib
/// and libdeflate do (the output is still checked against the Adler-32 and its size). The
/// first three bytes say how many bytes the output must fill (20 bits, up to 1 MiB)
/// and, in the top four bits, the size of the pieces the stream is cut into (as a
/// PNG's IDAT chunks cut it); the stream follows.
func fuzzZlib(_ bytes: [UInt8]) {
    guard bytes.count >= 3 else { return }
    let count = Int(bytes[0]) | Int(bytes[1]) << 8 | Int(bytes[2] & 0x0F) << 16
    let pieceSize = [1 << 30, 1, 2, 3, 5, 7, 8, 13, 16, 64, 100, 1000, 4096, 8192, 32768, 65536][Int(bytes[2] >> 4)]
    let stream = Array(bytes[3...])
    let results = ZlibInflate.Engine.allCases.map { engine -> [UInt8]? in
        stream.withUnsafeBytes { raw in
            var parts: [UnsafeRawBufferPointer] = []
            var offset = 0
            while offset < raw.count {
                let end = min(raw.count, offset + pieceSize)
                parts.append(UnsafeRawBufferPointer(rebasing: raw[offset..<end]))
                offset = end
            }
            // One byte more, so that even an empty output has an address.
            var output = [UInt8](repeating: 0, count: count + 1)
            let done = output.withUnsafeMutableBufferPointer {
                ZlibInflate.inflate(parts, into: $0.baseAddress!, count: count, engine: engine)
            }
            return done ? Array(output.prefix(count)) : nil
        }
    }
    switch (results[0], results[1]) {
    case (let libdeflate?, let isal?) where libdeflate != isal: fatalError("the engines inflated different bytes")
    case (.some, nil): fatalError("ISA-L declined a stream libdeflate took")
    default: break
    }
}

/// What object stores and their credential endpoints send, and what the result bucket
/// holds: a stored result (the service's envelope), a store's error body, an ISO 8601
/// time, an INI file's section, an object URL; each parser over the same bytes.
func fuzzObjectStorage(_ bytes: [UInt8]) {
    if let result = StoredResult.decode(bytes) {
        // What decodes encodes back to the same header fields and body.
        let again = StoredResult.decode(StoredResult.encode(result))
        precondition(again?.body == result.body && again?.meta.entityTag == result.meta.entityTag)
    }
    _ = ObjectStorageDataLoader.reason(bytes)
    let text = String(decoding: bytes, as: UTF8.self)
    _ = HTTPDate.parseISO8601(text)
    _ = AWSCredentialProvider.section("default", of: text)
    _ = AWSCredentialProvider.section("profile thumbs", of: text)
    if let url = URL(string: text), let object = ObjectLocation(url) {
        _ = SignatureV4.encode(object.key, keepsSlash: true)
    }
}

/// The SVG sanitiser (its reader, rules and bounds), without librsvg: whatever it
/// A progressive JPEG's 1/8 image from the scans it needs (JPEGEighthImage): the marker
/// walk, the DC and AC scans, the IDCTs and the colour conversion, within small limits;
/// then the thumbnail path that takes it.
func fuzzJPEGEighth(_ bytes: [UInt8]) {
    let image = bytes.withUnsafeBytes {
        JPEGEighthImage.read($0, maxScans: fuzzLimits.maxProgressiveScans, maxWorkingBytes: fuzzLimits.maxWorkingBytes)
    }
    if let image {
        var pixels = [UInt8](repeating: 0, count: image.outputWidth * image.outputHeight * 4)
        pixels.withUnsafeMutableBufferPointer { buffer in
            let target = ImageBufferTarget(buffer.baseAddress!, bytesPerRow: image.outputWidth * 4)
            image.writeRows(into: target, colorSpace: image.components.count == 1 ? .grey : .ycbcr)
        }
    }
    _ = try? ImageDecoder().thumbnail(.bytes(bytes), limits: fuzzLimits, options: ThumbnailOptions(maxPixelSize: 4))
}

/// A baseline JPEG with restart markers in strips (``JPEGStrips``): the marker walk,
/// the intervals found, each strip's JPEG put together and decoded on 3 threads at a
/// scale the input picks; whenever the strips decode, their rows must be libjpeg's one
/// whole decode's exactly.
func fuzzJPEGStrips(_ bytes: [UInt8]) {
    let scale = [1, 2, 4, 8][Int(bytes.last ?? 0) & 3]
    func decode(strips: Bool) -> [UInt8]? {
        try? bytes.withUnsafeBytes { memory in
            try ByteReader.withMemory(memory, limits: fuzzLimits) { reader in
                let session = try JPEGReadSession(reader, limits: fuzzLimits)
                try session.readHeader()
                try fuzzLimits.check(width: session.imageWidth, height: session.imageHeight, format: .jpeg)
                let plan = strips ? JPEGStrips.plan(memory, session: session, minimumPixels: 0) : nil
                if strips && plan == nil { return nil }
                try session.start(scaleDenominator: scale)
                let (width, height) = (session.outputWidth, session.outputHeight)
                var pixels = [UInt8](repeating: 0, count: width * height * 4)
                let done = try pixels.withUnsafeMutableBufferPointer { buffer in
                    let target = ImageBufferTarget(buffer.baseAddress!, bytesPerRow: width * 4)
                    if let plan {
                        let given = plan.decode(
                            scale: scale, width: width, height: height, into: target, cores: 3, limits: fuzzLimits)
                        return given == height
                    }
                    // Its warnings (damaged data decoded around) are the decoder's business.
                    try session.readRows(into: target, allowsTruncatedData: false)
                    return true
                }
                return done ? pixels : nil
            }
        }
    }
    guard let strips = decode(strips: true) else { return }
    guard let whole = decode(strips: false) else { fatalError("the strips decode what the whole decode refuses") }
    if strips != whole { fatalError("the strips' rows differ from the whole decode's") }
}

/// keeps must read again, and sanitising what it kept must change nothing.
func fuzzSVGSanitizer(_ bytes: [UInt8]) {
    var limits = SVGLimits()
    limits.maxElements = 5_000
    let sanitizer = SVGSanitizer(limits: limits, decodingLimits: fuzzLimits)
    _ = SVGSniffer.isSVG(bytes)
    guard let first = try? sanitizer.sanitize(bytes) else { return }
    guard let second = try? sanitizer.sanitize(first.bytes) else {
        fatalError("the sanitiser's own output is refused")
    }
    if second.bytes != first.bytes { fatalError("sanitising twice changes the document") }
}
