import Crypto
import Foundation
import ImageLoaderSupport

/// Checks imgproxy-style URL signatures: the base64url (unpadded) HMAC-SHA256, under a
/// key, of a salt followed by the path after the signature segment (its leading `/`
/// included, as the service repairs it). Several key and salt pairs may be valid at once,
/// so keys can be rotated without breaking published URLs.
///
/// ```swift
/// let signature = try URLSignature(hexPairs: [(key: "943b42...", salt: "520f98...")])
/// signature.isValid("Doh68Kklui8ULk4PZhaEESn42s4sw40HsXB7pNJvuvI", for: "/rs:fill:300:400:0/...")
/// ```
public struct URLSignature: Sendable {
    /// One key and its salt, as bytes.
    public struct Pair: Sendable {
        let key: SymmetricKey
        let salt: [UInt8]

        /// A key and its salt, as bytes.
        public init(key: [UInt8], salt: [UInt8]) {
            self.key = SymmetricKey(data: key)
            self.salt = salt
        }
    }

    /// A key or salt that is not hexadecimal, or an empty key.
    public struct InvalidKey: Error, Sendable, CustomStringConvertible {
        /// Which key or salt, and why.
        public let description: String
        /// The pair at fault, from 0 (`nil` when the signature size is at fault).
        public var pairIndex: Int? = nil
        /// Whether the pair's salt is at fault, rather than its key.
        public var isSalt = false
    }

    /// The pairs a signature may be made with; the first signs.
    public let pairs: [Pair]
    /// Bytes of the HMAC a signature carries, 1 to 32 (imgproxy's `IMGPROXY_SIGNATURE_SIZE`):
    /// fewer make shorter URLs and signatures easier to guess.
    public let size: Int
    /// Signature texts accepted as they are, for any path (imgproxy's
    /// `IMGPROXY_TRUSTED_SIGNATURES`: URLs signed by hand for a known client).
    public var trusted: Set<String> = []

    /// Whether `text` is one of the ``trusted`` signatures.
    public func isTrusted(_ text: some StringProtocol) -> Bool { !trusted.isEmpty && trusted.contains(String(text)) }

    /// Signatures under any of `pairs`, truncated to `size` bytes.
    public init(pairs: [Pair], size: Int = 32) {
        self.pairs = pairs
        self.size = max(1, min(SHA256.byteCount, size))
    }

    /// Pairs given in hexadecimal (`--key`/`--salt`, `IMGPROXY_KEY`/`IMGPROXY_SALT`),
    /// signatures of `size` bytes.
    public init(hexPairs: [(key: String, salt: String)], size: Int = 32) throws(InvalidKey) {
        guard (1...SHA256.byteCount).contains(size) else {
            throw InvalidKey(description: "the signature size must be 1 to 32 bytes")
        }
        self.size = size
        var pairs: [Pair] = []
        for (index, pair) in hexPairs.enumerated() {
            guard let key = URLSignature.bytes(hex: pair.key), !key.isEmpty else {
                throw InvalidKey(
                    description: "key \(index + 1) is not a non-empty hexadecimal string", pairIndex: index)
            }
            guard let salt = URLSignature.bytes(hex: pair.salt) else {
                throw InvalidKey(
                    description: "salt \(index + 1) is not a hexadecimal string", pairIndex: index, isSalt: true)
            }
            pairs.append(Pair(key: key, salt: salt))
        }
        self.pairs = pairs
    }

    /// The signature of `path` under the first pair: what a URL builder writes.
    public func sign(_ path: some StringProtocol) -> String {
        guard let pair = pairs.first else { return "" }
        return Base64URL.encode(Array(URLSignature.mac(pair, Array(path.utf8)).prefix(size)))
    }

    /// Whether `signature` is the signature of `path` under one of the pairs. Every
    /// pair is checked, and each comparison takes the same time whatever the bytes
    /// (no early exit), so the timing tells nothing about how close a guess was.
    public func isValid(_ signature: some StringProtocol, for path: some StringProtocol) -> Bool {
        guard let given = Base64URL.decode(signature), given.count == size else { return false }
        let message = Array(path.utf8)
        var valid = false
        for pair in pairs {
            let expected = URLSignature.mac(pair, message)
            var difference: UInt8 = 0
            for index in 0..<size { difference |= expected[index] ^ given[index] }
            valid = valid || difference == 0
        }
        return valid
    }

    private static func mac(_ pair: Pair, _ message: [UInt8]) -> [UInt8] {
        var hmac = HMAC<SHA256>(key: pair.key)
        hmac.update(data: pair.salt)
        hmac.update(data: message)
        return Array(hmac.finalize())
    }

    /// Bytes from hexadecimal text (either case), or `nil`.
    static func bytes(hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
