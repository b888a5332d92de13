import Foundation
import HTTPTypes
import Testing

@testable import ImageService

/// The stored form of a result in a bucket: what is written reads back the same, and
/// anything else (another program's object, a damaged or cut one) is no result.
@Suite("Result storage envelope")
struct ResultStorageTests {
    static func sample() -> ProcessedResult {
        var extra = HTTPFields()
        extra[HTTPField.Name("Link")!] = "<s3://photos/a.png>; rel=\"canonical\""
        let meta = ResponseMeta(
            status: 200, contentType: "image/webp", sourceTag: "\"abc\"",
            sourceLastModified: "Sat, 28 Nov 2026 12:00:00 GMT",
            entityTag: "\"abc\"", lastModified: "Sat, 28 Nov 2026 12:00:00 GMT", vary: "Accept",
            keepUntil: Date(timeIntervalSince1970: 1_900_000_000),
            caching: .until(Date(timeIntervalSince1970: 1_900_000_000), cap: 3600, otherwise: .maxAge(60)),
            contentDisposition: "inline; filename=\"a.webp\"", extra: extra)
        return ProcessedResult(bytes: Array("RIFF....WEBPVP8 ".utf8) + [0, 1, 2, 255], meta: meta)
    }

    @Test("A result reads back with its bytes and every header field")
    func roundTrip() throws {
        let original = Self.sample()
        let decoded = try #require(StoredResult.decode(StoredResult.encode(original)))
        #expect(decoded.body == original.body)
        let (a, b) = (decoded.meta, original.meta)
        #expect(a.status == b.status && a.contentType == b.contentType && a.sourceTag == b.sourceTag)
        #expect(a.sourceLastModified == b.sourceLastModified && a.entityTag == b.entityTag)
        #expect(a.lastModified == b.lastModified && a.vary == b.vary && a.keepUntil == b.keepUntil)
        #expect(a.caching == b.caching && a.contentDisposition == b.contentDisposition && a.extra == b.extra)
        let now = Date(timeIntervalSince1970: 1_899_999_000)
        #expect(a.caching.value(at: now) == "max-age=1000, public")
    }

    @Test("Damaged, cut, foreign or oversized objects are not results")
    func damaged() {
        let bytes = StoredResult.encode(Self.sample())
        #expect(StoredResult.decode([]) == nil)
        #expect(StoredResult.decode(Array("\u{89}PNG\r\n\u{1A}\n".utf8)) == nil)
        // Cut inside the header.
        #expect(StoredResult.decode(Array(bytes.prefix(20))) == nil)
        // A header length past the end.
        var long = bytes
        long[7] = 0x7F
        #expect(StoredResult.decode(long) == nil)
        // Any byte of the header or of the image changed after it was written (the checksums).
        for offset in [30, bytes.count / 2, bytes.count - 1] {
            var changed = bytes
            changed[offset] ^= 0x10
            #expect(StoredResult.decode(changed) == nil, "byte \(offset)")
        }
        // Cut in the image's bytes, or with bytes after them.
        #expect(StoredResult.decode(Array(bytes.dropLast(2))) == nil)
        #expect(StoredResult.decode(bytes + [0]) == nil)
        // The earlier form, without checksums, is not read.
        #expect(StoredResult.decode(Array("ILR1".utf8) + bytes.dropFirst(4)) == nil)
    }

    @Test("Object names: prefix, two folder levels, the digest of path and features; another path another name")
    func names() throws {
        let key = ResultCacheKey(path: "/insecure/rs:fit:8:8/plain/s3://photos/a.png", features: ClientFeatures())
        var webp = ClientFeatures()
        webp.prefers = [.webp]
        let other = ResultCacheKey(path: key.path, features: webp)
        let location = try #require(URL(string: "s3://results/thumbs/"))
        func name(_ key: ResultCacheKey) -> String {
            // Only the name is asked for: no loader is used.
            let text = location.absoluteString.dropLast() + "/"
            let url = ResultStorage.objectName(prefix: String(text), key: key)
            return url
        }
        let first = name(key)
        #expect(first.hasPrefix("s3://results/thumbs/"))
        let parts = first.dropFirst("s3://results/thumbs/".count).split(separator: "/")
        #expect(parts.count == 3 && parts[0].count == 2 && parts[1].count == 2 && parts[2].count == 64)
        #expect(parts[2].hasPrefix(parts[0] + parts[1]))
        #expect(name(other) != first)
        #expect(name(key) == first)
    }
}
