import ImageLoaderSupport
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
    /// `.fresh`, or how HTTP's rules let stale bytes be used: while they are revalidated
    /// in the background (stale-while-revalidate), or because the origin failed
    /// (stale-if-error).
    public var freshness: LoadedImage.Freshness = .fresh

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
        let (decoder, options, metrics, context) = (
            configuration.decoder, configuration.decodingOptions, context.metrics, context
        )
        return try await context.operations.run(label) { () async throws(ImageLoadingError) -> RasterImage in
            try await mappingErrors(label) {
                try await context.cpu(label, priority: PriorityHandle(priority)) {
                    try metrics.timingDecode { try decoder.decode(.bytes(bytes), options: options) }
                }
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
        do {
            try options.validate()
        } catch {
            throw ImageLoadingError(.decoding(error), url: "bytes")
        }
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
        let label = url.absoluteString
        let (image, encoded) = try await context.operations.run(label) {
            () async throws(ImageLoadingError) -> (RasterImage, EncodedImage?) in
            try await mappingErrors(label) {
                try await context.cpu(label, priority: PriorityHandle(priority)) {
                    let image = try metrics.timingDecode { try decoder.thumbnail(.bytes(bytes), options: made) }
                    metrics.thumbnailMade()
                    return (image, LoadOperation.encoded(image, made))
                }
            }
        }
        if memoryCache != nil { context.remember(image, encoded: encoded, response: nil, for: key) }
        return LoadedImage(image: image, source: LoadedImage.Source.bytes, url: url, encoded: encoded)
    }

    /// `body` on the loader's worker threads (its decoding threads, with their niceness
    /// and share of cores), once `bytes` are found to be of an accepted type: for callers
    /// that decode and process bytes their own way, such as the image service's general
    /// path. Thrown errors are mapped as the loader's own (a decoder's error stays one).
    package func processing<T: Sendable>(
        _ bytes: [UInt8], declaredContentType: String?, priority: LoadPriority = .normal,
        _ body: @escaping @Sendable (any ImageDecoding) throws -> T
    ) async throws(ImageLoadingError) -> T {
        let label = "bytes"
        _ = try context.acceptedFormat(bytes, declaredContentType: declaredContentType, url: label)
        let (decoder, metrics, context) = (configuration.decoder, context.metrics, context)
        return try await context.operations.run(label) { () async throws(ImageLoadingError) -> T in
            try await mappingErrors(label) {
                try await context.cpu(label, priority: PriorityHandle(priority)) {
                    let value = try metrics.timingDecode { try body(decoder) }
                    metrics.thumbnailMade()
                    return value
                }
            }
        }
    }

    /// The original's bytes at `url` with their HTTP metadata, through the disk cache
    /// and the same HTTP caching rules as ``image(for:options:)`` (the same entry, too):
    /// a fresh entry is served from disk; a stale one is revalidated (and served at once
    /// within stale-while-revalidate, the revalidation going on in the background);
    /// when the origin fails, a stored entry within stale-if-error is served
    /// (``LoadedData/freshness`` says so); failures are remembered; a new response is
    /// stored when it may be, and replaces or removes the old entry. A request in
    /// flight for the same URL is shared with image loads. The bytes must be of an
    /// accepted type; they are not decoded.
    ///
    /// ```swift
    /// let original = try await loader.data(for: url)
    /// response.headers[.contentType] = original.format.contentType
    /// ```
    public func data(for url: URL, options: LoadOptions = LoadOptions()) async throws(ImageLoadingError) -> LoadedData {
        let url = url.droppingFragment
        let operation = DataOperation(url: url, options: options, context: context)
        return try await context.operations.run(url.absoluteString) {
            () async throws(ImageLoadingError) -> LoadedData in
            guard let deadline = options.deadline else {
                return try await mappingErrors(url.absoluteString, operation.run)
            }
            return try await mappingErrors(url.absoluteString) {
                guard let data = try await untilDeadline(deadline, operation.run) else {
                    throw ImageLoadingError(.timeout, url: url.absoluteString)
                }
                return data
            }
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
