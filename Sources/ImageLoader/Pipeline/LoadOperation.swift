import Foundation
import Logging
import RasterImage

/// One product's load: memory, then disk, then the origin, following RFC 9111 for a
/// private cache, and remembering failures. The request goes through
/// the download stage and the decode through the decode stage, shared with the other
/// products of the same URL in flight.
struct LoadOperation: Sendable {
    let key: ProductKey
    let options: LoadOptions
    let context: PipelineContext
    let emit: @Sendable (ImageLoadEvent) -> Void
    /// The load's priority: the highest of its callers, changing while it waits.
    let priority: PriorityHandle
    /// Asks the pipeline to let this work finish even when no caller waits any more.
    let keepRunning: @Sendable () -> Void

    private var url: URL { key.url }
    private var product: ImageProduct { key.product }
    /// The URL as text: requests, errors and remembered failures go by it.
    private var urlText: String { url.absoluteString }
    private var policy: HTTPCachePolicy { context.policy }
    private var configuration: ImageLoader.Configuration { context.configuration }
    /// The loader's header fields, then this load's.
    private var requestHeaders: [HeaderField] { context.requestHeaders + options.headers }

    /// A stored response, with its body once it has been read.
    private struct Cached {
        var response: StoredResponse
        var body: [UInt8]?
        var image: RasterImage?
        var encoded: EncodedImage?
        var fromMemory: Bool

        var source: LoadedImage.Source { fromMemory ? .memory : .disk }
    }

    func run() async {
        do {
            try await perform()
            context.recentFailures.clear(urlText)
        } catch let error as ImageLoadingError {
            if error.reason != .cancelled {
                context.logger.warning("load failed", metadata: ["url": "\(urlText)", "error": "\(error)"])
                context.recentFailures.record(error, for: urlText)
            }
            context.metrics.failure()
            emit(.failed(error))
        } catch {
            context.metrics.failure()
            emit(.failed(ImageLoadingError(.network(String(describing: error)), url: urlText)))
        }
    }

    private func perform() async throws {
        if url.isFileURL { return try await loadFile() }
        guard url.scheme == "http" || url.scheme == "https", url.host != nil else {
            throw ImageLoadingError(.unsupportedURL, url: urlText)
        }
        let found = options.cachePolicy == .reload ? nil : try await lookUp()
        if options.cachePolicy != .reload, try await rememberedFailure() { return }
        guard var cached = found else {
            context.logMiss(urlText, "cache miss")
            context.metrics.miss()
            return try await fetch(revalidating: nil)
        }
        let evaluation = policy.evaluate(cached.response, now: context.now)
        let usable =
            switch options.cachePolicy {
            case .useCache: evaluation.isFresh
            case .revalidate: evaluation.isImmutable
            case .reload: false
            }
        if usable {
            let image = try await image(of: &cached)
            hit(cached)
            emit(.cached(loaded(image, cached.source, encoded: cached.encoded)))
            return
        }
        let whileRevalidating = options.cachePolicy == .useCache && evaluation.mayServeWhileRevalidating
        if whileRevalidating {
            // Before the stale image goes out: a caller that leaves as soon as it has it
            // must not cancel the revalidation.
            keepRunning()
        } else {
            let why = evaluation.isFresh ? "revalidation asked for" : "stale (age \(evaluation.age.rounded(.down)) s)"
            context.logMiss(urlText, "cache miss: \(why)")
            context.metrics.miss()
        }
        // The stale image first, for the caller to show while the origin is asked.
        let image: RasterImage
        do {
            image = try await self.image(of: &cached)
        } catch let error as ImageLoadingError where error.isDecodingFailure {
            // A stored entry that no longer decodes: forget it and ask afresh.
            context.diskCache?.remove(url: key.cache.storageName)
            return try await fetch(revalidating: nil)
        }
        if whileRevalidating { hit(cached) }
        emit(
            .cached(
                loaded(
                    image, cached.source, whileRevalidating ? .staleWhileRevalidate : .needsRevalidation,
                    encoded: cached.encoded)))
        try await fetch(revalidating: cached)
    }

    private func hit(_ cached: Cached) {
        if cached.fromMemory { context.metrics.memoryHit() } else { context.metrics.diskHit() }
    }

    /// The stored response for this product (memory first, then disk), if it answers this request.
    private func lookUp() async throws -> Cached? {
        if let entry = context.memoryCache?.entry(for: key.cache.storageName), let response = entry.response,
            // Entries in memory were stored with this loader's own header fields: Vary
            // matches unless this load adds its own.
            options.headers.isEmpty || policy.matchesVary(response, requestHeaders: requestHeaders)
        {
            return Cached(response: response, body: nil, image: entry.image, encoded: entry.encoded, fromMemory: true)
        }
        guard let disk = context.diskCache else { return nil }
        let storageName = key.cache.storageName
        guard let (response, body) = try await context.blocking(urlText, { disk.response(for: storageName) }) else {
            return nil
        }
        guard policy.matchesVary(response, requestHeaders: requestHeaders) else { return nil }
        return Cached(response: response, body: body, image: nil, encoded: nil, fromMemory: false)
    }

    /// The decoded image of a cached response, decoding (and keeping in memory) if needed.
    private func image(of cached: inout Cached) async throws -> RasterImage {
        if let image = cached.image { return image }
        var body = cached.body
        if body == nil, let disk = context.diskCache {
            let storageName = key.cache.storageName
            body = try await context.blocking(urlText) { disk.response(for: storageName)?.body }
        }
        guard let body else { throw ImageLoadingError(.decoding(ImageDecodingError(.empty)), url: urlText) }
        // A thumbnail's stored bytes are the encoded thumbnail: decoding them is all it takes.
        let image = try await context.decode(.bytes(body), url: urlText, priority: priority)
        cached.image = image
        cached.encoded = encodedProduct(body, image)
        context.remember(image, encoded: cached.encoded, response: cached.response, for: key.cache)
        return image
    }

    /// A failure remembered recently enough and often enough: fail without a request.
    private func rememberedFailure() async throws -> Bool {
        guard let disk = context.diskCache, disk.hasFailure(for: urlText) else { return false }
        let urlText = self.urlText
        guard let failure = try await context.blocking(urlText, { disk.failure(for: urlText) }) else { return false }
        guard failure.expires > context.now, failure.attempts >= configuration.maxAttemptsForErrors else {
            return false
        }
        context.logger.debug("remembered failure", metadata: ["url": "\(urlText)", "attempts": "\(failure.attempts)"])
        emit(
            .failed(
                ImageLoadingError(.rememberedFailure(status: failure.status, attempts: failure.attempts), url: urlText)
            ))
        return true
    }

    /// Asks the origin (conditionally when something is cached), through the download
    /// stage: products of this URL in flight that send the same request share it.
    private func fetch(revalidating cached: Cached?) async throws {
        emit(.sendingRequest(hadCache: cached != nil))
        var headers = requestHeaders
        if let cached { headers += policy.conditionalHeaders(for: cached.response) }
        let download: SharedStage<DownloadKey, DataResponse>.Outcome
        do {
            let emit = self.emit
            download = try await context.download(
                DataRequest(url: url, headers: headers), product: product, priority: priority
            ) { received, expected in
                emit(.progress(received: received, expected: expected))
            }
        } catch let error as ImageLoadingError {
            if error.reason == .cancelled || error.reason == .shutDown { throw error }
            return try await failed(error, response: nil, cached: cached, remembers: false)
        }
        let response = download.value
        // Nobody waits any more, and nobody asked for the cache to be filled: stop here.
        if Task.isCancelled { throw ImageLoadingError(.cancelled, url: urlText) }
        if response.status == 304, var cached {
            guard policy.notModified(response.headers, matches: cached.response) else {
                // A 304 for another representation: ask again, unconditionally.
                return try await fetch(revalidating: nil)
            }
            let updated = policy.updating(
                cached.response, with: response.headers, requestTime: response.requestTime,
                responseTime: response.responseTime)
            cached.response = updated
            context.metrics.notModified()
            let image = try await image(of: &cached)
            if let disk = context.diskCache {
                let (urlText, storageName) = (self.urlText, key.cache.storageName)
                try await context.blocking(urlText) {
                    if policy.isStorable(updated) { try? disk.update(updated) } else { disk.remove(url: storageName) }
                    disk.removeFailure(for: urlText)
                }
            }
            context.remember(image, encoded: cached.encoded, response: updated, for: key.cache)
            emit(.completed(loaded(image, .networkNotModified, encoded: cached.encoded)))
            return
        }
        guard response.status == 200 else {
            let error = ImageLoadingError(.httpStatus(response.status), url: urlText)
            return try await failed(error, response: response, cached: cached, remembers: download.isFirst)
        }
        try await accept(download, requestHeaders: headers)
    }

    /// A 200: checks the type, decodes, and stores when the response allows it.
    private func accept(_ download: SharedStage<DownloadKey, DataResponse>.Outcome, requestHeaders: [HeaderField])
        async throws
    {
        let response = download.value
        _ = try context.acceptedFormat(response.body, declaredContentType: response.value("Content-Type"), url: urlText)
        let (image, bytes) = try await make(from: download)
        var stored = StoredResponse(
            url: key.cache.storageName, status: response.status, headers: response.headers,
            requestTime: response.requestTime, responseTime: response.responseTime)
        stored.varyingRequestHeaders = policy.varyingRequestHeaders(for: stored, requestHeaders: requestHeaders)
        let storable = policy.isStorable(stored)
        var source = LoadedImage.Source.network
        if let disk = context.diskCache {
            let (urlText, storageName, entry) = (self.urlText, key.cache.storageName, stored)
            source = try await context.blocking(urlText) { () -> LoadedImage.Source in
                disk.removeFailure(for: urlText)
                guard storable, let bytes else {
                    disk.remove(url: storageName)
                    return .network
                }
                do {
                    try disk.store(entry, body: bytes)
                    return .networkToDisk
                } catch {
                    // A full or read-only disk: the image is still served, from memory next time.
                    context.logger.warning(
                        "disk cache write failed", metadata: ["url": "\(urlText)", "error": "\(error)"])
                    return .network
                }
            }
        }
        let encoded = encodedProduct(bytes, image)
        if storable {
            context.remember(image, encoded: encoded, response: stored, for: key.cache)
        } else {
            context.memoryCache?.remove(key.cache.storageName)
        }
        emit(.completed(loaded(image, source, encoded: encoded)))
    }

    private func loaded(
        _ image: RasterImage, _ source: LoadedImage.Source, _ freshness: LoadedImage.Freshness = .fresh,
        encoded: EncodedImage?
    ) -> LoadedImage {
        LoadedImage(image: image, source: source, url: url, freshness: freshness, encoded: encoded)
    }

    /// A thumbnail's encoded bytes, when at hand; `nil` for originals.
    private func encodedProduct(_ bytes: [UInt8]?, _ image: RasterImage) -> EncodedImage? {
        guard case .thumbnail = product, let bytes, let format = ImageFormat.sniff(bytes) else { return nil }
        return EncodedImage(bytes: bytes, format: format, width: image.width, height: image.height)
    }

    /// The product made from downloaded bytes. Alone, it is made the leanest way (a
    /// thumbnail shrinks while loading); shared with other products of the same
    /// download, one decode serves them all (``DecodePlan``) and each is resampled from it.
    private func make(from download: SharedStage<DownloadKey, DataResponse>.Outcome) async throws -> (
        RasterImage, [UInt8]?
    ) {
        let body = download.value.body
        guard download.products.count > 1 else { return try await make(.bytes(body), original: body) }
        let plan = DecodePlan(products: download.products)
        let (decoder, decodingOptions, metrics, context, urlText) = (
            configuration.decoder, configuration.decodingOptions, context.metrics, context, urlText
        )
        let reduced: ReducedImage
        do {
            reduced = try await context.decodes.value(
                for: DecodeKey(download: download.run, plan: plan), product: product, priority: priority
            ) { priority, _ in
                try await context.cpu(urlText, priority: priority) {
                    try metrics.timingDecode {
                        switch plan {
                        case .full:
                            return ReducedImage(full: try decoder.decode(.bytes(body), options: decodingOptions))
                        case .reduced(let thumbnails):
                            let frames: FrameSelection = thumbnails.allSatisfy { $0.frames == .first } ? .first : .all
                            return try decoder.decode(
                                .bytes(body), options: DecodingOptions(limits: decodingOptions.limits, frames: frames),
                                reducedFor: thumbnails)
                        }
                    }
                }
            }.value
        } catch is CancellationError {
            throw ImageLoadingError(.cancelled, url: urlText)
        }
        guard case .thumbnail(let options) = product else { return (reduced.image, body) }
        return try await context.cpu(urlText, priority: priority) {
            let image = try reduced.thumbnail(options: options)
            metrics.thumbnailMade()
            return (image, LoadOperation.encoded(image, options)?.bytes)
        }
    }

    /// The product made from the source alone, and the bytes the disk cache keeps for
    /// it: the original's own bytes, or the thumbnail encoded (`nil` when it cannot
    /// be: an animated thumbnail stays in memory only).
    private func make(_ source: ImageSource, original: [UInt8]?) async throws -> (RasterImage, [UInt8]?) {
        let (decoder, decodingOptions, metrics) = (
            configuration.decoder, configuration.decodingOptions, context.metrics
        )
        switch product {
        case .original:
            let image = try await context.cpu(urlText, priority: priority) {
                try metrics.timingDecode { try decoder.decode(source, options: decodingOptions) }
            }
            return (image, original)
        case .thumbnail(let options):
            return try await context.cpu(urlText, priority: priority) {
                // The decoder shrinks while loading when it can (the protocol's default
                // decodes, then resizes).
                let image = try metrics.timingDecode { try decoder.thumbnail(source, options: options) }
                metrics.thumbnailMade()
                return (image, LoadOperation.encoded(image, options)?.bytes)
            }
        }
    }

    /// A thumbnail encoded in its output format; `nil` for an animated one, which has
    /// no single encoding (it stays in memory only).
    static func encoded(_ image: RasterImage, _ options: ThumbnailOptions) -> EncodedImage? {
        options.frames == .first ? try? image.encoded(as: options.outputFormat) : nil
    }

    /// The origin failed. Within stale-if-error a cached image is served; error
    /// responses are remembered (unless no-store, and once per request: `remembers`
    /// is set for the load that asked first); then the error is reported.
    private func failed(_ error: ImageLoadingError, response: DataResponse?, cached: Cached?, remembers: Bool)
        async throws
    {
        let status = response?.status
        let serverFailure = status.map { [500, 502, 503, 504].contains($0) } ?? true
        if var cached, serverFailure, options.cachePolicy != .reload,
            policy.evaluate(cached.response, now: context.now).mayServeOnError
        {
            let image = try await image(of: &cached)
            emit(.cached(loaded(image, cached.source, .staleIfError, encoded: cached.encoded)))
            emit(.failed(error))
            return
        }
        if remembers, let response, let status, status >= 400, let disk = context.diskCache {
            let control = CacheControl(headerValues: response.headers.values(named: "Cache-Control"))
            if !control.noStore {
                let window = control.maxAge.map(TimeInterval.init) ?? configuration.defaultCacheControlMaxAgeForErrors
                let (urlText, now) = (self.urlText, context.now)
                try await context.blocking(urlText) {
                    let previous = disk.failure(for: urlText).flatMap { $0.expires > now ? $0 : nil }
                    // The count read back from disk may be anything: it saturates.
                    let attempts = Checked.saturatingAdd(previous?.attempts ?? 0, 1)
                    let record = FailureRecord(
                        url: urlText, status: status, message: error.description, attempts: attempts,
                        expires: previous?.expires ?? now.addingTimeInterval(window))
                    try? disk.store(record)
                }
            }
        }
        throw error
    }

    /// A file URL. Its cached product is valid while the file's size and modification
    /// time are unchanged (checked on every load); originals are kept in memory only,
    /// thumbnails on disk too.
    private func loadFile() async throws {
        let path = url.path
        let identity = try await context.blocking(urlText) { try FileIdentity.tag(of: path) }
        if options.cachePolicy != .reload, var cached = try await lookUp(), cached.response.value("ETag") == identity {
            let image = try await image(of: &cached)
            hit(cached)
            emit(.cached(loaded(image, cached.source, encoded: cached.encoded)))
            return
        }
        context.metrics.miss()
        let (image, bytes) = try await make(.file(path: path), original: nil)
        let now = context.now
        let response = StoredResponse(
            url: key.cache.storageName, status: 200, headers: [HeaderField("ETag", identity)], requestTime: now,
            responseTime: now)
        if case .thumbnail = product, let bytes, let disk = context.diskCache {
            try await context.blocking(urlText) { try? disk.store(response, body: bytes) }
        }
        let encoded = encodedProduct(bytes, image)
        context.remember(image, encoded: encoded, response: response, for: key.cache)
        emit(.completed(loaded(image, .localFile, encoded: encoded)))
    }
}

extension ImageLoadingError {
    /// Whether the bytes were at fault (not the network, not a cancellation).
    var isDecodingFailure: Bool {
        if case .decoding = reason { return true }
        return false
    }
}
