import Foundation
import Logging
import RasterImage

#if canImport(Glibc)
import Glibc
#endif

/// What a load makes of the image it fetches.
enum LoadProduct: Sendable, Hashable {
    /// The image itself; its downloaded bytes are what the disk cache keeps.
    case original
    /// A thumbnail; the disk cache keeps it encoded, with the original's response, so it
    /// stays valid exactly as long as the original (a 304 keeps it, a new original replaces it).
    case thumbnail(ThumbnailOptions)

    /// Where the product is cached: the URL, or the URL and the thumbnail's options.
    func cacheKey(for url: URL) -> String {
        guard case .thumbnail(let options) = self else { return url.absoluteString }
        var key = url.absoluteString
        key.reserveCapacity(key.utf8.count + 96)
        key += "#thumbnail("
        key += options.cacheKey
        key += ")"
        return key
    }
}

/// One URL's load: memory, then disk, then the origin, following RFC 9111 for a
/// private cache, and remembering failures as the seeds do.
struct LoadOperation: Sendable {
    let url: URL
    let product: LoadProduct
    let options: LoadOptions
    let context: PipelineContext
    let emit: @Sendable (ImageLoadEvent) -> Void
    /// The shared task's priority: the highest of its callers, changing while it waits.
    let priority: PriorityHandle
    /// Asks the pipeline to let this work finish even when no caller waits any more.
    let keepRunning: @Sendable () async -> Void

    /// The URL as text: requests, errors and remembered failures go by it.
    private var key: String { url.absoluteString }
    /// Where the product is kept, in memory and on disk.
    private var cacheKey: String { product.cacheKey(for: url) }
    private var policy: HTTPCachePolicy { context.policy }
    private var configuration: ImageLoader.Configuration { context.configuration }

    /// A stored response, with its body once it has been read.
    private struct Cached {
        var response: StoredResponse
        var body: [UInt8]?
        var image: RasterImage?
        var fromMemory: Bool
    }

    func run() async {
        do {
            try await perform()
            context.recentFailures.clear(key)
        } catch let error as ImageLoadingError {
            if error.reason != .cancelled {
                context.logger.warning("load failed", metadata: ["url": "\(key)", "error": "\(error)"])
                context.recentFailures.record(error, for: key)
            }
            context.metrics.failure()
            emit(.failed(error))
        } catch {
            context.metrics.failure()
            emit(.failed(ImageLoadingError(.network(String(describing: error)), url: key)))
        }
    }

    private func perform() async throws {
        if url.isFileURL { return try await loadFile() }
        guard url.scheme == "http" || url.scheme == "https", url.host != nil else {
            throw ImageLoadingError(.unsupportedURL, url: key)
        }
        let cached = options.cachePolicy == .reload ? nil : try await lookUp()
        if options.cachePolicy != .reload, try await rememberedFailure() { return }
        if var cached {
            let evaluation = policy.evaluate(cached.response, now: context.now)
            let usable =
                switch options.cachePolicy {
                case .useCache: evaluation.isFresh
                case .revalidate: evaluation.isImmutable
                case .reload: false
                }
            if usable {
                let image = try await image(of: &cached)
                if cached.fromMemory { context.metrics.memoryHit() } else { context.metrics.diskHit() }
                emit(
                    .cached(
                        loaded(image, cached.fromMemory ? .memory : .disk, encoded: encodedProduct(cached.body, image)))
                )
                return
            }
            if options.cachePolicy == .useCache && evaluation.mayServeWhileRevalidating {
                let image = try await image(of: &cached)
                if cached.fromMemory { context.metrics.memoryHit() } else { context.metrics.diskHit() }
                emit(
                    .cached(
                        LoadedImage(image: image, source: cached.fromMemory ? .memory : .disk, url: url, isStale: true))
                )
                // The caller has its image; the revalidation goes on without it.
                await keepRunning()
                return try await fetch(revalidating: cached)
            }
            context.logMiss(key, "cache miss: stale (age \(evaluation.age.rounded(.down)) s)")
        } else {
            context.logMiss(key, "cache miss")
        }
        context.metrics.miss()
        try await fetch(revalidating: cached)
    }

    /// The stored response for this URL (memory first, then disk), if it answers this request.
    private func lookUp() async throws -> Cached? {
        // Entries in memory were stored with this loader's own request headers: Vary matches.
        if let entry = context.memoryCache?.entry(for: cacheKey), let response = entry.response {
            return Cached(response: response, body: nil, image: entry.image, fromMemory: true)
        }
        guard let disk = context.diskCache else { return nil }
        let cacheKey = self.cacheKey
        guard let (response, body) = try await context.blocking(key, { disk.response(for: cacheKey) }) else {
            return nil
        }
        guard policy.matchesVary(response, requestHeaders: context.requestHeaders) else { return nil }
        return Cached(response: response, body: body, image: nil, fromMemory: false)
    }

    /// The decoded image of a cached response, decoding (and keeping in memory) if needed.
    private func image(of cached: inout Cached) async throws -> RasterImage {
        if let image = cached.image { return image }
        var body = cached.body
        if body == nil, let disk = context.diskCache {
            let cacheKey = self.cacheKey
            body = try await context.blocking(key) { disk.response(for: cacheKey)?.body }
        }
        guard let body else { throw ImageLoadingError(.decoding(ImageDecodingError(.empty)), url: key) }
        // A thumbnail's stored bytes are the encoded thumbnail: decoding them is all it takes.
        let image = try await context.decode(body, url: key, priority: priority)
        cached.image = image
        context.remember(image, response: cached.response, for: cacheKey)
        return image
    }

    /// A failure remembered recently enough and often enough: fail without a request.
    private func rememberedFailure() async throws -> Bool {
        guard let disk = context.diskCache, disk.hasFailure(for: key) else { return false }
        let key = self.key
        guard let failure = try await context.blocking(key, { disk.failure(for: key) }) else { return false }
        guard failure.expires > context.now, failure.attempts >= configuration.maxAttemptsForErrors else {
            return false
        }
        context.logger.debug("remembered failure", metadata: ["url": "\(key)", "attempts": "\(failure.attempts)"])
        emit(
            .failed(ImageLoadingError(.rememberedFailure(status: failure.status, attempts: failure.attempts), url: key))
        )
        return true
    }

    /// Asks the origin: conditionally when something is cached.
    private func fetch(revalidating cached: Cached?) async throws {
        emit(.sendingRequest(hadCache: cached != nil))
        var headers = context.requestHeaders
        if let cached { headers += policy.conditionalHeaders(for: cached.response) }
        let response: DataResponse
        do {
            let (emit, loader, request, metrics) = (
                self.emit, context.dataLoader, DataRequest(url: url, headers: headers), context.metrics
            )
            response = try await context.network.run(priority: priority) {
                try Task.checkCancellation()
                metrics.request()
                return try await loader.load(request) { received, expected in
                    emit(.progress(received: received, expected: expected))
                }
            }
            metrics.received(response.body.count)
        } catch is CancellationError {
            throw ImageLoadingError(.cancelled, url: key)
        } catch let error as ImageLoadingError {
            if error.reason == .cancelled || error.reason == .shutDown { throw error }
            return try await failed(error, response: nil, cached: cached)
        }
        // Nobody waits any more, and nobody asked for the cache to be filled: stop here.
        if Task.isCancelled { throw ImageLoadingError(.cancelled, url: key) }
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
                let (key, cacheKey) = (self.key, self.cacheKey)
                try await context.blocking(key) {
                    if policy.isStorable(updated) { try? disk.update(updated) } else { disk.remove(url: cacheKey) }
                    disk.removeFailure(for: key)
                }
            }
            context.remember(image, response: updated, for: cacheKey)
            emit(.completed(LoadedImage(image: image, source: .networkNotModified, url: url)))
            return
        }
        guard response.status == 200 else {
            let error = ImageLoadingError(.httpStatus(response.status), url: key)
            return try await failed(error, response: response, cached: cached)
        }
        try await accept(response, requestHeaders: headers)
    }

    /// A 200: checks the type, decodes, and stores when the response allows it.
    private func accept(_ response: DataResponse, requestHeaders: [HeaderField]) async throws {
        do {
            _ = try configuration.acceptedContentTypes.validate(
                response.body.prefix(64), declaredContentType: response.value("Content-Type"))
        } catch {
            throw ImageLoadingError(.contentType(error), url: key)
        }
        let (image, bytes) = try await make(.bytes(response.body), original: response.body)
        var stored = StoredResponse(
            url: cacheKey, status: response.status, headers: response.headers, requestTime: response.requestTime,
            responseTime: response.responseTime)
        stored.varyingRequestHeaders = policy.varyingRequestHeaders(for: stored, requestHeaders: requestHeaders)
        let storable = policy.isStorable(stored)
        var source = LoadedImage.Source.network
        if let disk = context.diskCache {
            let (key, cacheKey, entry) = (self.key, self.cacheKey, stored)
            source = try await context.blocking(key) { () -> LoadedImage.Source in
                disk.removeFailure(for: key)
                guard storable, let bytes else {
                    disk.remove(url: cacheKey)
                    return .network
                }
                do {
                    try disk.store(entry, body: bytes)
                    return .networkToDisk
                } catch {
                    // A full or read-only disk: the image is still served, from memory next time.
                    context.logger.warning(
                        "disk cache write failed", metadata: ["url": "\(key)", "error": "\(error)"])
                    return .network
                }
            }
        }
        if storable {
            context.remember(image, response: stored, for: cacheKey)
        } else {
            context.memoryCache?.remove(cacheKey)
        }
        emit(.completed(loaded(image, source, encoded: encodedProduct(bytes, image))))
    }

    private func loaded(_ image: RasterImage, _ source: LoadedImage.Source, encoded: EncodedImage? = nil) -> LoadedImage
    {
        LoadedImage(image: image, source: source, url: url, encoded: encoded)
    }

    /// A thumbnail's encoded bytes, when at hand; `nil` for originals.
    private func encodedProduct(_ bytes: [UInt8]?, _ image: RasterImage) -> EncodedImage? {
        guard case .thumbnail = product, let bytes, let format = ImageFormat.sniff(bytes) else { return nil }
        return EncodedImage(bytes: bytes, format: format, width: image.width, height: image.height)
    }

    /// The product made from the source, and the bytes the disk cache keeps for it: the
    /// original's own bytes, or the thumbnail encoded (`nil` when it cannot be: an
    /// animated thumbnail stays in memory only).
    private func make(_ source: ImageSource, original: [UInt8]?) async throws -> (RasterImage, [UInt8]?) {
        let (decoder, decodingOptions, metrics) = (
            configuration.decoder, configuration.decodingOptions, context.metrics
        )
        switch product {
        case .original:
            let image = try await context.cpu(key, priority: priority) {
                let start = ContinuousClock.now
                let image = try decoder.decode(source, options: decodingOptions)
                metrics.decoded(in: ContinuousClock.now - start)
                return image
            }
            return (image, original)
        case .thumbnail(var options):
            options.limits = decodingOptions.limits
            let thumbnailOptions = options
            return try await context.cpu(key, priority: priority) {
                let start = ContinuousClock.now
                // The library's decoder shrinks while loading; another decoder decodes, then resizes.
                let image =
                    try (decoder as? ImageDecoder)?.thumbnail(source, options: thumbnailOptions)
                    ?? decoder.decode(source, options: decodingOptions).thumbnail(options: thumbnailOptions)
                metrics.decoded(in: ContinuousClock.now - start)
                metrics.thumbnailMade()
                let encoded =
                    thumbnailOptions.frames == .first
                    ? try? image.encoded(as: thumbnailOptions.outputFormat).bytes : nil
                return (image, encoded)
            }
        }
    }

    /// The origin failed. Within stale-if-error a cached image is served; error
    /// responses are remembered (unless no-store); then the error is reported.
    private func failed(_ error: ImageLoadingError, response: DataResponse?, cached: Cached?) async throws {
        let status = response?.status
        let serverFailure = status.map { [500, 502, 503, 504].contains($0) } ?? true
        if var cached, serverFailure, options.cachePolicy != .reload,
            policy.evaluate(cached.response, now: context.now).mayServeOnError
        {
            let image = try await image(of: &cached)
            emit(
                .cached(LoadedImage(image: image, source: cached.fromMemory ? .memory : .disk, url: url, isStale: true))
            )
            emit(.failed(error))
            return
        }
        if let response, let status, status >= 400, let disk = context.diskCache {
            let control = CacheControl(
                headerValues: response.headers.values(named: "Cache-Control"))
            if !control.noStore {
                let window = control.maxAge.map(TimeInterval.init) ?? configuration.defaultCacheControlMaxAgeForErrors
                let (key, now) = (self.key, context.now)
                try await context.blocking(key) {
                    let previous = disk.failure(for: key).flatMap { $0.expires > now ? $0 : nil }
                    // The count read back from disk may be anything: it saturates.
                    let attempts = Checked.saturatingAdd(previous?.attempts ?? 0, 1)
                    let record = FailureRecord(
                        url: key, status: status, message: error.description, attempts: attempts,
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
        let identity = try await context.blocking(key) { try FileIdentity.tag(of: path) }
        if options.cachePolicy != .reload, var cached = try await lookUp(), cached.response.value("ETag") == identity {
            let image = try await image(of: &cached)
            if cached.fromMemory { context.metrics.memoryHit() } else { context.metrics.diskHit() }
            emit(
                .cached(loaded(image, cached.fromMemory ? .memory : .disk, encoded: encodedProduct(cached.body, image)))
            )
            return
        }
        context.metrics.miss()
        let (image, bytes) = try await make(.file(path: path), original: nil)
        let now = context.now
        let response = StoredResponse(
            url: cacheKey, status: 200, headers: [HeaderField("ETag", identity)], requestTime: now, responseTime: now)
        if case .thumbnail = product, let bytes, let disk = context.diskCache {
            try await context.blocking(key) { try? disk.store(response, body: bytes) }
        }
        context.remember(image, response: response, for: cacheKey)
        emit(.completed(loaded(image, .localFile, encoded: encodedProduct(bytes, image))))
    }
}

/// What identifies a version of a file: its size and modification time.
enum FileIdentity {
    static func tag(of path: String) throws -> String {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw ImageDecodingError(.unreadable, message: "\(path): \(String(cString: strerror(errno)))")
        }
        return "\"\(info.st_size)-\(info.st_mtim.tv_sec)-\(info.st_mtim.tv_nsec)\""
    }
}
