import Foundation
import Logging
import RasterImage

/// What every load shares: the configuration, the caches, the HTTP stack, the workers.
struct PipelineContext: Sendable {
    let configuration: ImageLoader.Configuration
    let policy: HTTPCachePolicy
    let diskCache: DiskCache?
    let memoryCache: MemoryCache?
    let dataLoader: any DataLoading
    let workers: WorkerPool
    var logger: Logger { configuration.logger }
    var now: Date { configuration.clock() }

    /// The request headers every request carries (and Vary compares).
    var requestHeaders: [HeaderField] {
        var headers = configuration.requestHeaders
        if !headers.contains(where: { $0.name.lowercased() == "accept" }) {
            let types = configuration.acceptedContentTypes.types.sorted().joined(separator: ", ")
            headers.append(HeaderField("Accept", types))
        }
        return headers
    }

    /// Runs blocking work on the workers, mapping a stopped pool to `.shutDown`.
    func blocking<T: Sendable>(_ url: String, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        do {
            return try await workers.run(body)
        } catch let error as ImageLoadingError {
            throw error
        } catch let error as ImageDecodingError {
            throw ImageLoadingError(.decoding(error), url: url)
        } catch is CancellationError {
            throw ImageLoadingError(.cancelled, url: url)
        } catch {
            throw ImageLoadingError(.shutDown, url: url)
        }
    }

    /// Decodes on a worker thread.
    func decode(_ bytes: [UInt8], url: String) async throws -> RasterImage {
        let (decoder, options) = (configuration.decoder, configuration.decodingOptions)
        return try await blocking(url) { try decoder.decode(.bytes(bytes), options: options) }
    }

    /// The memory entry for `key`, when it answers a request with these headers.
    func memoryEntry(for key: String) -> MemoryCache.Entry? {
        guard let entry = memoryCache?.entry(for: key) else { return nil }
        if let response = entry.response, !policy.matchesVary(response, requestHeaders: requestHeaders) { return nil }
        return entry
    }

    /// Whether a memory entry may be used without asking the origin.
    func isFresh(_ entry: MemoryCache.Entry) -> Bool {
        guard let response = entry.response else { return true }  // a local file
        return policy.evaluate(response, now: now).isFresh
    }
}
