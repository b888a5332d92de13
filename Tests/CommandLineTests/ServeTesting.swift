import AsyncHTTPClient
import Foundation
import ImageLoaderSupport
import ImageService
import NIOHTTP1
import RasterImage
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What the `imageloader serve` suites share: the signing key and salt, the images'
/// folder, and a served process for the length of a body.
protocol ServeTesting {}

extension ServeTesting {
    static var key: String { "943b421c9eb07c830af81030552c86009268de4e532ba2ee2eab8247c6da0881" }
    static var salt: String { "520f986b998545b4785e0defbc4f3c1203f22de2374a3d53cb7a7fe9fea309c5" }
    static var images: String { Command.fixture("images") }
    static var jpeg: (String, String) { ("Content-Type", "image/jpeg") }

    /// Starts a server, runs `body`, and stops the server whatever happens.
    func serving(_ arguments: [String], _ body: (ServedProcess) async throws -> Void) async throws {
        let server = try await ServedProcess.start(arguments)
        defer { server.kill() }
        try await body(server)
    }

    func decoded(_ answer: ServedProcess.Answer) throws -> RasterImage {
        try ImageDecoder().decode(.bytes(answer.body))
    }

    /// base64url of `text`, as imgproxy's URL builders write it.
    func encoded(_ text: String) -> String {
        Base64URL.encode(Array(text.utf8))
    }
}
