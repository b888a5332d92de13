import Foundation
import ImageLoaderSupport
import Logging
import RasterImage

/// One product's load: memory, then disk, then the origin, following RFC 9111 for a
/// private cache, and remembering failures. The request goes through
/// the download stage and the decode through the decode stage, shared with the other
/// products of the same URL in flight.
struct LoadOperation: CachedProductMaking {
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

    /// A product as a load hands it out: the image, and a thumbnail's encoded bytes.
    struct Made: Sendable {
        let image: RasterImage
        let encoded: EncodedImage?
    }

    private typealias Flow = HTTPCacheFlow<LoadOperation>

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
            emit(.failed(ImageLoadingError(mapping: error, url: urlText)))
        }
    }

    private func perform() async throws {
        if url.isFileURL { return try await loadFile() }
        guard context.isFetchable(url) else {
            throw ImageLoadingError(.unsupportedURL, url: urlText)
        }
        let emit = self.emit
        var flow = Flow(
            url: url, storageName: key.cache.storageName, cachePolicy: options.cachePolicy,
            requestHeaders: requestHeaders, product: product, priority: priority, context: context, maker: self)
        flow.sendingRequest = { emit(.sendingRequest(hadCache: $0)) }
        flow.progress = { emit(.progress(received: $0, expected: $1)) }
        let found: Flow.Outcome?
        do {
            found = try await flow.run(memory: memoryEntry(), showsStale: true, keepRunning: keepRunning) {
                made, entry, freshness in
                emit(.cached(loaded(made, entry.source, freshness)))
            }
        } catch let error as ImageLoadingError {
            guard case .rememberedFailure = error.reason else { throw error }
            emit(.failed(error))
            return
        }
        guard let outcome = found else { return }
        switch outcome {
        case .revalidated(let made, let updated):
            context.remember(made.image, encoded: made.encoded, response: updated, for: key.cache)
            emit(.completed(loaded(made, .networkNotModified)))
        case .downloaded(let made, let stored, let storable, let source):
            if storable {
                context.remember(made.image, encoded: made.encoded, response: stored, for: key.cache)
            } else {
                context.memoryCache?.remove(key.cache)
            }
            emit(.completed(loaded(made, source)))
        case .staleIfError(let made, let entry, let error):
            emit(.cached(loaded(made, entry.source, .staleIfError)))
            emit(.failed(error))
        }
    }

    /// The product in memory, when it answers this request.
    private func memoryEntry() -> CachedEntry<Made>? {
        guard let entry = context.memoryCache?.entry(for: key.cache), let response = entry.response,
            // Entries in memory were stored with this loader's own header fields: Vary
            // matches unless this load adds its own.
            options.headers.isEmpty || policy.matchesVary(response, requestHeaders: requestHeaders)
        else { return nil }
        return CachedEntry(
            response: response, body: nil, product: Made(image: entry.image, encoded: entry.encoded), fromMemory: true)
    }

    /// A stored body decoded (and kept in memory).
    func product(ofStored body: [UInt8], response: StoredResponse) async throws -> Made {
        // A thumbnail's stored bytes are the encoded thumbnail: decoding them is all it takes.
        let options = configuration.decodingOptions
        let image = try await context.decoding(urlText, priority: priority) {
            try $0.decode(.bytes(body), options: options)
        }
        let made = Made(image: image, encoded: encodedProduct(body, image))
        context.remember(image, encoded: made.encoded, response: response, for: key.cache)
        return made
    }

    /// A 200 of an accepted type, made into the product.
    func product(ofDownload download: Downloads.Outcome) async throws -> (
        Made, [UInt8]?
    ) {
        let response = download.value
        _ = try context.acceptedFormat(response.body, declaredContentType: response.value("Content-Type"), url: urlText)
        let (image, bytes) = try await make(from: download)
        return (Made(image: image, encoded: encodedProduct(bytes, image)), bytes)
    }

    private func loaded(_ made: Made, _ source: LoadedImage.Source, _ freshness: LoadedImage.Freshness = .fresh)
        -> LoadedImage
    {
        loaded(made.image, source, freshness, encoded: made.encoded)
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
    private func make(from download: Downloads.Outcome) async throws -> (
        RasterImage, [UInt8]?
    ) {
        let body = download.value.body
        guard download.products.count > 1 else { return try await make(.bytes(body), original: body) }
        let plan = DecodePlan(products: download.products)
        let (decodingOptions, metrics, context, urlText) = (
            configuration.decodingOptions, context.metrics, context, urlText
        )
        let reduced: ReducedImage
        do {
            reduced = try await context.decodes.value(
                for: DecodeKey(download: download.run, plan: plan), product: product, priority: priority
            ) { run in
                try await context.decoding(urlText, priority: run.priority) { decoder in
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
        switch product {
        case .original:
            let options = configuration.decodingOptions
            let image = try await context.decoding(urlText, priority: priority) { decoder in
                try decoder.decode(source, options: options)
            }
            return (image, original)
        case .thumbnail(let options):
            // The decoder shrinks while loading when it can (the protocol's default
            // decodes, then resizes); the encode follows on the same worker.
            let limits = configuration.decodingOptions.limits
            return try await context.decoding(urlText, priority: priority, makesThumbnail: true) { decoder in
                try decoder.thumbnail(source, limits: limits, options: options)
            } then: { image in
                (image, LoadOperation.encoded(image, options)?.bytes)
            }
        }
    }

    /// A thumbnail encoded in its output format; `nil` for an animated one, which has
    /// no single encoding (it stays in memory only).
    static func encoded(_ image: RasterImage, _ options: ThumbnailOptions) -> EncodedImage? {
        options.frames == .first ? try? image.encoded(as: options.outputFormat) : nil
    }

    /// The product stored for a file whose identity (size and modification time) is
    /// still `identity`: from memory, or decoded from the disk's thumbnail.
    private func storedFileProduct(identity: String) async throws -> (made: Made, source: LoadedImage.Source)? {
        if let entry = memoryEntry(), entry.response.value("ETag") == identity, let made = entry.product {
            context.metrics.memoryHit()
            return (made, .memory)
        }
        guard let disk = context.diskCache else { return nil }
        let name = key.cache.storageName
        guard let (response, body) = try await context.blocking(urlText, { disk.response(for: name) }),
            response.value("ETag") == identity
        else { return nil }
        do {
            let made = try await product(ofStored: body, response: response)
            context.metrics.diskHit()
            return (made, .disk)
        } catch let error as ImageLoadingError where error.isStoredBytesFailure {
            // A stored thumbnail that no longer decodes: made again from the file.
            context.metrics.corruptEntry()
            try await context.blocking(urlText) { disk.remove(url: name) }
            return nil
        }
    }

    /// A file URL. Its cached product is valid while the file's size and modification
    /// time are unchanged (checked on every load); originals are kept in memory only,
    /// thumbnails on disk too.
    private func loadFile() async throws {
        let path = url.path
        let identity = try await context.blocking(urlText) { try FileIdentity.tag(of: path) }
        if options.cachePolicy != .reload, let cached = try await storedFileProduct(identity: identity) {
            return emit(.cached(loaded(cached.made, cached.source)))
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

/// What identifies a version of a file: its size and modification time.
enum FileIdentity {
    static func tag(of path: String) throws -> String {
        do {
            return "\"\(try FileSystem.checkedStatus(path).version)\""
        } catch {
            throw ImageDecodingError(.unreadable, message: error.description)
        }
    }
}
