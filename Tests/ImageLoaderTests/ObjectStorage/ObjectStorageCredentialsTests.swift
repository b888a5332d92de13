import Foundation
import TestSupport
import Testing

@testable import ImageLoader
@testable import ObjectStorage

/// Where an S3 store's keys come from (AWS's standard chain, in its order) and how a
/// GCS service account's token is fetched and kept, each endpoint played by a test origin.
@Suite("Object storage credentials")
struct ObjectStorageCredentialsTests {
    static let metadataLoader = HTTPDataLoader(logger: .init(label: "test"))

    func provider(_ environment: [String: String]) -> AWSCredentialProvider {
        // No file of the machine's, no instance metadata, unless the test names them.
        var environment = environment
        environment["HOME"] = environment["HOME"] ?? "/nonexistent"
        environment["AWS_EC2_METADATA_DISABLED"] = environment["AWS_EC2_METADATA_DISABLED"] ?? "true"
        return AWSCredentialProvider(
            source: .standardWith(environment: environment), metadata: Self.metadataLoader,
            logger: .init(label: "test"))
    }

    func temporaryFile(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("aws-" + UUID().uuidString).path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test("The environment's key pair and session token come first")
    func environment() async throws {
        let credentials = try #require(
            try await provider([
                "AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "token",
                "AWS_SHARED_CREDENTIALS_FILE": try temporaryFile(
                    "[default]\naws_access_key_id = AKIDFILE\naws_secret_access_key = x\n"),
            ]).credentials())
        #expect(credentials.accessKeyID == "AKIDENV" && credentials.secretAccessKey == "secret")
        #expect(credentials.sessionToken == "token")
    }

    @Test("The shared credentials file, in AWS_PROFILE's section; then the config file's [profile NAME]")
    func sharedFiles() async throws {
        let file = try temporaryFile(
            """
            # comment
            [default]
            aws_access_key_id = AKIDDEFAULT
            aws_secret_access_key = default-secret

            [thumbs]
            aws_access_key_id=AKIDTHUMBS
            aws_secret_access_key =  thumbs-secret
            aws_session_token = thumbs-token
            """)
        let thumbs = try #require(
            try await provider(["AWS_SHARED_CREDENTIALS_FILE": file, "AWS_PROFILE": "thumbs"]).credentials())
        #expect(
            thumbs
                == AWSCredentials(
                    accessKeyID: "AKIDTHUMBS", secretAccessKey: "thumbs-secret", sessionToken: "thumbs-token"))
        let fallback = try #require(try await provider(["AWS_SHARED_CREDENTIALS_FILE": file]).credentials())
        #expect(fallback.accessKeyID == "AKIDDEFAULT")
        let config = try temporaryFile(
            "[profile other]\nregion = eu-west-3\naws_access_key_id = AKIDCONFIG\naws_secret_access_key = c\n")
        let other = try #require(
            try await provider([
                "AWS_SHARED_CREDENTIALS_FILE": file, "AWS_CONFIG_FILE": config, "AWS_PROFILE": "other",
            ]).credentials())
        #expect(other.accessKeyID == "AKIDCONFIG")
        #expect(
            AWSCredentialProvider.configuredRegion(environment: ["AWS_CONFIG_FILE": config, "AWS_PROFILE": "other"])
                == "eu-west-3")
    }

    @Test("The container endpoint, with its authorization token")
    func container() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        origin.serve(
            "/creds",
            .init(
                body: Array(
                    #"{"AccessKeyId":"ASIACONTAINER","SecretAccessKey":"s","Token":"t","Expiration":"2099-01-01T00:00:00Z"}"#
                        .utf8)))
        let credentials = try #require(
            try await provider([
                "AWS_CONTAINER_CREDENTIALS_FULL_URI": origin.base + "/creds",
                "AWS_CONTAINER_AUTHORIZATION_TOKEN": "pod-token",
            ]).credentials())
        #expect(credentials.accessKeyID == "ASIACONTAINER" && credentials.sessionToken == "t")
        #expect(credentials.expiration == Date(timeIntervalSince1970: 4_070_908_800))
        #expect(origin.requests("/creds").first?.header("Authorization") == "pod-token")
    }

    @Test("Instance metadata (IMDSv2): a session token by PUT, the role, its keys; fetched again near their expiry")
    func instanceMetadata() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        origin.serve("/latest/api/token", .init(body: Array("imds-session".utf8)))
        origin.serve("/latest/meta-data/iam/security-credentials/", .init(body: Array("thumbnail-role\n".utf8)))
        // Keys that expire in four minutes: inside the five-minute margin, so each use fetches again.
        let soon = Date().addingTimeInterval(240)
        let parts = Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "UTC")!, from: soon)
        let expiry = String(
            format: "%04d-%02d-%02dT%02d:%02d:%02dZ", parts.year!, parts.month!, parts.day!, parts.hour!, parts.minute!,
            parts.second!)
        origin.route("/latest/meta-data/iam/security-credentials/thumbnail-role") { _, count in
            .init(
                body: Array(
                    #"{"Code":"Success","AccessKeyId":"ASIAIMDS\#(count)","SecretAccessKey":"s","Token":"t","Expiration":"\#(expiry)"}"#
                        .utf8))
        }
        let provider = provider([
            "AWS_EC2_METADATA_DISABLED": "false", "AWS_EC2_METADATA_SERVICE_ENDPOINT": origin.base,
        ])
        let first = try #require(try await provider.credentials())
        #expect(first.accessKeyID == "ASIAIMDS1")
        let token = try #require(origin.requests("/latest/api/token").first)
        #expect(token.method == "PUT" && token.header("X-aws-ec2-metadata-token-ttl-seconds") == "21600")
        #expect(
            origin.requests("/latest/meta-data/iam/security-credentials/thumbnail-role").first?.header(
                "X-aws-ec2-metadata-token") == "imds-session")
        let second = try #require(try await provider.credentials())
        #expect(second.accessKeyID == "ASIAIMDS2")
    }

    @Test("Nothing anywhere: a typed error naming where it looked, no secret in it")
    func none() async throws {
        await #expect {
            try await provider([:]).credentials()
        } throws: { error in
            guard let error = error as? ImageLoadingError, case .credentials(let why) = error.reason else {
                return false
            }
            return why.contains("environment") && why.contains("instance metadata")
        }
    }

    @Test("GCS: a service account's token is fetched once with a signed JWT, and sent as a bearer token")
    func gcsToken() async throws {
        try await withOrigin(clock: ManualClock(Date())) { origin, harness in
            origin.serve(
                "/token",
                .init(body: Array(#"{"access_token":"ya29.test","expires_in":3600,"token_type":"Bearer"}"#.utf8)))
            for name in ["a.png", "b.png"] {
                origin.serve(
                    "/storage/v1/b/photos/o/\(name)",
                    .init(headers: [("Content-Type", "image/png"), ("X-Goog-Generation", "7")], body: TestImages.png))
            }
            // The key of the signing tests, its token URI the origin's.
            var key =
                try JSONSerialization.jsonObject(
                    with: Data(ObjectStorageSigningTests.signatures.gcs.key.utf8)) as! [String: String]
            key["token_uri"] = origin.base + "/token"
            let json = String(decoding: try JSONSerialization.data(withJSONObject: key), as: UTF8.self)
            let loader = try harness.loader {
                $0.dataLoader = try ObjectStorageDataLoader(
                    ObjectStorageConfiguration(
                        gcs: GCSConfiguration(serviceAccountKey: json, endpoint: URL(string: origin.base)!)),
                    wrapping: $0)
            }
            let a = try await loader.data(for: URL(string: "gs://photos/a.png")!)
            let b = try await loader.data(for: URL(string: "gs://photos/b.png")!)
            #expect(a.bytes == TestImages.png && b.bytes == TestImages.png)
            // The entity tag is the object's generation.
            #expect(a.value("ETag") == "\"7\"")
            let tokenRequests = origin.requests("/token")
            #expect(tokenRequests.count == 1)
            let form = String(decoding: tokenRequests.first?.body ?? [], as: UTF8.self)
            #expect(tokenRequests.first?.method == "POST")
            #expect(form.hasPrefix("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=ey"))
            for name in ["a.png", "b.png"] {
                #expect(
                    origin.requests("/storage/v1/b/photos/o/\(name)").first?.header("Authorization")
                        == "Bearer ya29.test")
            }
        }
    }

    @Test("GCS without a key: the machine's service account from the metadata server, with Metadata-Flavor")
    func gcsMetadataServer() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        origin.serve(
            "/computeMetadata/v1/instance/service-accounts/default/token",
            .init(body: Array(#"{"access_token":"ya29.machine","expires_in":3599,"token_type":"Bearer"}"#.utf8)))
        let provider = GoogleTokenProvider(metadataHost: "127.0.0.1:\(origin.port)", http: Self.metadataLoader)
        #expect(try await provider.token() == "ya29.machine")
        #expect(try await provider.token() == "ya29.machine")
        let asked = origin.requests("/computeMetadata/v1/instance/service-accounts/default/token")
        #expect(asked.count == 1)
        #expect(asked.first?.header("Metadata-Flavor") == "Google")
        // Callers that ask while a token is fetched share that fetch: one request for eight.
        let gate = Gate()
        origin.serve(
            "/computeMetadata/v1/instance/service-accounts/default/token",
            .init(body: Array(#"{"access_token":"ya29.shared","expires_in":3599}"#.utf8), gate: gate))
        let sharing = GoogleTokenProvider(metadataHost: "127.0.0.1:\(origin.port)", http: Self.metadataLoader)
        try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<8 { group.addTask { try await sharing.token() } }
            try await waitUntil("the fetch has arrived") {
                origin.requests("/computeMetadata/v1/instance/service-accounts/default/token").count == 2
            }
            gate.open()
            for try await token in group { #expect(token == "ya29.shared") }
        }
        #expect(origin.requests("/computeMetadata/v1/instance/service-accounts/default/token").count == 2)
        // No server there: a typed error saying what to give instead.
        let nowhere = GoogleTokenProvider(metadataHost: "127.0.0.1:9", http: Self.metadataLoader)
        await #expect {
            try await nowhere.token()
        } throws: { error in
            guard let error = error as? ImageLoadingError, case .credentials(let why) = error.reason else {
                return false
            }
            return why.contains("service account's key")
        }
    }

    @Test("A key that is not a service account's: a typed error at start, no key text in it")
    func badKey() {
        #expect {
            _ = try GoogleTokenProvider(
                json:
                    #"{"client_email":"x","private_key":"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"}"#,
                http: UnusedLoader())
        } throws: { error in
            guard let error = error as? ImageLoadingError, case .credentials(let why) = error.reason else {
                return false
            }
            return !why.contains("AAAA")
        }
    }
}
