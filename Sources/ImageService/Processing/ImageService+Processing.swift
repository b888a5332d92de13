import CoreMetrics
import Crypto
import Foundation
import HTTPTypes
import ImageLoader
import ImageLoaderSupport
import Logging
import RasterImage
import ServiceLifecycle
import Tracing

extension ImageService {
    /// The answer to `GET {path}`, a processing URL, with the request's `Accept` and
    /// conditional header fields (for tests and callers without a whole request).
    func answer(
        path: String, accept: String?, conditions: Conditions,
        departure: @Sendable () async -> ClientDeparture? = { nil }
    ) async -> Reply {
        var headers = HTTPFields()
        if let accept { headers[.accept] = accept }
        if let tag = conditions.ifNoneMatch { headers[.ifNoneMatch] = tag }
        if let since = conditions.ifModifiedSince { headers[.ifModifiedSince] = since }
        return await answer(path: path, headers: headers, departure: departure)
    }

    /// The answer to `GET {path}`, a processing URL, with the request's header fields:
    /// `Accept` and the client hints (``ClientFeatures``), the conditional fields
    /// (``Validators``), `Cookie` (``Configuration/cookies``).
    /// `departure` is asked for only when the answer is not in the result cache.
    func answer(
        path: String, headers: HTTPFields, authority: String? = nil,
        departure: @Sendable () async -> ClientDeparture? = { nil }
    ) async -> Reply {
        let features = ClientFeatures(headers, configuration: configuration)
        let conditions = configuration.validators.conditions(
            ifNoneMatch: headers[.ifNoneMatch], ifModifiedSince: headers[.ifModifiedSince])
        let cacheKey = ResultCacheKey(path: path, features: features)
        if resultCacheMayAnswer(cookie: headers[.cookie]), let hit = cachedReply(cacheKey, conditions: conditions) {
            return hit
        }
        do {
            let request = try decide(
                path: path, headers: headers, authority: authority, features: features, conditions: conditions,
                cacheKey: cacheKey)
            let reply = try await withTimeout(leavingWith: await departure()) {
                try await self.sharedReply(request)
            }
            guard case .image(let result) = reply else { return reply }
            return conditions.matches(result.meta) ? .notModified(result.meta) : reply
        } catch {
            var failure = ServiceError.from(error)
            if failure.isMissingSource { failure.maxAge = configuration.notFoundTTL }
            return .failure(failure)
        }
    }

    /// The request, decided: its URL parsed and signature checked, its source allowed,
    /// the cookie that may go to the source, its limits. Throws the answer's error.
    private func decide(
        path: String, headers: HTTPFields, authority: String?, features: ClientFeatures, conditions: Conditions,
        cacheKey: ResultCacheKey
    ) throws -> ServiceRequest {
        guard path.hasPrefix(configuration.pathPrefix) else { throw ServiceError(status: 404, "not found") }
        let url = try ProcessingURL.parse(
            String(path.dropFirst(configuration.pathPrefix.count)), signature: configuration.signature,
            allowsUnsigned: configuration.allowsUnsigned, rules: configuration.urlRules,
            starting: features.startingOptions)
        let allowed = try configuration.sources.check(url.source)
        let cookie: String? =
            if case .remote(let source) = allowed {
                configuration.cookies.cookie(for: source, request: headers, authority: authority)
            } else { nil }
        return ServiceRequest(
            url: url, source: allowed, features: features, conditions: conditions, cookie: cookie,
            cacheKey: cookie == nil ? cacheKey : nil, limits: effectiveLimits(url.options.security))
    }

    /// The answer, shared by every request in flight for the same result, conditional
    /// or not: the run started by the first one decides with that request's conditions
    /// (a 304 before any decoding when they match). A request that joins a run ending in
    /// a 304 its own conditions do not match (a plain request, or other validators) goes
    /// on to a run that makes the image, which requests like it share: at most two runs,
    /// whatever the mix of requests.
    private func sharedReply(_ request: ServiceRequest) async throws -> Reply {
        // The shared run's spans are children of the request that started it.
        let trace = configuration.tracesRequests ? InstrumentationContext.current : nil
        func run(_ request: ServiceRequest, makesImage: Bool) async throws -> Reply {
            try await shared.value(
                for: request.runKey(makesImage: makesImage), product: nil, priority: PriorityHandle(.normal)
            ) { run in
                try await InstrumentationContext.$current.withValue(trace) {
                    try await self.admitted(run.priority) { try await self.produce(request) }
                }
            }.value
        }
        let first = try await run(request, makesImage: false)
        if case .notModified(let meta) = first, !request.conditions.matches(meta) {
            return try await run(request.with(Conditions()), makesImage: true)
        }
        return first
    }

    /// Whether the result cache may answer a request with this `Cookie`: not when its
    /// cookies may go to its source, which makes the answer its user's own. (The one
    /// rule for both doors: the router's and ``CachedResultHandler``'s.)
    func resultCacheMayAnswer(cookie: String?) -> Bool {
        configuration.cookies == .none || cookie == nil
    }

    /// The answer from the result cache (the image, or 304 for `conditions`), without
    /// waiting: nil when the cache holds no fresh result for the path and Accept.
    func cachedReply(_ key: ResultCacheKey, conditions: Conditions) -> Reply? {
        guard let results, let hit = results.fresh(key, at: Date()) else { return nil }
        metrics.resultHit()
        var answer = hit
        answer.meta.cache = "result"
        return conditions.matches(answer.meta) ? .notModified(answer.meta) : .image(answer)
    }

    /// Makes the answer, one step at a time: a result from the bucket; else the source
    /// (or the fallback image for it), a 304 when the conditions match its validators
    /// (or its origin, asked with them, answers 304); else the result, passed through or
    /// rendered, then kept. The header is read once: by the decode that renders, or,
    /// for a source passed through, alone.
    private func produce(_ request: ServiceRequest) async throws -> Reply {
        let now = Date()
        if let stored = await storedReply(request, now: now) { return stored }
        let source: SourceData
        let fallbackStatus: Int?
        switch try await fetchedSource(request, now: now) {
        case .notModified(let meta): return .notModified(meta)
        case .source(let fetched, let status): (source, fallbackStatus) = (fetched, status)
        }
        metrics.sourceFetched(from: source.tier)
        guard source.bytes.count <= request.limits.maxSourceBytes else {
            throw ServiceError.sourceTooLarge(bytes: request.limits.maxSourceBytes)
        }
        if fallbackStatus == nil,
            request.conditions.matches(entityTag: source.entityTag, lastModified: source.lastModified)
        {
            // Nothing is decoded for a 304: it carries no body, so no Content-Type.
            return .notModified(meta(source, request, format: request.url.format, now: now))
        }
        var result: ProcessedResult
        if let unprocessed = try passedThrough(source, request, now: now) {
            result = unprocessed
        } else {
            result = try await rendered(source, request, now: now)
        }
        if let fallbackStatus { sendsAsFallback(&result, status: fallbackStatus) }
        if configuration.debugHeaders { result.meta.extra[.originContentLength] = String(source.bytes.count) }
        if fallbackStatus == nil { keep(result, for: request, now: now) }
        return .image(result)
    }

    /// A result another instance (or this one, before a restart) made and put in the
    /// bucket, still usable at `now`; it goes into the result cache too.
    private func storedReply(_ request: ServiceRequest, now: Date) async -> Reply? {
        guard let storage, let key = request.cacheKey else { return nil }
        let found = await traced("result_storage.read") { span in
            let stored = await storage.read(key, now: now)
            span?.attributes["imageloader.result_storage.hit"] = stored != nil
            return stored
        }
        guard var stored = found else {
            metrics.resultStorage("miss")
            return nil
        }
        metrics.resultStorage("hit")
        results?.insert(stored, for: key)
        stored.meta.cache = "storage"
        return request.conditions.matches(stored.meta) ? .notModified(stored.meta) : .image(stored)
    }

    /// What a fetch gave: the source (or the fallback image standing in for it, with the
    /// status it is sent with), or the origin's 304 to the client's own validators.
    private enum Fetched {
        case source(SourceData, fallbackStatus: Int?)
        case notModified(ResponseMeta)
    }

    /// The request's source, fetched (traced and timed); the fallback image when it
    /// cannot be, if there is one.
    private func fetchedSource(_ request: ServiceRequest, now: Date) async throws -> Fetched {
        do {
            let source = try await traced("source.fetch") { span in
                let fetched = try await metrics.timingFetch {
                    try await fetch(request.source, conditions: request.conditions, cookie: request.cookie)
                }
                span?.attributes["imageloader.source.cache"] = fetched.tier
                span?.attributes["imageloader.source.bytes"] = fetched.bytes.count
                return fetched
            }
            return .source(source, fallbackStatus: nil)
        } catch let error as ImageLoadingError {
            if case .notModified(let headers) = error.reason {
                // The origin, asked with the client's validators, says its copy is current.
                let answered = SourceData(
                    bytes: [], contentType: nil, entityTag: headers.first(named: "ETag"),
                    lastModified: headers.first(named: "Last-Modified"), freshFor: nil, tier: "revalidated",
                    cacheControl: headers.first(named: "Cache-Control"), expires: headers.first(named: "Expires"))
                return .notModified(meta(answered, request, format: request.url.format, now: now))
            }
            let (source, status) = try fallback(for: ServiceError.from(error))
            return .source(source, fallbackStatus: status)
        } catch let error as ServiceError {
            let (source, status) = try fallback(for: error)
            return .source(source, fallbackStatus: status)
        }
    }

    /// The source as it is, when the URL asks for it unprocessed (`raw`, a format it
    /// skips) or it is an SVG answered as SVG (sanitised: every SVG that leaves the
    /// service unrendered is); `nil` when it is to be rendered.
    private func passedThrough(_ source: SourceData, _ request: ServiceRequest, now: Date) throws -> ProcessedResult? {
        let url = request.url
        // The whole body: SVG's root element may lie past a long prolog (sniff reads what it needs).
        let sourceFormat = ImageFormat.sniff(source.bytes)
        if url.format == .svg && sourceFormat != .svg {
            throw ServiceError(status: 422, "SVG results are made only from SVG sources")
        }
        let skipped = url.options.skipProcessing.union(configuration.skipProcessingFormats)
        let passesThrough =
            url.options.raw
            || (sourceFormat.map(skipped.contains) ?? false
                && (url.format == nil || url.format?.imageFormat == sourceFormat))
        // An SVG source is answered as SVG when SVG is asked for or no format is (unless
        // the service always rasterises), as imgproxy does.
        let svgPassesThrough =
            sourceFormat == .svg
            && (passesThrough || url.format == .svg || (url.format == nil && !configuration.alwaysRasterizeSVG))
        guard passesThrough || svgPassesThrough else { return nil }
        let info: ImageInfo
        var bytes = source.bytes
        if sourceFormat == .svg {
            // Sanitised once: the document sent and its size come from the same read.
            do {
                (bytes, info) = try ImageDecoder(options: loader.configuration.decodingOptions)
                    .sanitizedSVGAndInfo(.bytes(source.bytes))
            } catch {
                throw ServiceError.from(error)
            }
            try request.limits.checkPixels(of: info)
        } else {
            info = try header(of: source.bytes, limits: request.limits)
        }
        var made = meta(source, request, format: nil, now: now, contentType: info.contentType)
        // The source's own extension (imgproxy's, from its type): `fn:name` gives `name.tiff`.
        made.contentDisposition = ResponseRules.contentDisposition(
            filename: url.options.filename, source: request.source.text, fileExtension: info.format.fileExtension,
            attachment: url.options.returnAttachment)
        made.extra[.acceptRanges] = "bytes"
        if configuration.debugHeaders {
            made.extra.addDebugFields(origin: info.uprightSize, result: info.uprightSize)
        }
        made.vary = nil
        return ProcessedResult(bytes: bytes, meta: made)
    }

    /// The source rendered as the URL asks, in the format the rules pick for the client.
    private func rendered(_ source: SourceData, _ request: ServiceRequest, now: Date) async throws -> ProcessedResult {
        let (requested, options, features) = (request.url.format, request.url.options, request.features)
        let preferred = configuration.preferredFormats
        let made = try await metrics.timingProcessing {
            try await render(source.bytes, options, limits: request.limits, contentType: source.contentType) {
                info, animated in
                ResponseRules.outputFormat(
                    requested: requested, features: features, source: info.format, animated: animated,
                    expectsTransparency: options.expectsTransparency(sourceHasAlpha: info.hasAlpha),
                    preferred: preferred)
            }
        }
        var produced = meta(source, request, format: made.format, now: now, contentType: made.format.contentType)
        if configuration.debugHeaders { produced.extra.addDebugFields(origin: made.origin, result: made.result) }
        return ProcessedResult(bytes: made.bytes, meta: produced)
    }

    /// A result made from the fallback image: sent with `status`, kept downstream for the
    /// fallback's TTL, or (for a failure) no longer than the failure would be.
    private func sendsAsFallback(_ result: inout ProcessedResult, status: Int) {
        result.meta.status = status
        if let ttl = configuration.fallbackImage?.ttl, ttl > 0 {
            result.meta.caching = .maxAge(ttl)
        } else if status >= 400 {
            // imgproxy sends none.
            result.meta.caching = .verbatim("no-store")
        }
    }

    /// Keeps `result` in the result cache and, in the background, in the result bucket,
    /// while it is still fresh at `now` and the request's own keys allow.
    private func keep(_ result: ProcessedResult, for request: ServiceRequest, now: Date) {
        guard let key = request.cacheKey, result.meta.keepUntil > now else { return }
        results?.insert(result, for: key)
        guard let storage else { return }
        let metrics = self.metrics
        let span = startedSpan("result_storage.write")
        storage.write(result, for: key) { stored in
            metrics.resultStorage(stored ? "write" : "write_failure")
            if !stored { span?.setStatus(SpanStatus(code: .error)) }
            span?.end()
        }
    }

    /// The fallback image as the source, with the status it is sent with; `failure`
    /// itself when there is none.
    private func fallback(for failure: ServiceError) throws -> (SourceData, Int?) {
        guard let image = configuration.fallbackImage, failure.status != 499 else { throw failure }
        if let cause = failure.cause { configuration.logger.warning("source failed, fallback image sent: \(cause)") }
        let source = SourceData(
            bytes: image.bytes, contentType: nil, entityTag: nil, lastModified: nil, freshFor: 0, tier: "fallback")
        return (source, image.status ?? failure.status)
    }

    /// The header fields of a result of `source` in `format` (`nil` for a 304 that
    /// knows none): the source's validators as ``Configuration/validators`` passes them
    /// on, `Cache-Control` by imgproxy's rules, `Vary`, `Content-Disposition` and `Link`.
    private func meta(
        _ source: SourceData, _ request: ServiceRequest, format: ResultFormat?, now: Date, contentType: String = ""
    ) -> ResponseMeta {
        let (url, allowed, expires) = (request.url, request.source, request.expires)
        // The result cache keeps a result while its source is fresh (and the URL valid).
        var keepFor = min(source.freshFor ?? TimeInterval(configuration.sourceTTL), ImageService.maxFreshness)
        if let expires { keepFor = max(0, min(keepFor, expires.timeIntervalSince(now))) }
        var meta = ResponseMeta(
            contentType: contentType, sourceTag: source.entityTag, sourceLastModified: source.lastModified,
            entityTag: configuration.validators.entityTag(source: source.entityTag),
            lastModified: configuration.validators.lastModified(source: source.lastModified),
            vary: ClientFeatures.vary(configuration), keepUntil: now.addingTimeInterval(keepFor),
            caching: clientCaching(source, expires: expires),
            contentDisposition: ResponseRules.contentDisposition(
                filename: url.options.filename, source: allowed.text, format: format,
                attachment: url.options.returnAttachment))
        meta.cache = source.tier
        if configuration.canonicalHeader, case .remote(let link) = allowed {
            meta.extra[HTTPField.Name("Link")!] = "<\(link.absoluteString)>; rel=\"canonical\""
        }
        return meta
    }

    /// `Cache-Control` by imgproxy's rules: a URL's `exp` caps the TTL; else the
    /// source's own (passed through when asked); else the TTL.
    private func clientCaching(_ source: SourceData, expires: Date?) -> ClientCaching {
        let ttl = configuration.ttl
        var rule = ClientCaching.maxAge(ttl)
        if configuration.cacheControlPassthrough {
            if let control = source.cacheControl, !control.isEmpty {
                // What remains of the source's freshness, not the number first received:
                // its max-age less its Age and the time the copy has been kept.
                let maxAge = CacheControl(headerValues: [control]).maxAge
                if let maxAge, let left = source.freshFor {
                    rule = .aged(control, since: Date().addingTimeInterval(left - TimeInterval(maxAge)))
                } else {
                    rule = .verbatim(control)
                }
            } else if let date = source.expires.flatMap(HTTPDate.parse) {
                rule = .until(date, cap: .max, otherwise: rule)
            }
        }
        if let expires { rule = .until(expires, cap: ttl, otherwise: rule) }
        return rule
    }

    /// The header of a source sent as it is: read, and its size held to the limits, as
    /// a processed source's is.
    private func header(of bytes: [UInt8], limits: EffectiveLimits) throws -> ImageInfo {
        let info: ImageInfo
        do {
            info = try loader.configuration.decoder.info(.bytes(bytes), options: loader.configuration.decodingOptions)
        } catch {
            throw ServiceError.from(error)
        }
        try limits.checkPixels(of: info)
        return info
    }

    /// The service's limits, lowered where the URL's security options ask
    /// (``URLRules/allowsSecurityOptions``); never raised.
    func effectiveLimits(_ security: ProcessingOptions.SecurityLimits) -> EffectiveLimits {
        EffectiveLimits(
            maxSourceBytes: min(configuration.maxSourceBytes, security.maxSourceBytes ?? .max),
            maxSourcePixels: min(configuration.maxSourcePixels, security.maxSourcePixels ?? .max),
            maxResultSide: min(configuration.maxResultSide, security.maxResultSide ?? .max),
            maxAnimationFrames: min(max(1, configuration.maxAnimationFrames), security.maxAnimationFrames ?? .max),
            maxAnimationFramePixels: [configuration.maxAnimationFramePixels, security.maxAnimationFramePixels]
                .compactMap { $0 }.min())
    }

    /// The encoded result of `bytes` with `options`, in the format `format` picks from the
    /// source's header: in one pass when the options ask for a resize with at most a plain
    /// compass crop, else step by step (``GeneralPath``). The header is read once, by
    /// the decode: what depends on it (the pixel limit, the format, the box, animation)
    /// is decided there, before any pixel is decoded.
    func render(
        _ bytes: [UInt8], _ options: ProcessingOptions, limits: EffectiveLimits, contentType: String?,
        format: @escaping @Sendable (ImageInfo, _ animated: Bool) -> ResultFormat
    ) async throws -> RequestProcessor.Encoded {
        // EXIF kept as the options say: all of it, or only the copyright (the default, as imgproxy's).
        let kept: PhotoMetadata.Kept? = !options.stripMetadata ? .all : options.keepCopyright ? .copyright : nil
        let exif = kept.flatMap {
            PhotoMetadata.outputBlock(from: bytes, keeping: $0, upright: options.autoRotate ?? true)
        }
        var decodingLimits = loader.configuration.decodingOptions.limits
        decodingLimits.maxPixelsPerFrame = min(decodingLimits.maxPixelsPerFrame, limits.maxSourcePixels)
        let processor = RequestProcessor(
            options: options, limits: limits, decodingLimits: decodingLimits, exif: exif, format: format,
            encoders: encoders, shrinkOnLoad: configuration.shrinkOnLoad, watermark: watermark, spans: workerSpans)
        do {
            // The request's own failures keep their status; decoders' errors are the
            // loader's `.decoding`.
            return try await loader.processing(bytes, declaredContentType: contentType) { decoder in
                do {
                    return try processor.encoded(bytes, decoder: decoder)
                } catch let error as ImageEncodingError {
                    throw ServiceError(status: 500, error.description)
                }
            }
        } catch {
            throw ServiceError.from(error)
        }
    }

    /// A year: the longest `max-age` the service sends.
    static let maxFreshness: TimeInterval = 365 * 86_400
}
