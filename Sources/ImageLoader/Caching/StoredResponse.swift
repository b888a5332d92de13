import Foundation

/// One header field as received.
public struct HeaderField: Codable, Sendable, Hashable {
    /// The field's name, as received.
    public var name: String
    /// The field's value.
    public var value: String

    /// A field named `name` with `value`.
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }

    /// Whether the field is called `other`: field names compare case-insensitively
    /// (RFC 9110, section 5.1), and are ASCII.
    public func hasName(_ other: String) -> Bool {
        let (a, b) = (name.utf8, other.utf8)
        guard a.count == b.count else { return false }
        return zip(a, b).allSatisfy { x, y in x == y || (x | 0x20 == y | 0x20 && (x | 0x20) &- 0x61 < 26) }
    }
}

extension Array where Element == HeaderField {
    /// The first value of the field called `name`.
    package func first(named name: String) -> String? {
        first { $0.hasName(name) }?.value
    }

    /// Every value of the field called `name`, in order.
    package func values(named name: String) -> [String] {
        filter { $0.hasName(name) }.map(\.value)
    }
}

/// A response as the disk cache keeps it: what RFC 9111 needs to judge its freshness
/// and to revalidate it, and when it was requested and received.
public struct StoredResponse: Codable, Sendable, Hashable {
    /// The cache key: the URL as requested, with its query.
    public var url: String
    /// The HTTP status code.
    public var status: Int
    /// Every end-to-end header field of the response, in order.
    public var headers: [HeaderField]
    /// The request header values the response's Vary names (lowercased names).
    public var varyingRequestHeaders: [String: String]
    /// When the request that got this response (or its last revalidation) was sent.
    public var requestTime: Date
    /// When that response arrived.
    public var responseTime: Date
    /// The addresses the response (or its last revalidation) came from, through every
    /// redirect, when they were checked against an address filter; `nil` when unknown
    /// (entries stored without a filter, or before this was kept).
    public var connectedAddresses: [String]?

    /// A stored response as the disk cache keeps it.
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
        headers.values(named: name)
    }

    /// The first value of a header field.
    public func value(_ name: String) -> String? {
        headers.first(named: name)
    }

    var cacheControl: CacheControl { CacheControl(headerValues: values("Cache-Control")) }

    /// The field names listed by Vary, lowercased; `["*"]` for Vary: *.
    var varyNames: [String] {
        values("Vary").flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            .filter { !$0.isEmpty }
    }
}
