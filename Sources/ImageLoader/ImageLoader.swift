import Foundation
import Logging
import RasterImage

/// Loads images over HTTP (and from files) through a memory cache and a disk cache
/// that follows HTTP's caching rules and survives restarts, decoding off the
/// caller's task before anything is cached. Concurrent loads of a URL share one
/// request and one decode.
///
/// ```swift
/// let loader = try ImageLoader()
/// let loaded = try await loader.image(for: URL(string: "https://example.com/cat.jpg")!)
/// print(loaded.image.width, loaded.source)        // 640 networkToDisk, then disk or memory
///
/// for await event in loader.events(for: url) {     // the three moments, as they happen
///     switch event {
///     case .cached(let cached): show(cached.image)
///     case .sendingRequest(let hadCache): spinner(on: !hadCache)
///     case .completed(let done): show(done.image)
///     case .failed(let error): report(error)
///     case .progress: break
///     }
/// }
/// try await loader.shutdown()
/// ```
public final class ImageLoader: Sendable {
    public let configuration: Configuration
    /// The disk cache, for clean-up and statistics; `nil` when the configuration has none.
    public let diskCache: DiskCache?
    /// The memory cache, for synchronous peeks and purges; `nil` when images are not
    /// kept in memory.
    public let memoryCache: MemoryCache?
    private let pipeline: ImagePipeline
    private let context: PipelineContext
    private let dataLoader: any DataLoading
    private let workers: WorkerPool
    private let isShutDown = Lock(false)

    /// Creates the loader: its disk cache (reading the index), its HTTP client and its
    /// worker threads. Call ``shutdown()`` when done.
    public init(configuration: Configuration = Configuration()) throws {
        self.configuration = configuration
        diskCache = try configuration.cacheDirectory.map {
            try DiskCache(directory: $0, maxBytes: configuration.diskCacheMaxBytes, clock: configuration.clock)
        }
        memoryCache =
            configuration.cacheImagesInMemory
            ? MemoryCache(configuration: configuration.memoryCache, clock: configuration.clock) : nil
        if let custom = configuration.dataLoader {
            dataLoader = custom
        } else {
            var http = HTTPDataLoader.Configuration()
            http.connectTimeout = configuration.connectTimeout
            http.readTimeout = configuration.readTimeout
            http.timeout = configuration.timeout
            http.maxResponseBytes = configuration.maxResponseBytes
            http.maxRedirects = configuration.maxRedirects
            http.credentials = configuration.credentials
            http.trustAnySSLCertificate = configuration.trustAnySSLCertificate
            http.clock = configuration.clock
            dataLoader = HTTPDataLoader(configuration: http, logger: configuration.logger)
        }
        workers = WorkerPool(threads: configuration.decodingThreads)
        context = PipelineContext(
            configuration: configuration, diskCache: diskCache, memoryCache: memoryCache, dataLoader: dataLoader,
            workers: workers)
        pipeline = ImagePipeline(context: context)
    }

    /// The events of loading `url`, as they happen (see ``ImageLoadEvent`` for which
    /// arrive when). Stop iterating at any time; the load is cancelled when no caller
    /// waits for it any more, except a background revalidation, a prefetch, or a load
    /// asked to finish (``LoadOptions/finishesWhenCancelled``).
    public func events(for url: URL, options: LoadOptions = LoadOptions()) -> AsyncStream<ImageLoadEvent> {
        stream(url, product: .original, options: options)
    }

    /// The image at `url` and where it came from: the first image the load yields
    /// (a cached one, even stale under stale-while-revalidate or stale-if-error, or
    /// the downloaded one). Throws ``ImageLoadingError`` when there is none, or when
    /// the caller's task is cancelled (at once: the wait ends, the shared work goes on
    /// only if another caller waits).
    ///
    /// A fresh image in memory is returned without any task or actor hop.
    ///
    /// ```swift
    /// let loaded = try await loader.image(for: url)
    /// ```
    public func image(for url: URL, options: LoadOptions = LoadOptions()) async throws(ImageLoadingError) -> LoadedImage
    {
        try await first(url, product: .original, options: options)
    }

    /// The events of making a thumbnail of `url` through the caches, as ``events(for:options:)``.
    public func thumbnailEvents(
        for url: URL, options: ThumbnailOptions, loadOptions: LoadOptions = LoadOptions()
    ) -> AsyncStream<ImageLoadEvent> {
        stream(url, product: .thumbnail(options), options: loadOptions)
    }

    /// A thumbnail of `url`, cached in memory and on disk (encoded in
    /// `options.outputFormat`) under the URL and the options. It stays valid exactly as
    /// long as the original: when stale it is revalidated with the original's
    /// validators; a 304 keeps it, a changed original replaces it. The original's bytes
    /// are not kept. Concurrent requests for the same URL and options share one
    /// download and one resample. File URLs are revalidated by size and date.
    ///
    /// ```swift
    /// let thumb = try await loader.thumbnail(for: url, options: ThumbnailOptions(maxPixelSize: 256))
    /// print(thumb.source)       // networkToDisk, then memory; disk after a restart
    /// ```
    public func thumbnail(
        for url: URL, options: ThumbnailOptions, loadOptions: LoadOptions = LoadOptions()
    ) async throws(ImageLoadingError) -> LoadedImage {
        try await first(url, product: .thumbnail(options), options: loadOptions)
    }

    private func stream(_ url: URL, product: LoadProduct, options: LoadOptions) -> AsyncStream<ImageLoadEvent> {
        let url = url.droppingFragment
        let cacheKey = product.cacheKey(for: url)
        if options.cachePolicy == .useCache, let image = context.freshInMemory(cacheKey) {
            context.metrics.memoryHit()
            return AsyncStream { continuation in
                continuation.yield(.cached(LoadedImage(image: image, source: .memory, url: url)))
                continuation.finish()
            }
        }
        let (pipeline, context) = (self.pipeline, self.context)
        let key = options.cachePolicy.rawValue + " " + cacheKey
        return AsyncStream { continuation in
            let id = UUID()
            continuation.onTermination = { _ in
                Task { await pipeline.detach(id, key: key) }
            }
            Task {
                await pipeline.attach(
                    id, key: key, priority: options.priority, finishesWhenCancelled: options.finishesWhenCancelled,
                    continuation: continuation
                ) { emit, priority, keepRunning in
                    await LoadOperation(
                        url: url, product: product, options: options, context: context, emit: emit, priority: priority,
                        keepRunning: keepRunning
                    ).run()
                }
            }
        }
    }

    private func first(_ url: URL, product: LoadProduct, options: LoadOptions) async throws(ImageLoadingError)
        -> LoadedImage
    {
        let url = url.droppingFragment
        if options.cachePolicy == .useCache, let image = context.freshInMemory(product.cacheKey(for: url)) {
            context.metrics.memoryHit()
            return LoadedImage(image: image, source: .memory, url: url)
        }
        var failure: ImageLoadingError?
        for await event in stream(url, product: product, options: options) {
            if let image = event.image { return image }
            if case .failed(let error) = event { failure = error }
        }
        if Task.isCancelled { throw ImageLoadingError(.cancelled, url: url.absoluteString) }
        throw failure ?? ImageLoadingError(.cancelled, url: url.absoluteString)
    }

    /// The image in the memory cache for `url`, if there is one, without waiting:
    /// for code that cannot await. Its freshness is not checked.
    public func peek(_ url: URL) -> RasterImage? {
        memoryCache?.peek(url.droppingFragment.absoluteString)
    }

    /// Whether the last load of `url` failed (and has not succeeded since), without
    /// waiting: a reused list cell can show a placeholder instead of retrying.
    public func failedToFetch(_ url: URL) -> Bool {
        context.recentFailures.failure(for: url.droppingFragment.absoluteString) != nil
    }

    /// Loads `urls` at the lowest priority, with no caller, to fill the caches.
    public func prefetch(_ urls: [URL]) async {
        for url in urls.map(\.droppingFragment) {
            if context.freshInMemory(url.absoluteString) != nil { continue }
            let context = self.context
            let options = LoadOptions(priority: .veryLow)
            await pipeline.prefetch(key: options.cachePolicy.rawValue + " " + url.absoluteString) {
                emit, priority, keepRunning in
                await LoadOperation(
                    url: url, product: .original, options: options, context: context, emit: emit,
                    priority: priority, keepRunning: keepRunning
                ).run()
            }
        }
    }

    /// Cancels the prefetches of `urls` that no caller has joined.
    public func cancelPrefetching(_ urls: [URL]) async {
        for url in urls.map(\.droppingFragment) {
            await pipeline.cancelPrefetch(key: LoadOptions.CachePolicy.useCache.rawValue + " " + url.absoluteString)
        }
    }

    /// Changes the priority of a load under way (say, a row scrolled back into view).
    /// A load still waiting for a slot is picked by its new priority.
    public func setPriority(_ priority: LoadPriority, for url: URL, cachePolicy: LoadOptions.CachePolicy = .useCache)
        async
    {
        await pipeline.setPriority(priority, key: cachePolicy.rawValue + " " + url.droppingFragment.absoluteString)
    }

    /// What the loader has done so far: hits, misses, requests, bytes, decodes.
    public var statistics: LoaderStatistics { context.metrics.snapshot }

    /// Waits until every load in flight has finished, background revalidations included.
    public func waitForBackgroundWork() async {
        for task in await pipeline.runningTasks { await task.value }
    }

    /// Finishes the loads in flight, then releases the HTTP client and the worker
    /// threads and saves the disk cache's index. The loader cannot be used afterwards;
    /// calling this again does nothing.
    public func shutdown() async throws {
        guard
            isShutDown.withLock({ state in
                defer { state = true }
                return !state
            })
        else { return }
        for task in await pipeline.shutdown() { await task.value }
        diskCache?.flush()
        try await dataLoader.shutdown()
        try await workers.shutdown()
    }
}

extension URL {
    /// The URL without its fragment (`#...`): a fragment is never sent, so it names the
    /// same resource, and must not make a cache key of its own (`U#thumbnail(...)` would
    /// otherwise reach the key of another product of `U`).
    /// (Every load, memory hits included, goes through here: `fragment` answers in
    /// nanoseconds, a Character search of `absoluteString` took over a microsecond.)
    var droppingFragment: URL {
        guard fragment != nil else { return self }
        let text = absoluteString
        guard let hash = text.utf8.firstIndex(of: UInt8(ascii: "#")) else { return self }
        return URL(string: String(text[..<hash])) ?? self
    }
}
