import Crypto
import Foundation
import ImageLoader
import ImageLoaderSupport
import _CryptoExtras

/// Access tokens for Google Cloud Storage: a service account's, by the OAuth 2.0 JWT
/// bearer flow Google documents for server-to-server use (a JWT signed with the
/// account's RSA key, RS256, exchanged at the key's `token_uri`), or the attached
/// service account's from the metadata server of a Google Cloud machine. Each is kept
/// until five minutes before it expires (``KeptCredential``: callers that ask during a
/// fetch share it).
final class GoogleTokenProvider: Sendable {
    /// The fields of a service account's JSON key that the flow uses.
    struct Key: Decodable, Sendable {
        var type: String?
        var clientEmail: String
        var privateKey: String
        var privateKeyID: String?
        var tokenURI: String?

        enum CodingKeys: String, CodingKey {
            case type
            case clientEmail = "client_email"
            case privateKey = "private_key"
            case privateKeyID = "private_key_id"
            case tokenURI = "token_uri"
        }
    }

    /// Read and write, for sources and results alike.
    static let scope = "https://www.googleapis.com/auth/devstorage.read_write"
    static let defaultTokenURI = "https://oauth2.googleapis.com/token"

    /// The service account's key; `nil` for the metadata server.
    private let key: Key?
    private let signingKey: _RSA.Signing.PrivateKey?
    /// The metadata server's token URL, when there is no key.
    private let metadataURL: URL?
    private let http: any DataLoading
    private let kept = KeptCredential<Token> { $0.expires.timeIntervalSinceNow > 300 }

    /// An access token and when it expires.
    struct Token: Sendable {
        var token: String
        var expires: Date
    }

    /// Parses `json` (a service account key); throws `.credentials` naming what is wrong,
    /// never the key's contents.
    init(json: String, http: any DataLoading) throws(ImageLoadingError) {
        guard let key = try? JSONDecoder().decode(Key.self, from: Data(json.utf8)) else {
            throw ImageLoadingError(
                .credentials("the GCS key is not a service account's JSON key (client_email, private_key)"),
                url: "gs://")
        }
        guard let signingKey = try? _RSA.Signing.PrivateKey(pemRepresentation: key.privateKey) else {
            throw ImageLoadingError(.credentials("the GCS key's private_key is not an RSA key in PEM"), url: "gs://")
        }
        self.key = key
        self.signingKey = signingKey
        self.http = http
        metadataURL = nil
    }

    /// Tokens of the machine's attached service account, from the metadata server
    /// (`GCE_METADATA_HOST`, else `metadata.google.internal`), as Google's libraries get them.
    init(metadataHost: String, http: any DataLoading) {
        key = nil
        signingKey = nil
        self.http = http
        metadataURL = URL(
            string: "http://\(metadataHost)/computeMetadata/v1/instance/service-accounts/default/token")
    }

    var tokenURI: String { key?.tokenURI ?? GoogleTokenProvider.defaultTokenURI }

    /// A current access token.
    func token() async throws -> String {
        try await kept.value { try await self.exchange() }.token
    }

    /// The signed assertion for `now`, as Google's client libraries write it: header
    /// `{"typ":"JWT","alg":"RS256","kid":...}`, claims iat, exp (an hour on), iss, aud, scope.
    func assertion(at now: Date) throws -> String {
        guard let key, let signingKey else {
            throw ImageLoadingError(.credentials("no key to sign with"), url: "gs://")
        }
        let issued = Int(now.timeIntervalSince1970.rounded(.down))
        let header = GoogleTokenProvider.json(AssertionHeader(kid: key.privateKeyID))
        let claims = GoogleTokenProvider.json(
            AssertionClaims(
                iat: issued, exp: issued + 3600, iss: key.clientEmail, aud: tokenURI, scope: GoogleTokenProvider.scope))
        let input =
            Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        let signature = try signingKey.signature(for: Data(input.utf8), padding: .insecurePKCS1v1_5)
        return input + "." + Base64URL.encode(Array(signature.rawRepresentation))
    }

    private struct AssertionHeader: Encodable {
        var typ = "JWT"
        var alg = "RS256"
        /// Left out when the key names none.
        var kid: String?
    }

    private struct AssertionClaims: Encodable {
        var iat: Int
        var exp: Int
        var iss: String
        var aud: String
        var scope: String
    }

    private struct TokenAnswer: Decodable {
        var accessToken: String?
        var expiresIn: Int?

        enum CodingKeys: String, CodingKey {
            case accessToken = "access_token"
            case expiresIn = "expires_in"
        }
    }

    private func exchange() async throws -> Token {
        if let metadataURL { return try await fromMetadataServer(metadataURL) }
        guard let url = URL(string: tokenURI) else {
            throw ImageLoadingError(.credentials("the GCS key's token_uri is not a URL"), url: "gs://")
        }
        let assertion: String
        do { assertion = try self.assertion(at: Date()) } catch {
            throw ImageLoadingError(.credentials("the GCS key cannot sign"), url: "gs://")
        }
        var request = DataRequest(url: url, headers: [HeaderField("Content-Type", "application/x-www-form-urlencoded")])
        request.method = "POST"
        request.body = Array(
            ("grant_type=" + SignatureV4.encode("urn:ietf:params:oauth:grant-type:jwt-bearer", keepsSlash: false)
                + "&assertion=" + assertion).utf8)
        let response = try await http.load(request) { _, _ in }
        guard response.status == 200,
            let answer = try? JSONDecoder().decode(TokenAnswer.self, from: Data(response.body)),
            let token = answer.accessToken, !token.isEmpty
        else {
            throw ImageLoadingError(
                .credentials("the token endpoint \(url.host ?? "") answered \(response.status) without a token"),
                url: "gs://")
        }
        let lifetime = TimeInterval(min(max(answer.expiresIn ?? 3600, 0), 86_400))
        return Token(token: token, expires: Date().addingTimeInterval(lifetime))
    }

    private func fromMetadataServer(_ url: URL) async throws -> Token {
        let response: DataResponse
        do {
            response = try await http.load(DataRequest(url: url, headers: [HeaderField("Metadata-Flavor", "Google")])) {
                _, _ in
            }
        } catch {
            throw ImageLoadingError(
                .credentials(
                    "no GCS key given and no metadata server answered (not on Google Cloud): give a service account's key"
                ),
                url: "gs://")
        }
        guard response.status == 200,
            let answer = try? JSONDecoder().decode(TokenAnswer.self, from: Data(response.body)),
            let token = answer.accessToken, !token.isEmpty
        else {
            throw ImageLoadingError(
                .credentials("the metadata server answered \(response.status) without a token"), url: "gs://")
        }
        let lifetime = TimeInterval(min(max(answer.expiresIn ?? 3600, 0), 86_400))
        return Token(token: token, expires: Date().addingTimeInterval(lifetime))
    }

    /// `value` as JSON text: keys sorted, slashes as they are (what Google's APIs read;
    /// encoding strings and numbers is JSONEncoder's, not written by hand).
    static func json(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Structs of strings, numbers and string dictionaries always encode.
        let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}
