import Foundation
import HTTPTypes
import ImageLoader

/// One processing request as the service decided it, once, before any work: the URL
/// parsed and its signature checked, the source allowed by the policy, what the client
/// takes, its conditions, the cookie passed on, and the keys its result is shared and
/// kept under. Every step of making the answer reads it; none parses or decides again.
struct ServiceRequest: Sendable {
    /// The URL's options, source and format.
    let url: ProcessingURL
    /// The source as the policy allowed it.
    let source: SourcePolicy.Allowed
    /// What the client takes and hints (``ClientFeatures``).
    let features: ClientFeatures
    /// The client's conditional header fields, as ``ImageService/Configuration/validators`` reads them.
    private(set) var conditions: Conditions
    /// The cookie passed on to the source (``ImageService/Configuration/cookies``), if any.
    let cookie: String?
    /// Where the result is kept (the result cache, the result bucket); `nil` when it is
    /// this user's own (a cookie went to the source) and nothing keeps it.
    let cacheKey: ResultCacheKey?
    /// The service's limits, lowered where the URL's security options ask.
    let limits: EffectiveLimits

    /// When the URL stops being valid (its `exp`), if it says.
    var expires: Date? {
        url.options.expires.flatMap { $0 > 0 ? Date(timeIntervalSince1970: TimeInterval($0)) : nil }
    }

    /// The key of the run that requests like this one share while it is in flight: the
    /// same source, options, formats and cookie make the same result. `makesImage`: the
    /// run that makes the image whatever the conditions, for requests a 304 does not serve.
    func runKey(makesImage: Bool) -> SharedRunKey {
        SharedRunKey(
            source: source.text, options: url.options, formats: features.formats, cookie: cookie,
            makesImage: makesImage)
    }

    /// The same request with other conditions (none: the image itself is wanted).
    func with(_ conditions: Conditions) -> ServiceRequest {
        var request = self
        request.conditions = conditions
        return request
    }
}

/// What identifies a run that identical requests in flight share: the source, the
/// options (the client hints' included), the formats the client takes that the service
/// may choose, the cookie passed on, and whether the run makes the image whatever the
/// conditions (the first run is started with its first request's conditions and may
/// end in a 304 before any processing; the second is for the requests that needed the
/// image after all).
struct SharedRunKey: Hashable, Sendable {
    let source: String
    let options: ProcessingOptions
    let formats: ClientFeatures
    let cookie: String?
    let makesImage: Bool
}
