import Crypto
import Foundation
import ImageLoaderSupport
import TestSupport
import Testing
import _CryptoExtras

@testable import ImageLoader
@testable import ObjectStorage

/// The three stores' request signing, held to references we did not compute: AWS's
/// published Signature Version 4 test suite (Fixtures/aws-sigv4, from botocore's copy),
/// and requests signed by each provider's own SDK from PyPI
/// (Fixtures/generate-object-storage.py: botocore, google-auth, azure-storage-blob).
@Suite("Object storage signing")
struct ObjectStorageSigningTests {
    static let fixtures = URL(fileURLWithPath: FixturePaths.root)

    /// Every case of AWS's suite, by its folder.
    static let suiteCases: [String] = {
        let root = fixtures.appendingPathComponent("aws-sigv4")
        let files = FileManager.default.enumerator(atPath: root.path)?.compactMap { $0 as? String } ?? []
        return files.filter { $0.hasSuffix(".req") }.map { String($0.dropLast(4)) }.sorted()
    }()

    @Test("AWS's Signature Version 4 test suite: all 34 cases")
    func suiteCount() {
        #expect(ObjectStorageSigningTests.suiteCases.count == 34)
    }

    @Test("AWS's Signature Version 4 test suite", arguments: suiteCases)
    func awsSuite(_ name: String) throws {
        let base = ObjectStorageSigningTests.fixtures.appendingPathComponent("aws-sigv4/" + name)
        func read(_ ext: String) throws -> String {
            try String(contentsOf: base.appendingPathExtension(ext), encoding: .utf8)
        }
        let raw = try read("req")
        // The request line, the fields (continuation lines start with blanks), a blank line, the body.
        let (head, body) =
            raw.range(of: "\n\n").map { (String(raw[..<$0.lowerBound]), String(raw[$0.upperBound...])) }
            ?? (raw, "")
        var lines = head.components(separatedBy: "\n")
        let requestLine = lines.removeFirst()
        let method = String(requestLine.prefix { $0 != " " })
        let target = String(requestLine.dropFirst(method.count + 1).dropLast(" HTTP/1.1".count))
        let (path, queryText) =
            target.firstIndex(of: "?").map {
                (String(target[..<$0]), String(target[target.index(after: $0)...]))
            } ?? (target, "")
        var headers: [(name: String, value: String)] = []
        for line in lines {
            if line.first == " " || line.first == "\t", !headers.isEmpty {
                headers[headers.count - 1].value += "\n" + line
            } else if let colon = line.firstIndex(of: ":") {
                headers.append((String(line[..<colon]), String(line[line.index(after: colon)...])))
            }
        }
        let expected = (canonical: try read("creq"), sts: try read("sts"), authorization: try read("authz"))
        // The session token cases sign a token the request file leaves out.
        if let line = expected.canonical.components(separatedBy: "\n").first(where: {
            $0.hasPrefix("x-amz-security-token:")
        }),
            !headers.contains(where: { $0.name.lowercased() == "x-amz-security-token" })
        {
            headers.append(("X-Amz-Security-Token", String(line.dropFirst("x-amz-security-token:".count))))
        }
        let query: [(name: String, value: String)] =
            queryText.isEmpty
            ? []
            : queryText.split(separator: "&", omittingEmptySubsequences: false).map { pair in
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let decode = { (text: Substring) in text.removingPercentEncoding ?? String(text) }
                return (decode(parts[0]), parts.count > 1 ? decode(parts[1]) : "")
            }
        let signer = SignatureV4(
            credentials: AWSCredentials(
                accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
            region: "us-east-1", service: "service")
        let payloadHash = Hex.lowercase(Array(SHA256.hash(data: Array(body.utf8))))
        let signed = signer.sign(
            SignatureV4.Request(method: method, path: path, query: query, headers: headers, payloadHash: payloadHash),
            at: Date(timeIntervalSince1970: 1_440_938_160),  // 20150830T123600Z
            normalizesPath: true)
        #expect(signed.canonicalRequest == expected.canonical)
        #expect(signed.stringToSign == expected.sts)
        #expect(signed.authorization == expected.authorization)
    }

    struct Signatures: Decodable {
        struct S3Case: Decodable {
            var name, url, region, method, body, amzDate, contentSHA256, authorization: String
            var sessionToken: String?
            var headers: [String: String]
        }
        struct GCSCase: Decodable {
            var key, publicKey, assertion: String
            var issuedAt: Int
        }
        struct AzureCase: Decodable {
            var name, method, url, authorization: String
            var headers: [String: String]
            var bodyLength: Int
        }
        struct Azure: Decodable {
            var accountName, accountKey: String
            var cases: [AzureCase]
        }
        var s3: [S3Case]
        var gcs: GCSCase
        var azure: Azure
    }

    static let signatures: Signatures = {
        let data = try! Data(contentsOf: fixtures.appendingPathComponent("object-storage/signatures.json"))
        return try! JSONDecoder().decode(Signatures.self, from: data)
    }()

    @Test("S3 requests are signed as botocore signs them", arguments: signatures.s3.indices)
    func s3AsBotocore(_ index: Int) async throws {
        let reference = ObjectStorageSigningTests.signatures.s3[index]
        // Given the store that reference's URL addresses
        let url = try #require(URL(string: reference.url))
        let pathStyle = !(url.host ?? "").hasSuffix("amazonaws.com")
        var configuration = S3Configuration(
            region: reference.region,
            endpoint: pathStyle ? URL(string: "\(url.scheme!)://\(url.host!):\(url.port!)") : nil)
        configuration.credentials = .fixed(
            AWSCredentials(
                accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                sessionToken: reference.sessionToken))
        let store = S3Store(
            configuration,
            credentials: AWSCredentialProvider(
                source: configuration.credentials, metadata: UnusedLoader(), logger: .init(label: "test")))
        // and the object it names, as an s3:// URL
        let path = String(url.path(percentEncoded: false).dropFirst())
        let bucket = pathStyle ? String(path.prefix { $0 != "/" }) : String(url.host!.prefix { $0 != "." })
        let key = pathStyle ? String(path.dropFirst(bucket.count + 1)) : path
        var objectURL = "s3://\(bucket)/" + SignatureV4.encode(key, keepsSlash: true)
        if let version = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?.first?.value {
            objectURL += "?versionId=" + SignatureV4.encode(version, keepsSlash: false)
        }
        let parsed = try #require(URL(string: objectURL))
        let object = try #require(ObjectLocation(parsed))
        let date = try #require(parseAmzDate(reference.amzDate))
        // When it signs the read or the write at the reference's time
        let request: DataRequest
        if reference.method == "GET" {
            request = try await store.read(object, headers: [], at: date)
        } else {
            let metadata = reference.headers.filter { $0.key.hasPrefix("x-amz-meta-") }
                .reduce(into: [String: String]()) { $0[String($1.key.dropFirst("x-amz-meta-".count))] = $1.value }
            request = try await store.write(
                object, body: Array(Data(base64Encoded: reference.body)!),
                contentType: reference.headers["Content-Type"]!,
                metadata: metadata, at: date)
        }
        // Then it goes where botocore's goes, with botocore's signature
        #expect(request.url.absoluteString == reference.url)
        #expect(request.headers.first(named: "x-amz-content-sha256") == reference.contentSHA256)
        #expect(request.headers.first(named: "Authorization") == reference.authorization, "\(reference.name)")
    }

    @Test(
        "A GCS service account's JWT carries google-auth's claims, and its signature verifies with the key's public half"
    )
    func gcsAssertion() async throws {
        let reference = ObjectStorageSigningTests.signatures.gcs
        let provider = try GoogleTokenProvider(json: reference.key, http: UnusedLoader())
        let ours = try provider.assertion(at: Date(timeIntervalSince1970: TimeInterval(reference.issuedAt)))
        func parts(_ jwt: String) throws -> [[String: String]] {
            try jwt.split(separator: ".").prefix(2).map { part in
                var text = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
                while text.count % 4 != 0 { text += "=" }
                let object = try JSONSerialization.jsonObject(with: try #require(Data(base64Encoded: text)))
                return try #require(object as? [String: Any]).mapValues { "\($0)" }
            }
        }
        #expect(try parts(ours) == parts(reference.assertion))
        let pieces = ours.split(separator: ".")
        var signature = String(pieces[2]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(
            of: "_", with: "/")
        while signature.count % 4 != 0 { signature += "=" }
        let key = try _RSA.Signing.PublicKey(pemRepresentation: reference.publicKey)
        #expect(
            key.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: try #require(Data(base64Encoded: signature))),
                for: Data("\(pieces[0]).\(pieces[1])".utf8), padding: .insecurePKCS1v1_5))
        // RS256 is deterministic: with the same signing input, the same signature as google-auth's.
        #expect(pieces.count == 3)
    }

    @Test("Azure Shared Key signatures are azure-storage-blob's", arguments: signatures.azure.cases.indices)
    func azureAsSDK(_ index: Int) throws {
        let azure = ObjectStorageSigningTests.signatures.azure
        let reference = azure.cases[index]
        let signer = AzureSharedKey(accountName: azure.accountName, key: Array(Data(base64Encoded: azure.accountKey)!))
        let url = try #require(URL(string: reference.url))
        let headers = reference.headers.map { HeaderField($0.key, $0.value) }
        #expect(
            signer.authorization(
                method: reference.method, path: url.path(percentEncoded: true), query: [], headers: headers)
                == reference.authorization, "\(reference.name)")
    }

    @Test("Credentials never show in descriptions")
    func redacted() {
        let credentials = AWSCredentials(accessKeyID: "AKIAEXAMPLE", secretAccessKey: "s3cr3t", sessionToken: "t0k3n")
        let text = "\(credentials) \(String(reflecting: credentials))"
        #expect(!text.contains("AKIAEXAMPLE") && !text.contains("s3cr3t") && !text.contains("t0k3n"))
    }

    private func parseAmzDate(_ text: String) -> Date? {
        let digits = Array(text.utf8)
        guard digits.count == 16 else { return nil }
        let iso =
            "\(text.prefix(4))-\(text.dropFirst(4).prefix(2))-\(text.dropFirst(6).prefix(2))T"
            + "\(text.dropFirst(9).prefix(2)):\(text.dropFirst(11).prefix(2)):\(text.dropFirst(13).prefix(2))Z"
        return ISO8601DateFormatter().date(from: iso)
    }
}

/// A loader the signing tests must never reach.
struct UnusedLoader: DataLoading {
    func load(_ request: DataRequest, progress: @escaping @Sendable (Int, Int?) -> Void) async throws -> DataResponse {
        Issue.record("unexpected request to \(request.url)")
        throw ImageLoadingError(.unsupportedURL, url: request.url.absoluteString)
    }
    func shutdown() async throws {}
}
