import Crypto
import Foundation
import ImageLoader
import ImageLoaderSupport

/// AWS Signature Version 4 (the `AWS4-HMAC-SHA256` scheme), as AWS's "Signature Version 4
/// signing process" describes it: a canonical request, a string to sign over its hash,
/// a key derived from the secret by date, region and service, and the signature over
/// the string. S3, R2, MinIO, Ceph and GCS's interoperability endpoint all take it.
///
/// The signer is a pure function of its inputs, so it is checked against AWS's
/// published test suite (canonical request, string to sign and header for each case).
struct SignatureV4: Sendable {
    /// The key pair (and session token) that signs.
    var credentials: AWSCredentials
    /// The region in the credential scope (`us-east-1`; `auto` for R2).
    var region: String
    /// The service in the credential scope (`s3`).
    var service: String

    /// One request, as it will be sent.
    struct Request {
        var method: String
        /// The path as sent: already percent-encoded, starting with `/`.
        var path: String
        /// Query parameters, decoded; encoded here as SigV4 requires.
        var query: [(name: String, value: String)]
        /// Every header field that is signed (`host` included).
        var headers: [(name: String, value: String)]
        /// The payload's SHA-256 in lowercase hex (or `UNSIGNED-PAYLOAD`).
        var payloadHash: String
    }

    /// What signing produced: the pieces (for tests and logs without secrets) and the header.
    struct Signed {
        var canonicalRequest: String
        var stringToSign: String
        var authorization: String
    }

    /// The hex SHA-256 of an empty payload.
    static let emptyPayloadHash = Hex.lowercase(SHA256.hash(data: [UInt8]()))

    /// Signs `request` at `date`. `normalizesPath`: every service but S3 signs the path
    /// with `.` and `..` segments resolved and encoded a second time; S3 signs it as sent.
    func sign(_ request: Request, at date: Date, normalizesPath: Bool = false) -> Signed {
        let (stamp, day) = SignatureV4.timestamps(date)
        var headers: [String: [String]] = [:]
        for (name, value) in request.headers {
            headers[name.lowercased(), default: []].append(SignatureV4.trimmed(value))
        }
        let names = headers.keys.sorted()
        let canonicalHeaders = names.map { "\($0):\(headers[$0]!.joined(separator: ","))\n" }.joined()
        let signedHeaders = names.joined(separator: ";")
        let path =
            normalizesPath ? SignatureV4.encode(SignatureV4.normalized(request.path), keepsSlash: true) : request.path
        let canonicalRequest = [
            request.method, path, SignatureV4.canonicalQuery(request.query), canonicalHeaders, signedHeaders,
            request.payloadHash,
        ].joined(separator: "\n")
        let scope = "\(day)/\(region)/\(service)/aws4_request"
        let stringToSign = [
            "AWS4-HMAC-SHA256", stamp, scope, Hex.lowercase(Array(SHA256.hash(data: Array(canonicalRequest.utf8)))),
        ].joined(separator: "\n")
        let key = signingKey(day: day)
        let signature = Hex.lowercase(
            Array(HMAC<SHA256>.authenticationCode(for: Array(stringToSign.utf8), using: key)))
        let authorization =
            "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope), SignedHeaders=\(signedHeaders), "
            + "Signature=\(signature)"
        return Signed(canonicalRequest: canonicalRequest, stringToSign: stringToSign, authorization: authorization)
    }

    /// The key for `day`: four HMACs from the secret, the same all day, so kept (one
    /// per process and secret; a new day or secret replaces it).
    func signingKey(day: String) -> SymmetricKey {
        let identity = "\(day)/\(region)/\(service)/" + credentials.accessKeyID
        if let kept = SignatureV4.keptKey.withLock({ $0 }), kept.identity == identity,
            kept.secret == credentials.secretAccessKey
        {
            return kept.key
        }
        var key = SymmetricKey(data: Array("AWS4\(credentials.secretAccessKey)".utf8))
        for part in [day, region, service, "aws4_request"] {
            key = SymmetricKey(data: Array(HMAC<SHA256>.authenticationCode(for: Array(part.utf8), using: key)))
        }
        SignatureV4.keptKey.withLock { $0 = (identity, credentials.secretAccessKey, key) }
        return key
    }

    private static let keptKey = Lock<(identity: String, secret: String, key: SymmetricKey)?>(nil)

    /// `X-Amz-Date`'s form (`20150830T123600Z`) and the scope's day (`20150830`), in UTC.
    static func timestamps(_ date: Date) -> (stamp: String, day: String) {
        let f = HTTPDate.fields(date)
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let day = "\(f.year)" + two(f.month) + two(f.day)
        return (day + "T" + two(f.hour) + two(f.minute) + two(f.second) + "Z", day)
    }

    /// Query parameters encoded and sorted by name, then value, joined with `&`.
    static func canonicalQuery(_ query: [(name: String, value: String)]) -> String {
        let encoded: [(name: String, value: String)] = query.map { item in
            (encode(item.name, keepsSlash: false), encode(item.value, keepsSlash: false))
        }
        let sorted = encoded.sorted { a, b in a.name == b.name ? a.value < b.value : a.name < b.name }
        return sorted.map { item in item.name + "=" + item.value }.joined(separator: "&")
    }

    /// RFC 3986 percent-encoding as SigV4 wants it: unreserved characters (letters,
    /// digits, `-._~`) as they are, every other byte of the UTF-8 as `%XX` in capitals;
    /// `/` kept in paths.
    static func encode(_ text: String, keepsSlash: Bool) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            if SignatureV4.isUnreserved(byte) || (keepsSlash && byte == 0x2F) {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out +=
                    "%" + String(byte >> 4, radix: 16, uppercase: true) + String(byte & 15, radix: 16, uppercase: true)
            }
        }
        return out
    }

    /// Letters, digits and `-._~`.
    static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x41...0x5A, 0x61...0x7A, 0x30...0x39, 0x2D, 0x2E, 0x5F, 0x7E: true
        default: false
        }
    }

    /// A path with `.` and `..` segments resolved and runs of `/` merged (RFC 3986's
    /// remove_dot_segments, as the generic services sign it).
    static func normalized(_ path: String) -> String {
        var segments: [Substring] = []
        for segment in path.split(separator: "/", omittingEmptySubsequences: true) {
            switch segment {
            case ".": continue
            case "..": _ = segments.popLast()
            default: segments.append(segment)
            }
        }
        let joined = "/" + segments.joined(separator: "/")
        return path.hasSuffix("/") && joined != "/" ? joined + "/" : joined
    }

    /// A value with its ends trimmed and inner runs of spaces made one.
    static func trimmed(_ value: String) -> String {
        value.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" })
            .joined(separator: " ")
    }
}
