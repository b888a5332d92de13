import Foundation
import ImageLoaderSupport
import Logging
import RasterImage

/// What a caller of ``HTTPCacheFlow`` makes of a URL's bytes: an image, a thumbnail, the
/// bytes themselves. The flow decides what the cache does; the maker only turns bytes
/// into its product.
protocol CachedProductMaking: Sendable {
    associatedtype Product: Sendable

    /// The product of a stored body. Throws ``ImageLoadingError`` with `.decoding` or
    /// `.contentType` when the body is not usable (it no longer decodes): the flow then
    /// removes the entry and asks the origin afresh.
    func product(ofStored body: [UInt8], response: StoredResponse) async throws -> Product

    /// The product of a downloaded 200, and the bytes the disk cache keeps for it
    /// (`nil`: none, and a previous entry is removed).
    func product(ofDownload download: Downloads.Outcome) async throws -> (
        Product, [UInt8]?
    )
}

/// A stored response as the flow sees it: from memory (its product at hand) or from disk
/// (its body, the product made once asked for).
struct CachedEntry<Product: Sendable>: Sendable {
    var response: StoredResponse
    var body: [UInt8]?
    var product: Product?
    let fromMemory: Bool

    var source: LoadedImage.Source { fromMemory ? .memory : .disk }
}

/// RFC 9111 for a private cache, for every request of a URL's bytes, whatever is made
/// of them (an image, a thumbnail, the original's bytes for a service): the lookup with
/// Vary, freshness, the conditional request, merging a 304 (asking again unconditionally
/// when it names another entity tag), storing or removing the entry (once per download,
/// however many loads share it), remembered failures, stale-if-error; and, with the
/// caller, stale-while-revalidate. A stored body that turns out unusable is removed
/// and fetched again, once, and never remembered as the URL's failure.
///
/// Every caller goes through ``run(memory:showsStale:keepRunning:deliver:)``: the
/// lookup (``lookUp(memory:)``), a usable entry's product (``product(of:)``), and the
/// fetch (``fetch(revalidating:)``) when it must.
struct HTTPCacheFlow<Maker: CachedProductMaking>: Sendable {
    typealias Product = Maker.Product
    typealias Entry = CachedEntry<Product>

    /// What the cache holds for the request.
    enum Lookup: Sendable {
        /// Nothing usable is stored (or the policy is `.reload`).
        case miss
        /// Usable without asking the origin: fresh (or, when revalidating, immutable).
        case usable(Entry)
        /// Stored, but the origin must be asked; `whileRevalidating` when it may be used
        /// meanwhile (stale-while-revalidate), `why` for the log.
        case stale(Entry, whileRevalidating: Bool, why: String)
    }

    /// How a request to the origin ended, when it gave the caller something to use.
    enum Outcome: Sendable {
        /// A 304: the stored product, with the merged response (stored again).
        case revalidated(Product, StoredResponse)
        /// A 200: its product, its response, whether it may be stored, and where it went.
        case downloaded(Product, StoredResponse, storable: Bool, source: LoadedImage.Source)
        /// The origin failed and stale-if-error allows the stored product.
        case staleIfError(Product, Entry, ImageLoadingError)
    }

    let url: URL
    /// The name the entry is stored under (``CacheKey/storageName``).
    let storageName: String
    let cachePolicy: LoadOptions.CachePolicy
    let requestHeaders: [HeaderField]
    /// A client's validators, sent when nothing is stored (``LoadOptions/clientValidators``).
    var clientValidators: [HeaderField] = []
    /// Whether what the origin answers may be stored (``LoadOptions/bypassesCache`` clears it).
    var storesResponses = true
    /// What the download stage is told this request makes (decode plans); `nil`: the bytes.
    let product: ImageProduct?
    let priority: PriorityHandle
    let context: PipelineContext
    let maker: Maker
    var sendingRequest: @Sendable (_ hadCache: Bool) -> Void = { _ in }
    var progress: @Sendable (_ received: Int, _ expected: Int?) -> Void = { _, _ in }

    private var urlText: String { url.absoluteString }
    private var policy: HTTPCachePolicy { context.policy }

    /// The stored response for the request: `memory` (the caller's own, already matched)
    /// first, then the disk. Throws `.rememberedFailure` when the URL failed recently
    /// and often enough that it is not asked again yet.
    private func lookUp(memory: Entry?) async throws -> Lookup {
        guard cachePolicy != .reload else { return .miss }
        var found = memory
        if found == nil { found = try await diskEntry() }
        try await checkRememberedFailure()
        guard let entry = found, cameFromAllowedAddresses(entry.response) else { return .miss }
        let evaluation = policy.evaluate(entry.response, now: context.now)
        let usable =
            switch cachePolicy {
            case .useCache: evaluation.isFresh
            case .revalidate: evaluation.isImmutable
            case .reload: false
            }
        if usable { return .usable(entry) }
        let why = evaluation.isFresh ? "revalidation asked for" : "stale (age \(evaluation.age.rounded(.down)) s)"
        return .stale(
            entry, whileRevalidating: cachePolicy == .useCache && evaluation.mayServeWhileRevalidating, why: why)
    }

    /// The one way from the lookup to the answer, for every request of a URL's bytes.
    /// A usable entry's product is handed to `deliver` and nothing is asked of the
    /// origin. A miss, or an entry whose body turns out unusable, is fetched. A stale
    /// entry is revalidated; its product is handed over first when stale-while-revalidate
    /// allows it (after `keepRunning`, so that a caller who leaves with it does not
    /// cancel the revalidation) or when the caller shows stale products while it waits
    /// (`showsStale`: image loads' events). Counts hits and misses and logs the misses.
    ///
    /// - Returns: The fetch's outcome, `nil` when the stored product was the answer.
    func run(
        memory: Entry?, showsStale: Bool, keepRunning: () -> Void,
        deliver: (Product, Entry, LoadedImage.Freshness) -> Void
    ) async throws -> Outcome? {
        switch try await lookUp(memory: memory) {
        case .miss:
            countMiss("cache miss")
            return try await fetch(revalidating: nil)
        case .usable(var entry):
            guard let product = try await product(of: &entry) else {
                countMiss("cache miss: stored entry unusable")
                return try await fetch(revalidating: nil)
            }
            countHit(entry)
            deliver(product, entry, .fresh)
            return nil
        case .stale(var entry, let whileRevalidating, let why):
            guard whileRevalidating else {
                countMiss("cache miss: \(why)")
                guard showsStale else { return try await fetch(revalidating: entry) }
                guard let product = try await product(of: &entry) else { return try await fetch(revalidating: nil) }
                deliver(product, entry, .needsRevalidation)
                return try await fetch(revalidating: entry)
            }
            // Before the stale product goes out: a caller that leaves as soon as it has
            // it must not cancel the revalidation.
            keepRunning()
            guard let product = try await product(of: &entry) else {
                countMiss("cache miss: stored entry unusable")
                return try await fetch(revalidating: nil)
            }
            countHit(entry)
            deliver(product, entry, .staleWhileRevalidate)
            return try await fetch(revalidating: entry)
        }
    }

    private func countHit(_ entry: Entry) {
        if entry.fromMemory { context.metrics.memoryHit() } else { context.metrics.diskHit() }
    }

    private func countMiss(_ why: String) {
        context.logMiss(urlText, why)
        context.metrics.miss()
    }

    /// Whether a stored response may be used under this loader's address filter: with
    /// one, only when every address it came from is known and allowed now. An entry
    /// another process stored under a looser filter (or none), or before the filter
    /// tightened, is a miss: the request goes out again, through the filter.
    private func cameFromAllowedAddresses(_ response: StoredResponse) -> Bool {
        guard let filter = context.dataLoader.addressFilter(for: url) else { return true }
        guard let addresses = response.connectedAddresses, !addresses.isEmpty else { return false }
        return addresses.allSatisfy(filter)
    }

    /// The entry's product, made from its body when it has none yet. `nil` when the
    /// stored body is unusable: the entry has been removed, and the caller asks the origin.
    private func product(of entry: inout Entry) async throws -> Product? {
        if let product = entry.product { return product }
        guard let body = entry.body else { return nil }
        do {
            let product = try await maker.product(ofStored: body, response: entry.response)
            entry.product = product
            return product
        } catch let error as ImageLoadingError where error.isStoredBytesFailure {
            context.logger.warning(
                "stored body unusable, removed and fetched again",
                metadata: ["url": "\(urlText)", "key": "\(storageName)", "error": "\(error)"])
            context.metrics.corruptEntry()
            if let disk = context.diskCache {
                let name = storageName
                try await context.blocking(urlText) { disk.remove(url: name) }
            }
            return nil
        }
    }

    /// Asks the origin (conditionally when `cached` is given) through the download
    /// stage, and stores what it answers.
    func fetch(revalidating cached: Entry?) async throws -> Outcome {
        sendingRequest(cached != nil)
        var headers = requestHeaders
        if let cached {
            headers += policy.conditionalHeaders(for: cached.response)
        } else {
            headers += clientValidators
        }
        let download: Downloads.Outcome
        do {
            download = try await context.download(
                DataRequest(url: url, headers: headers), product: product, priority: priority, progress: progress)
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
                responseTime: response.responseTime, connectedAddresses: response.connectedAddresses)
            cached.response = updated
            context.metrics.notModified()
            guard let product = try await product(of: &cached) else { return try await fetch(revalidating: nil) }
            _ = await writeOnce(download) { disk, name, urlText in
                if policy.isStorable(updated) { try? disk.update(updated) } else { disk.remove(url: name) }
                disk.removeFailure(for: urlText)
                return true
            }
            return .revalidated(product, updated)
        }
        if response.status == 304, cached == nil, !clientValidators.isEmpty {
            // The client's copy is current: nothing to store, nothing failed.
            throw ImageLoadingError(.notModified(headers: response.headers), url: urlText)
        }
        guard response.status == 200 else {
            let error = ImageLoadingError(.httpStatus(response.status), url: urlText)
            return try await failed(error, response: response, cached: cached, remembers: download.isFirst)
        }
        let (product, bytes) = try await maker.product(ofDownload: download)
        var stored = StoredResponse(
            url: storageName, status: response.status, headers: response.headers,
            requestTime: response.requestTime, responseTime: response.responseTime)
        stored.connectedAddresses = response.connectedAddresses
        stored.varyingRequestHeaders = policy.varyingRequestHeaders(for: stored, requestHeaders: headers)
        let (storable, entry, logger) = (storesResponses && policy.isStorable(stored), stored, context.logger)
        let written = await writeOnce(download) { disk, name, urlText in
            disk.removeFailure(for: urlText)
            guard storable, let bytes else {
                disk.remove(url: name)
                return false
            }
            do {
                try disk.store(entry, body: bytes)
                return true
            } catch {
                // A full or read-only disk: the product is still served, from memory next time.
                logger.warning("disk cache write failed", metadata: ["url": "\(urlText)", "error": "\(error)"])
                return false
            }
        }
        return .downloaded(product, stored, storable: storable, source: written ? .networkToDisk : .network)
    }

    /// Writes to the disk cache on a worker, once for this entry per download whichever
    /// load sharing it asks first; `false` without a disk cache or when the write failed.
    private func writeOnce(
        _ download: Downloads.Outcome,
        _ write: @escaping @Sendable (DiskCache, String, String) -> Bool
    ) async -> Bool {
        guard let disk = context.diskCache else { return false }
        let (context, name, urlText) = (context, storageName, urlText)
        return await download.once.value(name) {
            (try? await context.blocking(urlText) { write(disk, name, urlText) }) ?? false
        }
    }

    /// The disk's entry for the request, when its Vary fields match.
    private func diskEntry() async throws -> Entry? {
        guard let disk = context.diskCache else { return nil }
        let name = storageName
        guard let (response, body) = try await context.blocking(urlText, { disk.response(for: name) }),
            policy.matchesVary(response, requestHeaders: requestHeaders)
        else { return nil }
        return Entry(response: response, body: body, product: nil, fromMemory: false)
    }

    /// Throws `.rememberedFailure` for a failure remembered recently and often enough.
    private func checkRememberedFailure() async throws {
        guard let disk = context.diskCache, disk.hasFailure(for: urlText) else { return }
        let urlText = self.urlText
        guard let failure = try await context.blocking(urlText, { disk.failure(for: urlText) }),
            failure.expires > context.now, failure.attempts >= context.configuration.maxAttemptsForErrors
        else { return }
        context.logger.debug("remembered failure", metadata: ["url": "\(urlText)", "attempts": "\(failure.attempts)"])
        throw ImageLoadingError(.rememberedFailure(status: failure.status, attempts: failure.attempts), url: urlText)
    }

    /// The origin failed. Within stale-if-error the stored product is the outcome; error
    /// responses are remembered (unless no-store, and once per request: `remembers` is
    /// set for the load that asked first); otherwise the error is thrown.
    private func failed(_ error: ImageLoadingError, response: DataResponse?, cached: Entry?, remembers: Bool)
        async throws -> Outcome
    {
        let status = response?.status
        let serverFailure = status.map { [500, 502, 503, 504].contains($0) } ?? true
        if var cached, serverFailure, cachePolicy != .reload {
            let evaluation = policy.evaluate(cached.response, now: context.now)
            // The origin could not be reached (a gateway's 502-504 says the same of the
            // server behind it): a disconnected cache may answer from what it holds.
            let unreachable = status.map { [502, 503, 504].contains($0) } ?? error.isUnreachable
            if evaluation.mayServeOnError
                || (unreachable
                    && policy.mayServeWhenUnreachable(evaluation, within: context.configuration.staleWhenUnreachable)),
                let product = try await product(of: &cached)
            {
                context.logger.notice(
                    "origin failed: the stored copy answers",
                    metadata: [
                        "url": "\(urlText)", "error": "\(error)",
                        // As text: the lifetime is infinite when the server's rules are not followed.
                        "stale_seconds": "\((evaluation.age - evaluation.lifetime).rounded())",
                    ])
                return .staleIfError(product, cached, error)
            }
        }
        if remembers, let response, let status, status >= 400, let disk = context.diskCache {
            let control = CacheControl(headerValues: response.headers.values(named: "Cache-Control"))
            if !control.noStore {
                let configuration = context.configuration
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
}

extension ImageLoadingError {
    /// Whether the origin could not be reached: no connection, no answer in time, a
    /// broken answer, or an object store's credentials could not be had.
    var isUnreachable: Bool {
        switch reason {
        case .network, .cannotConnect, .timeout, .invalidResponse, .credentials: true
        default: false
        }
    }

    /// Whether the bytes were at fault (not the network, not a cancellation).
    var isDecodingFailure: Bool {
        if case .decoding = reason { return true }
        return false
    }

    /// Whether stored bytes were at fault: they no longer decode, or are no longer of
    /// an accepted type.
    var isStoredBytesFailure: Bool {
        switch reason {
        case .decoding, .contentType: true
        default: false
        }
    }
}
