import Foundation
import ImageLoaderSupport
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
    /// What the loader was built from.
    public let configuration: Configuration
    /// The disk cache, for clean-up and statistics; `nil` when the configuration has none.
    public let diskCache: DiskCache?
    /// The memory cache, for synchronous peeks and purges; `nil` when images are not
    /// kept in memory.
    public let memoryCache: MemoryCache?
    private let pipeline: ImagePipeline
    let context: PipelineContext
    private let dataLoader: any DataLoading
    private let workers: WorkerPool
    private let isShutDown = Lock(false)

    /// Creates the loader: its disk cache (reading the index), its HTTP client and its
    /// worker threads. Call ``shutdown()`` when done.
    public convenience init(configuration: Configuration = Configuration()) throws {
        try self.init(configuration: configuration, diskCacheFolder: LocalFolder())
    }

    /// The loader, its disk cache making its file-system calls through `diskCacheFolder`.
    init(configuration: Configuration, diskCacheFolder: any CacheFolderAccess) throws {
        self.configuration = configuration
        diskCache = try configuration.cacheDirectory.map {
            try DiskCache(
                directory: $0, maxBytes: configuration.diskCacheMaxBytes, clock: configuration.clock,
                logger: configuration.logger, folder: diskCacheFolder)
        }
        memoryCache =
            configuration.cacheImagesInMemory
            ? MemoryCache(configuration: configuration.memoryCache, clock: configuration.clock) : nil
        dataLoader = configuration.makeDataLoader()
        workers = WorkerPool(threads: configuration.decodingThreads, niceness: configuration.workerNiceness)
        context = PipelineContext(
            configuration: configuration, diskCache: diskCache, memoryCache: memoryCache, dataLoader: dataLoader,
            workers: workers)
        pipeline = ImagePipeline(metrics: context.metrics)
        let metrics = context.metrics
        diskCache?.corruptionObserver.withLock { $0 = { metrics.corruptEntry() } }
    }

    /// The events of loading `url`, as they happen (see ``ImageLoadEvent`` for which
    /// arrive when): a cached image first (stale ones too, marked so), then the
    /// request and its outcome. Stop iterating at any time; the load is cancelled when
    /// no caller waits for it any more, except a background revalidation, a prefetch,
    /// or a load asked to finish (``LoadOptions/finishesWhenCancelled``).
    ///
    /// ```swift
    /// for await event in loader.events(for: url) {
    ///     if let loaded = event.image { cell.show(loaded.image) }   // stale first, then the new one
    /// }
    /// ```
    public func events(for url: URL, options: LoadOptions = LoadOptions()) -> AsyncStream<ImageLoadEvent> {
        stream(url, product: .original, options: options)
    }

    /// The image at `url` and where it came from: the first image HTTP's rules let it
    /// use (fresh, or stale within stale-while-revalidate or stale-if-error; a stale
    /// image that must be revalidated is not returned, the revalidation is waited
    /// for). Throws ``ImageLoadingError`` when there is none, or when the caller's task
    /// is cancelled or its ``LoadOptions/deadline`` passes (at once: the wait ends,
    /// the shared work goes on only if another caller waits).
    ///
    /// A fresh image in memory is returned without any task hop.
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

    /// A thumbnail of `url`, cached in memory (with its encoded bytes) and on disk
    /// (encoded in `options.outputFormat`) under the URL and the options. It stays
    /// valid exactly as long as the original: when stale it is revalidated with the
    /// original's validators; a 304 keeps it, a changed original replaces it. The
    /// original's bytes are not kept. Products of one URL asked for at the same time
    /// share one download and one decode. File URLs are revalidated by size and date.
    ///
    /// ```swift
    /// let thumb = try await loader.thumbnail(for: url, options: ThumbnailOptions(maxPixelSize: 256))
    /// print(thumb.source)                  // networkToDisk, then memory; disk after a restart
    /// try response.write(thumb.encoded!.bytes)   // the encoded bytes, memory hits included
    /// ```
    public func thumbnail(
        for url: URL, options: ThumbnailOptions, loadOptions: LoadOptions = LoadOptions()
    ) async throws(ImageLoadingError) -> LoadedImage {
        try await first(url, product: .thumbnail(options), options: loadOptions)
    }

    /// The key a product of `url` is loaded and cached under (on every load, memory hits
    /// included: it reads nothing of the configuration, whose copy would retain and
    /// release every reference it holds).
    private func productKey(_ url: URL, _ product: ImageProduct, _ options: LoadOptions) -> ProductKey {
        ProductKey(
            cache: CacheKey(url: url.droppingFragment, product: product),
            cachePolicy: options.cachePolicy, headers: options.headers)
    }

    /// A fresh product in memory, when the options let the memory cache answer. `url`
    /// has no fragment. (The path of every memory hit: the key is the URL's text and the
    /// product as given, compared as values; no storage name is built.)
    private func memoryHit(_ url: URL, _ product: ImageProduct, _ options: LoadOptions) -> LoadedImage? {
        guard options.cachePolicy == .useCache, options.headers.isEmpty,
            let hit = context.freshInMemory(CacheKey(url: url, product: product))
        else { return nil }
        context.metrics.memoryHit()
        return LoadedImage(image: hit.image, source: .memory, url: url, encoded: hit.encoded)
    }

    private func stream(_ url: URL, product: ImageProduct, options: LoadOptions) -> AsyncStream<ImageLoadEvent> {
        if let invalid = invalidProduct(url, product) {
            return AsyncStream { continuation in
                continuation.yield(.failed(invalid))
                continuation.finish()
            }
        }
        if let hit = memoryHit(url.droppingFragment, product, options) {
            return AsyncStream { continuation in
                continuation.yield(.cached(hit))
                continuation.finish()
            }
        }
        let key = productKey(url, product, options)
        return attached(key, options, work: work(key, options)) { event in
            switch event {
            case .image(let event): event
            case .failed(let error): .failed(error)
            case .data: nil
            }
        }
    }

    /// The events of the load of `key` (joined, or started with `work`) as `Event`s,
    /// those `event` maps to one: a caller of the pipeline. The stream ends with a
    /// timeout failure at the options' deadline; dropping it leaves the load (the last
    /// caller to leave cancels it, unless it must finish).
    func attached<Event: Sendable>(
        _ key: ProductKey, _ options: LoadOptions, work: @escaping ImagePipeline.Work,
        _ event: @escaping @Sendable (PipelineEvent) -> Event?
    ) -> AsyncStream<Event> {
        let pipeline = self.pipeline
        return AsyncStream { continuation in
            // Attached and detached synchronously, under the shared work's lock: the
            // termination handler is set only once the caller is registered.
            guard
                let id = pipeline.attach(
                    key: key, priority: options.priority, finishesWhenCancelled: options.finishesWhenCancelled,
                    onEvent: { if let mapped = event($0) { continuation.yield(mapped) } },
                    onEnd: { continuation.finish() }, work: work)
            else { return }
            let timer = options.deadline.map { deadline in
                Task {
                    try? await Task.sleep(until: deadline, clock: .continuous)
                    guard !Task.isCancelled else { return }
                    if let mapped = event(.failed(ImageLoadingError(.timeout, url: key.url.absoluteString))) {
                        continuation.yield(mapped)
                    }
                    continuation.finish()
                }
            }
            continuation.onTermination = { _ in
                timer?.cancel()
                pipeline.detach(id, key: key)
            }
        }
    }

    private func work(_ key: ProductKey, _ options: LoadOptions) -> ImagePipeline.Work {
        let context = self.context
        return { run in
            await LoadOperation(
                key: key, options: options, context: context, emit: { run.report(.image($0)) },
                priority: run.priority, keepRunning: run.keepRunning
            ).run()
        }
    }

    private func first(_ url: URL, product: ImageProduct, options: LoadOptions) async throws(ImageLoadingError)
        -> LoadedImage
    {
        let url = url.droppingFragment
        if let invalid = invalidProduct(url, product) { throw invalid }
        if let hit = memoryHit(url, product, options) { return hit }
        var failure: ImageLoadingError?
        for await event in stream(url, product: product, options: options) {
            if let image = event.image, image.isUsable { return image }
            if case .failed(let error) = event { failure = error }
        }
        if Task.isCancelled { throw ImageLoadingError(.cancelled, url: url.absoluteString) }
        throw failure ?? ImageLoadingError(.cancelled, url: url.absoluteString)
    }

    /// Why `product` cannot be made at all (a thumbnail box outside `1...maxSide`):
    /// refused before any request, and never remembered as the URL's failure.
    private func invalidProduct(_ url: URL, _ product: ImageProduct) -> ImageLoadingError? {
        do throws(ImageDecodingError) {
            try product.thumbnailOptions?.validate()
            return nil
        } catch {
            return ImageLoadingError(.decoding(error), url: url.droppingFragment.absoluteString)
        }
    }

    /// The image in the memory cache for `url`, if there is one, without waiting:
    /// for code that cannot await. Its freshness is not checked.
    public func peek(_ url: URL, product: ImageProduct = .original) -> RasterImage? {
        memoryCache?.peek(url, product: product)
    }

    /// Whether the last load of `url` failed (and has not succeeded since), without
    /// waiting: a reused list cell can show a placeholder instead of retrying.
    public func failedToFetch(_ url: URL) -> Bool {
        context.recentFailures.failure(for: url.droppingFragment.absoluteString) != nil
    }

    /// Loads `urls` at the lowest priority, with no caller, to fill the caches with
    /// `product` (the originals, or thumbnails).
    ///
    /// ```swift
    /// loader.prefetch(nextPage, product: .thumbnail(ThumbnailOptions(maxPixelSize: 128)))
    /// ```
    public func prefetch(_ urls: [URL], product: ImageProduct = .original) {
        let options = LoadOptions(priority: .veryLow)
        for url in urls where invalidProduct(url, product) == nil {
            let key = productKey(url, product, options)
            if context.freshInMemory(key.cache) != nil { continue }
            pipeline.prefetch(key: key, work: work(key, options))
        }
    }

    /// Cancels the prefetches of `product` of `urls` that no caller has joined.
    public func cancelPrefetching(_ urls: [URL], product: ImageProduct = .original) {
        for url in urls {
            pipeline.cancelPrefetch(key: productKey(url, product, LoadOptions()))
        }
    }

    /// Changes the priority of a load under way (say, a row scrolled back into view),
    /// and so of the download and decode it shares. A load still waiting for a slot
    /// is picked by its new priority.
    public func setPriority(
        _ priority: LoadPriority, for url: URL, product: ImageProduct = .original,
        cachePolicy: LoadOptions.CachePolicy = .useCache
    ) {
        pipeline.setPriority(priority, key: productKey(url, product, LoadOptions(cachePolicy: cachePolicy)))
    }

    /// What the loader has done so far: hits, misses, requests, bytes, decodes.
    public var statistics: LoaderStatistics { context.metrics.snapshot }

    /// Waits until every load in flight has finished, background revalidations included.
    public func waitForBackgroundWork() async {
        for task in pipeline.runningTasks { await task.value }
        await context.operations.waitUntilIdle()
    }

    /// Whether ``shutdown()`` has been called (for tests that order events around it).
    var isShuttingDown: Bool { isShutDown.withLock { $0 } }

    /// Runs `body` once on each of the loader's decoding threads, waiting for threads
    /// still busy at most a tenth of a second: for what a thread keeps of its own (the
    /// C library's malloc arenas; ``MemoryAllocator/returnFreeMemory(onEveryThread:)``).
    package func runOnEveryWorker(_ body: @escaping @Sendable () -> Void) async {
        await workers.runOnEveryThread(body)
    }

    /// Finishes the work in flight (loads, background revalidations and prefetches,
    /// and calls of ``data(for:options:)``, ``decode(_:declaredContentType:priority:)``
    /// and ``thumbnail(of:options:declaredContentType:priority:)``), then saves the
    /// disk cache's index and releases the HTTP client and the worker threads. Work
    /// asked for afterwards fails with `.shutDown`; calling this again does nothing.
    public func shutdown() async throws {
        guard
            isShutDown.withLock({ state in
                defer { state = true }
                return !state
            })
        else { return }
        for task in pipeline.shutdown() { await task.value }
        await context.operations.closeAndWait()
        diskCache?.flush()
        try await runEvery([{ try await self.dataLoader.shutdown() }, { try await self.workers.shutdown() }])
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
