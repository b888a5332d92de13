import Crypto
import Foundation
import ImageLoader

/// Azure Storage's Shared Key authorization (the Blob service's form, version
/// 2009-09-19 and later): an HMAC-SHA256, with the account's key, over the method, the
/// standard header fields, the `x-ms-` fields and the resource.
struct AzureSharedKey: Sendable {
    var accountName: String
    /// The account key, decoded from base64.
    var key: [UInt8]

    /// The string to sign for a request, as Microsoft's "Authorize with Shared Key" lists it.
    func stringToSign(method: String, path: String, query: [(name: String, value: String)], headers: [HeaderField])
        -> String
    {
        func value(_ name: String) -> String { headers.first(named: name) ?? "" }
        var length = value("Content-Length")
        if length == "0" { length = "" }
        let standard = [
            method.uppercased(), value("Content-Encoding"), value("Content-Language"), length, value("Content-MD5"),
            value("Content-Type"), value("Date"), value("If-Modified-Since"), value("If-Match"), value("If-None-Match"),
            value("If-Unmodified-Since"), value("Range"),
        ]
        var fields: [String: String] = [:]
        for field in headers where field.name.lowercased().hasPrefix("x-ms-") {
            fields[field.name.lowercased()] = SignatureV4.trimmed(field.value)
        }
        // The service sorts names as Windows does, hyphens ignored first.
        let names = fields.keys.sorted { a, b in
            let (x, y) = (a.replacingOccurrences(of: "-", with: ""), b.replacingOccurrences(of: "-", with: ""))
            return x == y ? a < b : x < y
        }
        let canonicalHeaders = names.map { "\($0):\(fields[$0]!)" }
        var resource = "/" + accountName + path
        var parameters: [String: [String]] = [:]
        for (name, value) in query { parameters[name.lowercased(), default: []].append(value) }
        for name in parameters.keys.sorted() {
            resource += "\n\(name):" + parameters[name]!.sorted().joined(separator: ",")
        }
        return (standard + canonicalHeaders + [resource]).joined(separator: "\n")
    }

    /// The `Authorization` value for the request.
    func authorization(method: String, path: String, query: [(name: String, value: String)], headers: [HeaderField])
        -> String
    {
        let text = stringToSign(method: method, path: path, query: query, headers: headers)
        let mac = HMAC<SHA256>.authenticationCode(for: Array(text.utf8), using: SymmetricKey(data: key))
        return "SharedKey \(accountName):" + Data(mac).base64EncodedString()
    }
}
