import Foundation

/// The rules of a private HTTP cache (RFC 9111, with RFC 5861's stale-while-revalidate
/// and stale-if-error and RFC 8246's immutable), as pure functions of a stored
/// response and the time. The loader asks it what to do; it does no I/O.
struct HTTPCachePolicy: Sendable {
    /// When `false`, stored images never go stale: they are kept until cleaned up.
    var useServerCachePolicy = true
    /// Freshness for responses that state none (no max-age, no Expires), used instead
    /// of the heuristic.
    var defaultMaxAge: TimeInterval?

    /// Status codes a cache may give a heuristic lifetime (RFC 9110 §15.1).
    static let heuristicallyCacheable: Set<Int> = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]
    /// The heuristic's share of the time since Last-Modified, and its cap.
    static let heuristicFraction = 0.1
    static let heuristicCap: TimeInterval = 7 * 86_400

    /// Header fields a 304 must not change in the stored response (RFC 9111 §3.2):
    /// Content-Length, and hop-by-hop fields.
    static let notUpdatedBy304: Set<String> = [
        "content-length", "connection", "keep-alive", "proxy-connection", "te", "transfer-encoding", "upgrade",
        "proxy-authenticate", "proxy-authorization", "trailer",
    ]

    /// Whether a response may be stored at all: not no-store, not Vary: *.
    func isStorable(_ response: StoredResponse) -> Bool {
        !response.cacheControl.noStore && !response.varyNames.contains("*")
    }

    /// How long the response stays fresh after it was generated.
    func freshnessLifetime(_ response: StoredResponse) -> TimeInterval {
        let control = response.cacheControl
        if let maxAge = control.maxAge { return TimeInterval(maxAge) }
        if let expiresText = response.value("Expires") {
            // An invalid Expires (such as "0") means already expired (RFC 9111 §5.3).
            guard let expires = HTTPDate.parse(expiresText) else { return 0 }
            return max(0, expires.timeIntervalSince(dateValue(response)))
        }
        if let defaultMaxAge { return defaultMaxAge }
        if HTTPCachePolicy.heuristicallyCacheable.contains(response.status),
            let lastModified = response.value("Last-Modified").flatMap(HTTPDate.parse)
        {
            let sinceModified = dateValue(response).timeIntervalSince(lastModified)
            return min(HTTPCachePolicy.heuristicCap, max(0, sinceModified * HTTPCachePolicy.heuristicFraction))
        }
        return 0
    }

    /// The response's Date, or when it arrived if it has none (RFC 9111 §4.2.3).
    func dateValue(_ response: StoredResponse) -> Date {
        response.value("Date").flatMap(HTTPDate.parse) ?? response.responseTime
    }

    /// current_age of RFC 9111 §4.2.3: the age the origin (and any caches before us)
    /// gave it, corrected for the request's round trip, plus the time it has spent here.
    func currentAge(_ response: StoredResponse, now: Date) -> TimeInterval {
        let apparentAge = max(0, response.responseTime.timeIntervalSince(dateValue(response)))
        // Age is delta-seconds; anything else ("inf", "-5", "1e9") is invalid and ignored.
        let ageValue =
            response.value("Age").flatMap { CacheControl.seconds($0.trimmingCharacters(in: .whitespaces)) }
            .map(TimeInterval.init) ?? 0
        let responseDelay = max(0, response.responseTime.timeIntervalSince(response.requestTime))
        let correctedInitialAge = max(apparentAge, ageValue + responseDelay)
        let residentTime = max(0, now.timeIntervalSince(response.responseTime))
        return correctedInitialAge + residentTime
    }

    /// What may be done with a stored response now.
    struct Evaluation: Equatable {
        /// Usable without asking the origin.
        var isFresh: Bool
        /// Stale, but within stale-while-revalidate: serve it and revalidate in the background.
        var mayServeWhileRevalidating: Bool
        /// Stale (or needing validation), but within stale-if-error: usable if the origin fails.
        var mayServeOnError: Bool
        /// Fresh and immutable: not revalidated even when a revalidation is asked for.
        var isImmutable: Bool
        /// `must-revalidate` or `no-cache`: never used stale, whatever happens to the origin.
        var forbidsStale = false
        var age: TimeInterval
        var lifetime: TimeInterval
    }

    func evaluate(_ response: StoredResponse, now: Date) -> Evaluation {
        guard useServerCachePolicy else {
            return Evaluation(
                isFresh: true, mayServeWhileRevalidating: false, mayServeOnError: true, isImmutable: true, age: 0,
                lifetime: .infinity)
        }
        let control = response.cacheControl
        let age = currentAge(response, now: now)
        let lifetime = freshnessLifetime(response)
        // no-cache: stored, but never used without validation (RFC 9111 §5.2.2.4).
        let fresh = !control.noCache && age < lifetime
        // must-revalidate (and no-cache) forbid serving stale, even when the origin fails.
        let staleAllowed = !control.mustRevalidate && !control.noCache
        let staleness = age - lifetime
        return Evaluation(
            isFresh: fresh,
            mayServeWhileRevalidating: !fresh && staleAllowed
                && control.staleWhileRevalidate.map { staleness < TimeInterval($0) } ?? false,
            mayServeOnError: staleAllowed && control.staleIfError.map { staleness < TimeInterval($0) } ?? false,
            isImmutable: fresh && control.immutable, forbidsStale: !staleAllowed,
            age: age, lifetime: lifetime)
    }

    /// Whether a stored response may answer while its origin cannot be reached: stale
    /// by less than `window` past its freshness, and not forbidden to be used stale.
    func mayServeWhenUnreachable(_ evaluation: Evaluation, within window: TimeInterval?) -> Bool {
        guard useServerCachePolicy else { return true }
        guard let window, !evaluation.forbidsStale else { return false }
        return evaluation.age - evaluation.lifetime < window
    }

    /// Whether a stored response answers a request with these header values (Vary).
    func matchesVary(_ response: StoredResponse, requestHeaders: [HeaderField]) -> Bool {
        let names = response.varyNames
        if names.contains("*") { return false }
        for name in names {
            let current = HTTPCachePolicy.normalized(
                requestHeaders.values(named: name).joined(separator: ","))
            if current != (response.varyingRequestHeaders[name] ?? "") { return false }
        }
        return true
    }

    /// The request header values a response's Vary names, to store with it.
    func varyingRequestHeaders(for response: StoredResponse, requestHeaders: [HeaderField]) -> [String: String] {
        var values: [String: String] = [:]
        for name in response.varyNames where name != "*" {
            values[name] = HTTPCachePolicy.normalized(
                requestHeaders.values(named: name).joined(separator: ","))
        }
        return values
    }

    private static func normalized(_ value: String) -> String {
        value.split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ")
    }

    /// The validators to send: the stored ETag exactly (a weak one keeps its W/) in
    /// If-None-Match, and the stored Last-Modified exactly in If-Modified-Since.
    func conditionalHeaders(for response: StoredResponse) -> [HeaderField] {
        var fields: [HeaderField] = []
        if let etag = response.value("ETag") { fields.append(HeaderField("If-None-Match", etag)) }
        if let lastModified = response.value("Last-Modified") {
            fields.append(HeaderField("If-Modified-Since", lastModified))
        }
        return fields
    }

    /// Whether a 304 is about this stored response: a 304 naming another entity tag is not.
    func notModified(_ headers: [HeaderField], matches response: StoredResponse) -> Bool {
        guard let received = headers.first(named: "ETag"),
            let stored = response.value("ETag")
        else { return true }
        func opaque(_ tag: String) -> String { tag.hasPrefix("W/") ? String(tag.dropFirst(2)) : tag }
        return opaque(received) == opaque(stored)
    }

    /// The stored response updated by a 304 (RFC 9111 §3.2, §4.3.4): its header fields
    /// replace the stored ones (except Content-Length and hop-by-hop fields), and the
    /// exchange's times become the response's, so its age starts again.
    func updating(
        _ response: StoredResponse, with notModified: [HeaderField], requestTime: Date, responseTime: Date,
        connectedAddresses: [String]? = nil
    ) -> StoredResponse {
        let updates = notModified.filter { !HTTPCachePolicy.notUpdatedBy304.contains($0.name.lowercased()) }
        let replaced = Set(updates.map { $0.name.lowercased() })
        var updated = response
        updated.headers = response.headers.filter { !replaced.contains($0.name.lowercased()) } + updates
        updated.requestTime = requestTime
        updated.responseTime = responseTime
        updated.connectedAddresses = connectedAddresses
        return updated
    }
}
