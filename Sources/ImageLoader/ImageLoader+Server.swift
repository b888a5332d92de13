import Crypto
import Foundation
import RasterImage

/// An original's bytes as the origin (or the disk cache) gave them, with the HTTP
/// metadata a service or a proxy passes on.
public struct LoadedData: Sendable {
    public let bytes: [UInt8]
    /// The format the bytes are, from their signature (checked against the accepted types).
    public let format: ImageFormat
    /// The stored response's header fields (Content-Type, ETag, Last-Modified, Cache-Control...).
    public let headers: [HeaderField]
    public let source: LoadedImage.Source
    public let url: URL
    /// Seconds the origin's response stays fresh from now, when it states a lifetime
    /// (`max-age` or `Expires`; 0 for `no-cache`, `no-store` or an expired one); `nil`
    /// when it states none. What a service passes on in its own `Cache-Control`.
    public let freshFor: TimeInterval?

    /// The first value of a header field, by name, any case.
    public func value(_ name: String) -> String? { headers.first(named: name) }
}

extension ImageLoader {
    /// Decodes bytes the caller already has (an upload), on the loader's worker threads,
    /// with its decoding limits and accepted types. `declaredContentType` (the upload's
    /// Content-Type) must then agree with the bytes.
    ///
    /// ```swift
    /// // In a Hummingbird handler:
    /// let body = try await request.body.collect(upTo: 20 << 20)
    /// let image = try await loader.decode(body.readableBytesView, declaredContentType: request.headers[.contentType])
    /// ```
    public func decode(
        _ bytes: some Collection<UInt8> & Sendable, declaredContentType: String? = nil,
        priority: LoadPriority = .normal
    ) async throws(ImageLoadingError) -> RasterImage {
        let label = "bytes"
        _ = try context.acceptedFormat(bytes, declaredContentType: declaredContentType, url: label)
        let (decoder, options, metrics) = (configuration.decoder, configuration.decodingOptions, context.metrics)
        return try await mappingErrors(label) {
            try await context.cpu(label, priority: PriorityHandle(priority)) {
                try metrics.timingDecode { try decoder.decode(.bytes(bytes), options: options) }
            }
        }
    }

    /// A thumbnail of bytes the caller already has, on the loader's worker threads, with
    /// its limits and accepted types, kept in the memory cache (with its encoded bytes)
    /// under the bytes' SHA-256 and the options: the same upload asked for again is a
    /// memory hit. ``LoadedImage/encoded`` holds the thumbnail in `options.outputFormat`
    /// (`nil` for an animated one, `frames` other than `.first`).
    ///
    /// ```swift
    /// let thumb = try await loader.thumbnail(of: body.readableBytesView, options: ThumbnailOptions(maxPixelSize: 256))
    /// return Response(status: .ok, body: .init(byteBuffer: ByteBuffer(bytes: thumb.encoded!.bytes)))
    /// ```
    public func thumbnail(
        of bytes: some Collection<UInt8> & Sendable, options: ThumbnailOptions, declaredContentType: String? = nil,
        priority: LoadPriority = .normal
    ) async throws(ImageLoadingError) -> LoadedImage {
        // Without a memory cache there is nothing to look up: the bytes are not hashed.
        let name = memoryCache == nil ? "bytes:" : "sha256:" + ImageLoader.digest(of: bytes)
        let url = URL(string: name) ?? URL(fileURLWithPath: "/")
        let product = ImageProduct.thumbnail(options).normalized(limits: configuration.decodingOptions.limits)
        let key = CacheKey(url: url, product: product)
        if memoryCache != nil, let entry = context.freshInMemory(key.storageName) {
            context.metrics.memoryHit()
            return LoadedImage(image: entry.image, source: .memory, url: url, encoded: entry.encoded)
        }
        _ = try context.acceptedFormat(bytes, declaredContentType: declaredContentType, url: url.absoluteString)
        let made = product.thumbnailOptions ?? options
        let (decoder, metrics, context) = (configuration.decoder, context.metrics, context)
        let (image, encoded) = try await mappingErrors(url.absoluteString) {
            try await context.cpu(url.absoluteString, priority: PriorityHandle(priority)) {
                let image = try metrics.timingDecode { try decoder.thumbnail(.bytes(bytes), options: made) }
                metrics.thumbnailMade()
                return (image, LoadOperation.encoded(image, made))
            }
        }
        if memoryCache != nil { context.remember(image, encoded: encoded, response: nil, for: key) }
        return LoadedImage(image: image, source: LoadedImage.Source.bytes, url: url, encoded: encoded)
    }

    /// The original's bytes at `url` with their HTTP metadata, through the disk cache
    /// and its rules (a fresh entry is served from disk; a stale one is revalidated;
    /// a new response is stored when it may be), sharing a request in flight with image
    /// loads of the same URL. The bytes must be of an accepted type; they are not decoded.
    ///
    /// ```swift
    /// let original = try await loader.data(for: url)
    /// response.headers[.contentType] = original.format.contentType
    /// ```
    public func data(for url: URL, options: LoadOptions = LoadOptions()) async throws(ImageLoadingError) -> LoadedData {
        let url = url.droppingFragment
        let operation = DataOperation(url: url, options: options, context: context)
        guard let deadline = options.deadline else { return try await mappingErrors(url.absoluteString, operation.run) }
        return try await mappingErrors(url.absoluteString) {
            guard let data = try await untilDeadline(deadline, operation.run) else {
                throw ImageLoadingError(.timeout, url: url.absoluteString)
            }
            return data
        }
    }

    /// The hex SHA-256 of `bytes`, read in place when they are contiguous.
    package static func digest(of bytes: some Collection<UInt8>) -> String {
        let digest =
            bytes.withContiguousStorageIfAvailable { SHA256.hash(data: UnsafeRawBufferPointer($0)) }
            ?? SHA256.hash(data: Array(bytes))
        return digest.map { String(format: "%02x", $0) }.joined()
    }
}

/// `body`'s value, or `nil` once `deadline` passes, or what `stop` throws once it does;
/// `body` is then cancelled. A cancelled caller gets `CancellationError`.
package func untilDeadline<T: Sendable>(
    _ deadline: ContinuousClock.Instant, orUntil stop: (@Sendable () async throws -> Never)? = nil,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T? {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(until: deadline, clock: .continuous)
            return nil
        }
        if let stop { group.addTask { try await stop() } }
        // The first to end decides; the others are cancelled, and what they throw then is dropped.
        defer { group.cancelAll() }
        return try await group.next() ?? nil
    }
}

/// Turns whatever an async body throws into ``ImageLoadingError``.
func mappingErrors<T>(_ url: String, _ body: () async throws -> T) async throws(ImageLoadingError) -> T {
    do {
        return try await body()
    } catch let error as ImageLoadingError {
        throw error
    } catch let error as ImageDecodingError {
        throw ImageLoadingError(.decoding(error), url: url)
    } catch is CancellationError {
        throw ImageLoadingError(.cancelled, url: url)
    } catch {
        throw ImageLoadingError(.network(String(describing: error)), url: url)
    }
}

/// ``ImageLoader/data(for:options:)``: the original's entry on disk, revalidated or
/// fetched through the download stage when it cannot be used as it is.
struct DataOperation: Sendable {
    let url: URL
    let options: LoadOptions
    let context: PipelineContext

    private var urlText: String { url.absoluteString }
    private var policy: HTTPCachePolicy { context.policy }
    private var storageName: String { CacheKey(url: url, product: .original).storageName }

    func run() async throws -> LoadedData {
        guard url.scheme == "http" || url.scheme == "https", url.host != nil else {
            throw ImageLoadingError(.unsupportedURL, url: urlText)
        }
        let requestHeaders = context.requestHeaders + options.headers
        var cached: (response: StoredResponse, body: [UInt8])?
        if options.cachePolicy != .reload, let disk = context.diskCache {
            let name = storageName
            cached = try await context.blocking(urlText) { disk.response(for: name) }
            if let entry = cached, !policy.matchesVary(entry.response, requestHeaders: requestHeaders) { cached = nil }
        }
        if let cached {
            let evaluation = policy.evaluate(cached.response, now: context.now)
            let usable = options.cachePolicy == .useCache ? evaluation.isFresh : evaluation.isImmutable
            if usable {
                context.metrics.diskHit()
                return try loaded(cached.body, cached.response, .disk)
            }
        }
        context.metrics.miss()
        var headers = requestHeaders
        if let cached { headers += policy.conditionalHeaders(for: cached.response) }
        let response = try await context.download(
            DataRequest(url: url, headers: headers), product: nil, priority: PriorityHandle(options.priority)
        ) { _, _ in }.value
        let disk = context.diskCache
        if response.status == 304, let cached, policy.notModified(response.headers, matches: cached.response) {
            let updated = policy.updating(
                cached.response, with: response.headers, requestTime: response.requestTime,
                responseTime: response.responseTime)
            context.metrics.notModified()
            if let disk { try await context.blocking(urlText) { try? disk.update(updated) } }
            return try loaded(cached.body, updated, .networkNotModified)
        }
        guard response.status == 200 else { throw ImageLoadingError(.httpStatus(response.status), url: urlText) }
        let format = try context.acceptedFormat(
            response.body, declaredContentType: response.value("Content-Type"), url: urlText)
        var stored = StoredResponse(
            url: storageName, status: 200, headers: response.headers, requestTime: response.requestTime,
            responseTime: response.responseTime)
        stored.varyingRequestHeaders = policy.varyingRequestHeaders(for: stored, requestHeaders: headers)
        var source = LoadedImage.Source.network
        if let disk, policy.isStorable(stored) {
            let (entry, body) = (stored, response.body)
            source =
                try await context.blocking(urlText) { (try? disk.store(entry, body: body)) != nil }
                ? .networkToDisk : .network
        }
        return LoadedData(
            bytes: response.body, format: format, headers: response.headers, source: source, url: url,
            freshFor: freshFor(stored))
    }

    private func loaded(_ bytes: [UInt8], _ response: StoredResponse, _ source: LoadedImage.Source) throws
        -> LoadedData
    {
        let format = try context.acceptedFormat(
            bytes, declaredContentType: response.value("Content-Type"), url: urlText)
        return LoadedData(
            bytes: bytes, format: format, headers: response.headers, source: source, url: url,
            freshFor: freshFor(response))
    }

    /// The explicit freshness left: the lifetime `max-age` or `Expires` states, less the
    /// response's current age; `nil` when neither is there (a heuristic is not passed on).
    private func freshFor(_ response: StoredResponse) -> TimeInterval? {
        let control = response.cacheControl
        if control.noCache || control.noStore { return 0 }
        guard control.maxAge != nil || response.value("Expires") != nil else { return nil }
        let evaluation = policy.evaluate(response, now: context.now)
        return max(0, evaluation.lifetime - evaluation.age)
    }
}
