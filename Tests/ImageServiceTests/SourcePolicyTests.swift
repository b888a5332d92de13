import Foundation
import Testing

@testable import ImageService

@Suite("Which sources the service fetches")
struct SourcePolicyTests {
    @Test("prefixes restrict remote sources; none means any")
    func prefixes() throws {
        let url = URL(string: "https://images.example.com/a.jpg")!
        #expect(try SourcePolicy().check(.remote(url)) == .remote(url))
        let policy = SourcePolicy(allowedPrefixes: ["https://images.example.com/"])
        #expect(try policy.check(.remote(url)) == .remote(url))
        #expect(throws: SourcePolicy.Forbidden.self) {
            try policy.check(.remote(URL(string: "https://images.example.com.evil.net/a.jpg")!))
        }
        #expect(throws: SourcePolicy.Forbidden.self) { try policy.check(.remote(URL(string: "http://other/a.jpg")!)) }
    }

    @Test("bucket and prefix patterns restrict object storage sources as they do URLs")
    func buckets() throws {
        let policy = SourcePolicy(allowedPrefixes: ["s3://photos/public/", "gs://*-thumbs/", "abs://media/"])
        for allowed in ["s3://photos/public/a.jpg", "gs://eu-thumbs/x/y.png", "abs://media/c/d.webp"] {
            #expect(throws: Never.self) { try policy.check(.remote(URL(string: allowed)!)) }
        }
        for refused in ["s3://photos/private/a.jpg", "s3://photos-public/a.jpg", "gs://thumbs/x.png", "abs://other/a"] {
            #expect(throws: SourcePolicy.Forbidden.self) { try policy.check(.remote(URL(string: refused)!)) }
        }
    }

    @Test("imgproxy's allowed and denied buckets, per store")
    func allowedAndDeniedBuckets() throws {
        var policy = SourcePolicy()
        policy.allowedBuckets = ["s3": ["photos", "avatars"]]
        policy.deniedBuckets = ["gs": ["secrets"], "s3": ["avatars"]]
        for allowed in ["s3://photos/a.jpg", "gs://public/a.png", "abs://any/a.png", "https://example.com/a.png"] {
            #expect(throws: Never.self) { try policy.check(.remote(URL(string: allowed)!)) }
        }
        for refused in ["s3://other/a.jpg", "s3://avatars/a.jpg", "gs://secrets/a.png"] {
            #expect(throws: SourcePolicy.Forbidden.self) { try policy.check(.remote(URL(string: refused)!)) }
        }
    }

    @Test("local paths stay inside the root: no .., no link out, none at all without a root")
    func localRoot() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("sp-\(UUID().uuidString)")
        let inside = root.appendingPathComponent("cats")
        try FileManager.default.createDirectory(at: inside, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        try Data([1]).write(to: inside.appendingPathComponent("1.jpg"))
        try FileManager.default.createSymbolicLink(
            atPath: inside.appendingPathComponent("out").path, withDestinationPath: "/etc")
        let policy = SourcePolicy(localRoot: root.path)
        guard case .file(let path) = try policy.check(.local(path: "/cats/1.jpg")) else {
            Issue.record("not a file")
            return
        }
        #expect(path.hasSuffix("/cats/1.jpg") && FileManager.default.fileExists(atPath: path))
        for escape in ["/../etc/passwd", "/cats/../../etc/passwd", "/cats/out/passwd", "/.."] {
            #expect(throws: SourcePolicy.Forbidden.self, "\(escape)") { try policy.check(.local(path: escape)) }
        }
        // Through the URL parser: percent-encoded dots are decoded first, then refused.
        let parsed = try ProcessingURL.parse(
            "/_/w:10/plain/local:///cats/%2e%2e/%2e%2e/etc/passwd", signature: nil, allowsUnsigned: true)
        #expect(throws: SourcePolicy.Forbidden.self) { try policy.check(parsed.source) }
        #expect(throws: SourcePolicy.Forbidden.self) { try SourcePolicy().check(.local(path: "/cats/1.jpg")) }
    }
}
