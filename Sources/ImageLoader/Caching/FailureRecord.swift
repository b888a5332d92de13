import Foundation

/// A failure the loader remembers for a URL (error caching).
struct FailureRecord: Codable, Sendable, Equatable {
    var url: String
    /// The HTTP status, or `nil` for a failure without a response.
    var status: Int?
    var message: String
    var attempts: Int
    /// Until when the failure counts.
    var expires: Date
}
