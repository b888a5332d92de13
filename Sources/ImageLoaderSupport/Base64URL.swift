import Foundation

/// URL-safe base64 (RFC 4648 §5) without padding: imgproxy's signatures, sources and
/// entity tags, and the JWTs of Google service accounts.
package enum Base64URL {
    /// `bytes` as URL-safe base64, without padding.
    package static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Bytes from URL-safe base64, padded or not; `nil` for anything else.
    package static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var standard = ""
        standard.reserveCapacity(text.utf8.count + 3)
        for character in text.unicodeScalars {
            switch character {
            case "-": standard.append("+")
            case "_": standard.append("/")
            case "+", "/": return nil
            default: standard.unicodeScalars.append(character)
            }
        }
        while standard.utf8.count % 4 != 0 { standard.append("=") }
        return Data(base64Encoded: standard).map { [UInt8]($0) }
    }
}
