import Crypto
import Foundation
import ImageLoader
import ImageLoaderSupport
import Logging

struct S3Store: ObjectStore {
    let region: String
    let endpoint: URL?
    let usesPathStyle: Bool
    let credentials: AWSCredentialProvider
    /// The endpoint as text without a trailing `/`, and its scheme (worked out once).
    private let endpointText: String
    private let endpointScheme: String

    init(_ configuration: S3Configuration, credentials: AWSCredentialProvider) {
        var region = configuration.region
        if region.isEmpty {
            var environment = ProcessInfo.processInfo.environment
            if case .standardWith(let custom) = configuration.credentials { environment = custom }
            region = AWSCredentialProvider.configuredRegion(environment: environment) ?? "us-east-1"
        }
        self.region = region
        endpoint = configuration.endpoint
        usesPathStyle = configuration.usesPathStyle
        self.credentials = credentials
        var text = configuration.endpoint?.absoluteString ?? ""
        while text.hasSuffix("/") { text.removeLast() }
        endpointText = text
        endpointScheme = configuration.endpoint?.scheme ?? "https"
    }

    /// Scheme and authority, and the path prefix, for `bucket`.
    private func base(_ bucket: String) -> (origin: String, path: String) {
        let encodedBucket = SignatureV4.encode(bucket, keepsSlash: false)
        if endpoint != nil {
            if usesPathStyle { return (endpointText, "/" + encodedBucket) }
            let authority = endpointText.dropFirst(endpointScheme.count + 3)
            return ("\(endpointScheme)://\(bucket).\(authority)", "")
        }
        let host = "s3.\(region).amazonaws.com"
        // Names with dots break the certificate's wildcard: path style for those.
        let virtual = !bucket.contains(".") && bucket == bucket.lowercased()
        return virtual ? ("https://\(bucket).\(host)", "") : ("https://\(host)", "/" + encodedBucket)
    }

    func read(_ object: ObjectLocation, headers: [HeaderField]) async throws -> DataRequest {
        try await read(object, headers: headers, at: Date())
    }

    func read(_ object: ObjectLocation, headers: [HeaderField], at date: Date) async throws -> DataRequest {
        try await signed(
            "GET", object, query: object.version.map { [("versionId", $0)] } ?? [], headers: headers, body: nil,
            at: date)
    }

    func write(_ object: ObjectLocation, body: [UInt8], contentType: String, metadata: [String: String]) async throws
        -> DataRequest
    {
        try await write(object, body: body, contentType: contentType, metadata: metadata, at: Date())
    }

    func write(
        _ object: ObjectLocation, body: [UInt8], contentType: String, metadata: [String: String], at date: Date
    ) async throws -> DataRequest {
        var headers = [HeaderField("Content-Type", contentType)]
        for (name, value) in metadata.sorted(by: { $0.key < $1.key }) {
            headers.append(HeaderField(metadataName(name), value))
        }
        return try await signed("PUT", object, query: [], headers: headers, body: body, at: date)
    }

    func metadataName(_ name: String) -> String { "x-amz-meta-" + name }

    private func signed(
        _ method: String, _ object: ObjectLocation, query: [(name: String, value: String)], headers: [HeaderField],
        body: [UInt8]?, at date: Date
    ) async throws -> DataRequest {
        let (origin, prefix) = base(object.bucket)
        let path = prefix + "/" + SignatureV4.encode(object.key, keepsSlash: true)
        let queryText = query.isEmpty ? "" : "?" + SignatureV4.canonicalQuery(query)
        guard let url = URL(string: origin + path + queryText), let host = url.host else {
            throw ImageLoadingError(.unsupportedURL, url: "s3://\(object.bucket)/")
        }
        var request = DataRequest(url: url, headers: headers)
        request.method = method
        request.body = body
        guard let credentials = try await credentials.credentials() else { return request }
        let authority = url.port.map { "\(host):\($0)" } ?? host
        let payloadHash = body.map { Hex.lowercase(Array(SHA256.hash(data: $0))) } ?? SignatureV4.emptyPayloadHash
        var signedFields: [(name: String, value: String)] = [
            ("host", authority), ("x-amz-content-sha256", payloadHash),
            ("x-amz-date", SignatureV4.timestamps(date).stamp),
        ]
        if let token = credentials.sessionToken { signedFields.append(("x-amz-security-token", token)) }
        // What a write says of its content is signed too: a proxy cannot change it.
        for field in headers where field.name.lowercased().hasPrefix("x-amz-") || field.hasName("Content-Type") {
            signedFields.append((field.name, field.value))
        }
        let signer = SignatureV4(credentials: credentials, region: region, service: "s3")
        let signature = signer.sign(
            SignatureV4.Request(
                method: method, path: path, query: query, headers: signedFields, payloadHash: payloadHash),
            at: date)
        for (name, value) in signedFields where name != "host" && !headers.contains(where: { $0.hasName(name) }) {
            request.headers.append(HeaderField(name, value))
        }
        request.headers.append(HeaderField("Authorization", signature.authorization))
        return request
    }
}
