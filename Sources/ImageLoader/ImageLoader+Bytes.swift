import Crypto
import Foundation
import ImageLoaderSupport
import RasterImage

// Work on bytes the caller already has (an upload, a service's fetched source), on the
// loader's worker threads with its limits and accepted types.

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
        _ = try context.acceptedFormat(bytes, declaredContentType: declaredContentType, url: "bytes")
        let options = configuration.decodingOptions
        return try await onWorker("bytes", priority: priority) {
            try $0.decode(.bytes(bytes), options: options)
        } then: {
            $0
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
        let product = ImageProduct.thumbnail(options)
        let key = CacheKey(url: url, product: product)
        if memoryCache != nil, let entry = context.freshInMemory(key) {
            context.metrics.memoryHit()
            return LoadedImage(image: entry.image, source: .memory, url: url, encoded: entry.encoded)
        }
        _ = try context.acceptedFormat(bytes, declaredContentType: declaredContentType, url: url.absoluteString)
        let limits = configuration.decodingOptions.limits
        let (image, encoded) = try await onWorker(url.absoluteString, priority: priority, makesThumbnail: true) {
            try $0.thumbnail(.bytes(bytes), limits: limits, options: options)
        } then: { image in
            (image, LoadOperation.encoded(image, options))
        }
        if memoryCache != nil { context.remember(image, encoded: encoded, response: nil, for: key) }
        return LoadedImage(image: image, source: LoadedImage.Source.bytes, url: url, encoded: encoded)
    }

    /// `body` on the loader's worker threads (its decoding threads, with their niceness
    /// and share of cores), once `bytes` are found to be of an accepted type: for callers
    /// that decode and process bytes their own way, such as the image service's general
    /// path. A decoder's error is the loader's `.decoding`, as for its own decodes; any
    /// other error `body` throws (the caller's own) comes out as it was thrown.
    package func processing<T: Sendable>(
        _ bytes: [UInt8], declaredContentType: String?, priority: LoadPriority = .normal,
        _ body: @escaping @Sendable (any ImageDecoding) throws -> T
    ) async throws -> T {
        _ = try context.acceptedFormat(bytes, declaredContentType: declaredContentType, url: "bytes")
        // The caller's errors cross the worker and the loader's error mapping untouched.
        let outcome = try await onWorker("bytes", priority: priority, makesThumbnail: true) {
            decoder -> Result<T, any Error> in
            do {
                return .success(try body(decoder))
            } catch let error as ImageDecodingError {
                throw error
            } catch {
                return .failure(error)
            }
        } then: {
            $0
        }
        return try outcome.get()
    }

    /// `body` on a worker (``PipelineContext/decoding(_:priority:makesThumbnail:_:then:)``)
    /// as one of the loader's counted operations (``shutdown()`` waits for it), its
    /// errors mapped as the loader's own.
    private func onWorker<T, U: Sendable>(
        _ label: String, priority: LoadPriority, makesThumbnail: Bool = false,
        _ body: @escaping @Sendable (any ImageDecoding) throws -> T,
        then finish: @escaping @Sendable (T) throws -> U
    ) async throws(ImageLoadingError) -> U {
        let context = self.context
        return try await context.operations.run(label) { () async throws(ImageLoadingError) -> U in
            try await mappingErrors(label) {
                try await context.decoding(
                    label, priority: PriorityHandle(priority), makesThumbnail: makesThumbnail, body, then: finish)
            }
        }
    }

    /// The hex SHA-256 of `bytes`, read in place when they are contiguous.
    package static func digest(of bytes: some Collection<UInt8>) -> String {
        let digest =
            bytes.withContiguousStorageIfAvailable { SHA256.hash(data: UnsafeRawBufferPointer($0)) }
            ?? SHA256.hash(data: Array(bytes))
        return Hex.lowercase(digest)
    }
}
