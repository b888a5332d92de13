import Foundation
import ImageLoaderSupport
import RasterImage

/// ``ImageLoader/data(for:options:)``: the original's bytes through ``HTTPCacheFlow``,
/// the same RFC 9111 path image loads take (and the same entry: the original's), run
/// by the pipeline as image loads are.
struct DataOperation: CachedProductMaking {
    let url: URL
    let options: LoadOptions
    let context: PipelineContext
    /// The load's priority: the highest of its callers'.
    let priority: PriorityHandle

    private var urlText: String { url.absoluteString }
    private var policy: HTTPCachePolicy { context.policy }

    /// The bytes and the format they were found to be.
    struct Bytes: Sendable {
        let bytes: [UInt8]
        let format: ImageFormat
    }

    private typealias Flow = HTTPCacheFlow<DataOperation>

    /// Hands the bytes to `deliver`, or the failure to `fail`. Within
    /// stale-while-revalidate the stored bytes go out first (after `keepRunning`) and
    /// the revalidation goes on; its own failure is then only the cache's business.
    func run(
        deliver: @Sendable (LoadedData) -> Void, fail: @Sendable (ImageLoadingError) -> Void,
        keepRunning: @Sendable () -> Void
    ) async {
        var delivered = false
        do {
            guard context.isFetchable(url) else {
                throw ImageLoadingError(.unsupportedURL, url: urlText)
            }
            var flow = Flow(
                url: url, storageName: CacheKey(url: url, product: .original).storageName,
                cachePolicy: options.cachePolicy, requestHeaders: context.requestHeaders + options.headers,
                product: nil, priority: priority, context: context, maker: self)
            flow.clientValidators = options.clientValidators
            if options.bypassesCache {
                // A user's own request (their cookies): neither answered from nor kept in a shared cache.
                flow.storesResponses = false
                context.metrics.miss()
                return deliver(try loaded(await flow.fetch(revalidating: nil)))
            }
            let outcome = try await flow.run(memory: nil, showsStale: false, keepRunning: keepRunning) {
                stored, entry, freshness in
                delivered = true
                deliver(loaded(stored, entry.response, entry.source, freshness))
            }
            if let outcome, !delivered { deliver(try loaded(outcome)) }
        } catch {
            if !delivered { fail(ImageLoadingError(mapping: error, url: urlText)) }
        }
    }

    func product(ofStored body: [UInt8], response: StoredResponse) async throws -> Bytes {
        Bytes(
            bytes: body,
            format: try context.acceptedFormat(body, declaredContentType: response.value("Content-Type"), url: urlText))
    }

    func product(ofDownload download: Downloads.Outcome) async throws -> (
        Bytes, [UInt8]?
    ) {
        let response = download.value
        let format = try context.acceptedFormat(
            response.body, declaredContentType: response.value("Content-Type"), url: urlText)
        return (Bytes(bytes: response.body, format: format), response.body)
    }

    private func loaded(_ outcome: Flow.Outcome) throws -> LoadedData {
        switch outcome {
        case .revalidated(let stored, let response): loaded(stored, response, .networkNotModified)
        case .downloaded(let stored, let response, _, let source): loaded(stored, response, source)
        case .staleIfError(let stored, let entry, _): loaded(stored, entry.response, .disk, .staleIfError)
        }
    }

    private func loaded(
        _ stored: Bytes, _ response: StoredResponse, _ source: LoadedImage.Source,
        _ freshness: LoadedImage.Freshness = .fresh
    ) -> LoadedData {
        var data = LoadedData(
            bytes: stored.bytes, format: stored.format, headers: response.headers, source: source, url: url,
            freshFor: freshFor(response))
        data.freshness = freshness
        return data
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
