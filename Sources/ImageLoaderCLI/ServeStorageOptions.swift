import ArgumentParser
import Foundation
import ImageLoader
import ImageService
import ObjectStorage

/// The object stores `serve` reads `s3://`, `gs://` and `abs://` sources from, and the
/// bucket it may share results through. Each option also reads its `IMGPROXY_*`
/// variable (imgproxy's names); the option wins. Secrets are best given as variables:
/// a process's arguments are visible to every user of the machine.
struct ServeStorageOptions: ParsableArguments {
    @Flag(help: "Serve s3://bucket/key sources (IMGPROXY_USE_S3).")
    var useS3 = false

    @Option(help: "The region S3 requests are signed for (IMGPROXY_S3_REGION) [default: AWS_REGION, else us-east-1].")
    var s3Region: String?

    @Option(
        help: """
            Another S3-compatible endpoint: R2, MinIO, Ceph, GCS's interoperability endpoint \
            (IMGPROXY_S3_ENDPOINT) [default: AWS's].
            """)
    var s3Endpoint: String?

    @Flag(
        inversion: .prefixedNo,
        help: "Address a custom S3 endpoint as ENDPOINT/BUCKET/KEY (IMGPROXY_S3_ENDPOINT_USE_PATH_STYLE) [default: on]."
    )
    var s3PathStyle: Bool?

    @Flag(help: "Serve gs://bucket/object sources (IMGPROXY_USE_GCS).")
    var useGcs = false

    @Option(
        help: """
            A service account's JSON key, its text or a file's path (IMGPROXY_GCS_KEY) [default: \
            GOOGLE_APPLICATION_CREDENTIALS's file; none with --gcs-endpoint].
            """)
    var gcsKey: String?

    @Option(help: "The GCS JSON API's endpoint, for an emulator (IMGPROXY_GCS_ENDPOINT).")
    var gcsEndpoint: String?

    @Flag(help: "Serve abs://container/blob sources from Azure Blob Storage (IMGPROXY_USE_ABS).")
    var useAbs = false

    @Option(help: "The Azure storage account (IMGPROXY_ABS_NAME).")
    var absName: String?

    @Option(help: "The account's key, base64 (IMGPROXY_ABS_KEY) [default: none, requests unsigned].")
    var absKey: String?

    @Option(help: "The Blob endpoint (IMGPROXY_ABS_ENDPOINT) [default: https://ACCOUNT.blob.core.windows.net].")
    var absEndpoint: String?

    @Option(
        help: """
            SCHEME:BUCKET (s3, gs, abs): serve only the listed buckets of that store (repeatable; \
            IMGPROXY_S3_ALLOWED_BUCKETS, IMGPROXY_GCS_ALLOWED_BUCKETS, IMGPROXY_ABS_ALLOWED_BUCKETS).
            """)
    var allowedBucket: [String] = []

    @Option(
        help: """
            SCHEME:BUCKET (s3, gs, abs): never serve that bucket (repeatable; IMGPROXY_S3_DENIED_BUCKETS, \
            IMGPROXY_GCS_DENIED_BUCKETS, IMGPROXY_ABS_DENIED_BUCKETS).
            """)
    var deniedBucket: [String] = []

    @Option(
        help: """
            A bucket and prefix that processed results are kept in and looked up from, shared by every \
            instance naming it: s3://BUCKET/PREFIX, gs://..., abs://... (IMAGELOADER_RESULT_STORAGE).
            """)
    var resultStorage: String?

    /// The stores and the result bucket, checked.
    func apply(to configuration: inout ImageService.Configuration, environment: ImgproxyEnvironment) throws {
        var storage = ObjectStorageConfiguration()
        if try useS3 || environment.flag("IMGPROXY_USE_S3") == true {
            var s3 = S3Configuration(region: s3Region ?? environment.text("IMGPROXY_S3_REGION") ?? "")
            if let text = s3Endpoint ?? environment.text("IMGPROXY_S3_ENDPOINT") {
                s3.endpoint = try Self.endpoint(text, "--s3-endpoint")
            }
            s3.usesPathStyle = try s3PathStyle ?? environment.flag("IMGPROXY_S3_ENDPOINT_USE_PATH_STYLE") ?? true
            storage.s3 = s3
        }
        if try useGcs || environment.flag("IMGPROXY_USE_GCS") == true {
            var gcs = GCSConfiguration()
            if let text = gcsEndpoint ?? environment.text("IMGPROXY_GCS_ENDPOINT") {
                gcs.endpoint = try Self.endpoint(text, "--gcs-endpoint")
            }
            if let key = gcsKey ?? environment.text("IMGPROXY_GCS_KEY") {
                if key.hasPrefix("{") {
                    gcs.serviceAccountKey = key
                } else {
                    guard let text = try? String(contentsOfFile: key, encoding: .utf8) else {
                        throw ValidationError("--gcs-key is neither a JSON key nor a readable file")
                    }
                    gcs.serviceAccountKey = text
                }
            }
            storage.gcs = gcs
        }
        if try useAbs || environment.flag("IMGPROXY_USE_ABS") == true {
            guard let name = absName ?? environment.text("IMGPROXY_ABS_NAME") else {
                throw ValidationError("--use-abs needs --abs-name (IMGPROXY_ABS_NAME), the storage account")
            }
            var azure = AzureBlobConfiguration(accountName: name)
            if let key = absKey ?? environment.text("IMGPROXY_ABS_KEY") {
                guard Data(base64Encoded: key) != nil else { throw ValidationError("--abs-key is not base64") }
                azure.accountKey = key
            }
            if let text = absEndpoint ?? environment.text("IMGPROXY_ABS_ENDPOINT") {
                azure.endpoint = try Self.endpoint(text, "--abs-endpoint")
            }
            storage.azureBlob = azure
        }
        configuration.objectStorage = storage
        for (option, given, variable, target) in [
            ("--allowed-bucket", allowedBucket, "ALLOWED_BUCKETS", \SourcePolicy.allowedBuckets),
            ("--denied-bucket", deniedBucket, "DENIED_BUCKETS", \SourcePolicy.deniedBuckets),
        ] {
            var buckets: [String: Set<String>] = [:]
            if given.isEmpty {
                for (scheme, store) in [("s3", "S3"), ("gs", "GCS"), ("abs", "ABS")] {
                    let names = environment.list("IMGPROXY_\(store)_\(variable)")
                    if !names.isEmpty { buckets[scheme] = Set(names) }
                }
            } else {
                for entry in given {
                    let parts = entry.split(separator: ":", maxSplits: 1).map(String.init)
                    guard parts.count == 2, SourcePolicy.objectStorageSchemes[parts[0]] != nil, !parts[1].isEmpty
                    else {
                        throw ValidationError("\(option) \(entry) is not SCHEME:BUCKET (s3:photos, gs:..., abs:...)")
                    }
                    buckets[parts[0], default: []].insert(parts[1])
                }
            }
            configuration.sources[keyPath: target] = buckets
        }
        if let text = resultStorage {
            guard let url = URL(string: text), let scheme = url.scheme?.lowercased(),
                let flag = SourcePolicy.objectStorageSchemes[scheme], url.host?.isEmpty == false
            else {
                throw ValidationError("--result-storage \(text) is not s3://BUCKET/PREFIX, gs://... or abs://...")
            }
            guard storage.schemes.contains(scheme) else {
                throw ValidationError("--result-storage \(text) needs \(flag)")
            }
            configuration.resultStorage = url
        }
    }

    private static func endpoint(_ text: String, _ name: String) throws -> URL {
        // imgproxy takes a bare host too (`minio.local:9000`): https is assumed.
        let full = text.contains("://") ? text : "https://" + text
        guard let url = URL(string: full), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            url.host?.isEmpty == false
        else {
            throw ValidationError("\(name) \(text) is not an http or https URL")
        }
        return url
    }
}
