import Foundation
import ImageLoaderSupport
import RasterImage

/// ``ImageLoader/data(for:options:)``: the original's bytes through ``HTTPCacheFlow``,
/// the same RFC 9111 path image loads take (and the same entry: the original's).
struct DataOperation: CachedProductMaking {
    let url: URL
    let options: LoadOptions
    let context: PipelineContext

    private var urlText: String { url.absoluteString }
    private var policy: HTTPCachePolicy { context.policy }

    /// The bytes and the format they were found to be.
    struct Bytes: Sendable {
        let bytes: [UInt8]
        let format: ImageFormat
    }

    private typealias Flow = HTTPCacheFlow<DataOperation>

    func run() async throws -> LoadedData {
        guard context.isFetchable(url) else {
            throw ImageLoadingError(.unsupportedURL, url: urlText)
        }
        var flow = Flow(
            url: url, storageName: CacheKey(url: url, product: .original).storageName,
            cachePolicy: options.cachePolicy, requestHeaders: context.requestHeaders + options.headers, product: nil,
            priority: PriorityHandle(options.priority), context: context, maker: self)
        flow.clientValidators = options.clientValidators
        if options.bypassesCache {
            // A user's own request (their cookies): neither answered from nor kept in a shared cache.
            flow.storesResponses = false
            context.metrics.miss()
            return try loaded(await flow.fetch(revalidating: nil))
        }
        switch try await flow.lookUp(memory: nil) {
        case .miss:
            context.metrics.miss()
            return try loaded(await flow.fetch(revalidating: nil))
        case .usable(var entry):
            if let stored = try await flow.product(of: &entry) {
                context.metrics.diskHit()
                return loaded(stored, entry.response, .disk)
            }
            context.metrics.miss()
            return try loaded(await flow.fetch(revalidating: nil))
        case .stale(var entry, let whileRevalidating, _):
            if whileRevalidating, let stored = try await flow.product(of: &entry) {
                context.metrics.diskHit()
                // The stale bytes now; the revalidation goes on without the caller (and
                // shutdown waits for it).
                let (revalidating, flow) = (entry, flow)
                context.operations.startInBackground { _ = try? await flow.fetch(revalidating: revalidating) }
                return loaded(stored, entry.response, .disk, .staleWhileRevalidate)
            }
            context.metrics.miss()
            return try loaded(await flow.fetch(revalidating: entry))
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
