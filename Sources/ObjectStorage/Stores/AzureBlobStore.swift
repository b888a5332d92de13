import Crypto
import Foundation
import ImageLoader
import ImageLoaderSupport
import Logging

struct AzureBlobStore: ObjectStore {
    let endpoint: String
    let signer: AzureSharedKey?
    /// The service version the requests speak.
    static let version = "2021-08-06"

    init(_ configuration: AzureBlobConfiguration) throws(ImageLoadingError) {
        var text =
            configuration.endpoint?.absoluteString ?? "https://\(configuration.accountName).blob.core.windows.net"
        while text.hasSuffix("/") { text.removeLast() }
        endpoint = text
        if let key = configuration.accountKey, !key.isEmpty {
            guard let decoded = Data(base64Encoded: key) else {
                throw ImageLoadingError(.credentials("the Azure account key is not base64"), url: "abs://")
            }
            signer = AzureSharedKey(accountName: configuration.accountName, key: Array(decoded))
        } else {
            signer = nil
        }
    }

    func read(_ object: ObjectLocation, headers: [HeaderField]) async throws -> DataRequest {
        try signed("GET", object, headers: headers, body: nil)
    }

    func write(_ object: ObjectLocation, body: [UInt8], contentType: String, metadata: [String: String]) async throws
        -> DataRequest
    {
        var headers = [HeaderField("Content-Type", contentType), HeaderField("x-ms-blob-type", "BlockBlob")]
        for (name, value) in metadata.sorted(by: { $0.key < $1.key }) {
            headers.append(HeaderField(metadataName(name), value))
        }
        return try signed("PUT", object, headers: headers, body: body)
    }

    func metadataName(_ name: String) -> String { "x-ms-meta-" + name }

    private func signed(_ method: String, _ object: ObjectLocation, headers: [HeaderField], body: [UInt8]?) throws
        -> DataRequest
    {
        let text =
            endpoint + "/" + SignatureV4.encode(object.bucket, keepsSlash: false) + "/"
            + SignatureV4.encode(object.key, keepsSlash: true)
        guard let url = URL(string: text) else {
            throw ImageLoadingError(.unsupportedURL, url: "abs://\(object.bucket)/")
        }
        var request = DataRequest(url: url, headers: headers)
        request.method = method
        request.body = body
        request.headers.append(HeaderField("x-ms-date", HTTPDate.format(Date())))
        request.headers.append(HeaderField("x-ms-version", AzureBlobStore.version))
        if let signer {
            // The length is signed; the HTTP client writes the field itself.
            let signing = request.headers + (body.map { [HeaderField("Content-Length", "\($0.count)")] } ?? [])
            request.headers.append(
                HeaderField(
                    "Authorization",
                    signer.authorization(
                        method: method, path: url.path(percentEncoded: true), query: [], headers: signing)))
        }
        return request
    }
}
