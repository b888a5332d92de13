import CoreMetrics
import Crypto
import Foundation
import HTTPTypes
import ImageLoader
import ImageLoaderSupport
import Logging
import RasterImage
import ServiceLifecycle

extension ImageService {
    /// `POST /info`: the body's `ImageDescription`, as JSON, never cached downstream.
    func info(of body: [UInt8], contentType: String?) async -> Reply {
        do {
            let json = try await describe(
                body, ProcessingOptions(), limits: effectiveLimits(ProcessingOptions.SecurityLimits()),
                contentType: contentType)
            return .json(json)
        } catch {
            return .failure(ServiceError.from(error))
        }
    }

    /// `GET /info/{signature}/{options}/{source}`: the source's `ImageDescription` as
    /// JSON, signed as image URLs are, cacheable downstream as long as the source is fresh.
    func info(path: String, departure: @Sendable () async -> ClientDeparture? = { nil }) async -> Reply {
        do {
            let prefix = configuration.pathPrefix + "/info"
            guard path.hasPrefix(prefix) else { throw ServiceError(status: 404, "not found") }
            var rules = configuration.urlRules
            rules.forInfo = true
            let url = try ProcessingURL.parse(
                String(path.dropFirst(prefix.count)), signature: configuration.signature,
                allowsUnsigned: configuration.allowsUnsigned, rules: rules)
            let allowed = try configuration.sources.check(url.source)
            let limits = effectiveLimits(url.options.security)
            let (json, freshFor) = try await withTimeout(leavingWith: await departure()) {
                try await self.admitted(PriorityHandle(.normal)) {
                    let source = try await self.metrics.timingFetch {
                        try await self.fetch(allowed, conditions: Conditions(), cookie: nil)
                    }
                    guard source.bytes.count <= limits.maxSourceBytes else {
                        throw ServiceError.sourceTooLarge(bytes: limits.maxSourceBytes)
                    }
                    let json = try await self.describe(
                        source.bytes, url.options, limits: limits, contentType: source.contentType)
                    return (json, source.freshFor ?? TimeInterval(self.configuration.ttl))
                }
            }
            return .json(json, maxAge: Int(min(freshFor, ImageService.maxFreshness)))
        } catch {
            var failure = ServiceError.from(error)
            if failure.isMissingSource { failure.maxAge = configuration.notFoundTTL }
            return .failure(failure)
        }
    }

    /// The `ImageDescription` of `bytes` as JSON (keys sorted), made on the loader's workers.
    private func describe(
        _ bytes: [UInt8], _ options: ProcessingOptions, limits: EffectiveLimits, contentType: String?
    ) async throws -> [UInt8] {
        var description = DescriptionOptions()
        description.limits = loader.configuration.decodingOptions.limits
        description.limits.maxPixelsPerFrame = min(description.limits.maxPixelsPerFrame, limits.maxSourcePixels)
        description.includesLocation = configuration.infoIncludesLocation
        if let size = options.blurHash { description.blurHashComponents = (size.x, size.y) }
        let settings = description
        let described = try await loader.processing(bytes, declaredContentType: contentType) { decoder in
            try decoder.describe(bytes, options: settings)
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(described)) + [10]
    }

    /// `POST /upload/{options}`: the thumbnail of the body, never cached downstream; its
    /// format chosen as a URL's (``ResponseRules/outputFormat(requested:features:source:animated:expectsTransparency:preferred:)``).
    func upload(optionsPath: Substring, body: [UInt8], headers: HTTPFields, contentType: String?) async -> Reply {
        do {
            let features = ClientFeatures(headers, configuration: configuration)
            let options = try ProcessingURL.parseOptions(
                optionsPath, rules: configuration.urlRules, starting: features.startingOptions)
            let limits = effectiveLimits(options.security)
            let preferred = configuration.preferredFormats
            let made = try await metrics.timingProcessing {
                try await self.render(body, options, limits: limits, contentType: contentType) { info, animated in
                    ResponseRules.outputFormat(
                        requested: options.format, features: features, source: info.format, animated: animated,
                        expectsTransparency: options.expectsTransparency(sourceHasAlpha: info.hasAlpha),
                        preferred: preferred)
                }
            }
            return .upload(made.bytes, contentType: made.format.contentType)
        } catch {
            return .failure(ServiceError.from(error))
        }
    }
}
