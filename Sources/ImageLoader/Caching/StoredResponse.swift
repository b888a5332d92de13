import Foundation

/// One header field as received.
public struct HeaderField: Codable, Sendable, Hashable {
    public var name: String
    public var value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// A response as the disk cache keeps it: what RFC 9111 needs to judge its freshness
/// and to revalidate it, and when it was requested and received.
public struct StoredResponse: Codable, Sendable, Hashable {
    /// The cache key: the URL as requested, with its query.
    public var url: String
    public var status: Int
    /// Every end-to-end header field of the response, in order.
    public var headers: [HeaderField]
    /// The request header values the response's Vary names (lowercased names).
    public var varyingRequestHeaders: [String: String]
    /// When the request that got this response (or its last revalidation) was sent.
    public var requestTime: Date
    /// When that response arrived.
    public var responseTime: Date

    public init(
        url: String, status: Int, headers: [HeaderField], varyingRequestHeaders: [String: String] = [:],
        requestTime: Date, responseTime: Date
    ) {
        self.url = url
        self.status = status
        self.headers = headers
        self.varyingRequestHeaders = varyingRequestHeaders
        self.requestTime = requestTime
        self.responseTime = responseTime
    }

    /// Every value of a header field (names compare case-insensitively).
    public func values(_ name: String) -> [String] {
        headers.filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.map(\.value)
    }

    /// The first value of a header field.
    public func value(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    var cacheControl: CacheControl { CacheControl(headerValues: values("Cache-Control")) }

    /// The field names listed by Vary, lowercased; `["*"]` for Vary: *.
    var varyNames: [String] {
        values("Vary").flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            .filter { !$0.isEmpty }
    }
}
