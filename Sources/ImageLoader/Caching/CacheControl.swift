import Foundation
import ImageLoaderSupport
import RasterImage

/// The Cache-Control directives a private cache acts on (RFC 9111 §5.2, RFC 5861,
/// RFC 8246), parsed leniently: names are case-insensitive, values may be quoted,
/// unknown directives are ignored, and a malformed `max-age` marks the response stale.
package struct CacheControl: Equatable, Sendable {
    /// Seconds; `.some(0)` also stands for a `max-age` that could not be read.
    package var maxAge: Int?
    var noStore = false
    var noCache = false
    var mustRevalidate = false
    var immutable = false
    var staleWhileRevalidate: Int?
    var staleIfError: Int?

    package init(headerValues: [String]) {
        var seenMaxAge = false
        for value in headerValues {
            for directive in CacheControl.split(value) {
                let (name, argument) = directive
                switch name {
                case "max-age":
                    // A repeated or unreadable max-age: treat the response as stale (RFC 9111 §4.2.1).
                    maxAge = seenMaxAge ? 0 : (argument.flatMap(CacheControl.seconds) ?? 0)
                    seenMaxAge = true
                case "no-store": noStore = true
                case "no-cache": noCache = true
                case "must-revalidate", "proxy-revalidate": mustRevalidate = true
                case "immutable": immutable = true
                case "stale-while-revalidate": staleWhileRevalidate = argument.flatMap(CacheControl.seconds)
                case "stale-if-error": staleIfError = argument.flatMap(CacheControl.seconds)
                default: break
                }
            }
        }
    }

    /// The largest delta-seconds kept: 2^31, as RFC 9111 §1.2.2 allows for values
    /// too large to hold, so later sums of ages and lifetimes cannot overflow.
    static let maxDeltaSeconds = 1 << 31

    /// delta-seconds: digits only; values past ``maxDeltaSeconds`` are capped to it.
    static func seconds(_ text: String) -> Int? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Checked.decimal(text, limit: maxDeltaSeconds) ?? maxDeltaSeconds
    }

    /// "a, b=1, c=\"x, y\"" into (name, argument) pairs, honouring quotes.
    private static func split(_ value: String) -> [(String, String?)] {
        var result: [(String, String?)] = []
        var current = ""
        var quoted = false
        for character in value + "," {
            if character == "\"" { quoted.toggle() }
            if character == "," && !quoted {
                let trimmed = current.trimmingCharacters(in: .whitespaces)
                if !trimmed.isEmpty {
                    if let equals = trimmed.firstIndex(of: "=") {
                        let name = trimmed[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
                        var argument = trimmed[trimmed.index(after: equals)...].trimmingCharacters(in: .whitespaces)
                        if argument.hasPrefix("\"") && argument.hasSuffix("\"") && argument.count >= 2 {
                            argument = String(argument.dropFirst().dropLast())
                        }
                        result.append((name, argument))
                    } else {
                        result.append((trimmed.lowercased(), nil))
                    }
                }
                current = ""
            } else {
                current.append(character)
            }
        }
        return result
    }
}
