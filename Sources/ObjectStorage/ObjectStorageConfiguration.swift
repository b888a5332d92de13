import Foundation
import ImageLoader

/// Where `s3://`, `gs://` and `abs://` URLs are read, and with which credentials.
///
/// A loader with a store configured loads `s3://bucket/key` (and `gs://bucket/object`,
/// `abs://container/blob`) as it loads `https://` URLs: through the same RFC 9111 disk
/// cache, revalidated with the store's validators, one read per object however many
/// callers ask, failures remembered. The store's endpoint is the operator's choice, so
/// `HTTPDataLoader.Configuration.addressFilter` does not apply to it; credentials
/// are added to each request as it leaves and never reach logs, errors or the cache.
///
/// ```swift
/// var configuration = ImageLoader.Configuration()
/// configuration.dataLoader = try ObjectStorageDataLoader(
///     ObjectStorageConfiguration(s3: S3Configuration(region: "eu-west-1")), wrapping: configuration)
/// let loader = try ImageLoader(configuration: configuration)
/// let image = try await loader.image(for: URL(string: "s3://photos/2026/cat.jpg")!)
/// ```
public struct ObjectStorageConfiguration: Sendable {
    /// Amazon S3 and the stores that speak its API (R2, MinIO, Ceph, GCS's interoperability
    /// endpoint): `s3://bucket/key`. `nil`: `s3://` URLs are not loaded.
    public var s3: S3Configuration?
    /// Google Cloud Storage: `gs://bucket/object`. `nil`: `gs://` URLs are not loaded.
    public var gcs: GCSConfiguration?
    /// Azure Blob Storage: `abs://container/blob`. `nil`: `abs://` URLs are not loaded.
    public var azureBlob: AzureBlobConfiguration?

    /// No store: only `http`, `https` and `file` URLs are loaded.
    public init(s3: S3Configuration? = nil, gcs: GCSConfiguration? = nil, azureBlob: AzureBlobConfiguration? = nil) {
        self.s3 = s3
        self.gcs = gcs
        self.azureBlob = azureBlob
    }

    /// The URL schemes these stores read (`s3`, `gs`, `abs`).
    public var schemes: Set<String> {
        var schemes: Set<String> = []
        if s3 != nil { schemes.insert("s3") }
        if gcs != nil { schemes.insert("gs") }
        if azureBlob != nil { schemes.insert("abs") }
        return schemes
    }
}

/// How `s3://` URLs are read: the region, the endpoint and the credentials.
///
/// ```swift
/// // MinIO on the same host, path-style addressing:
/// var s3 = S3Configuration(region: "us-east-1", endpoint: URL(string: "http://127.0.0.1:9000")!)
/// s3.credentials = .fixed(AWSCredentials(accessKeyID: "minio", secretAccessKey: "minio-secret"))
/// ```
public struct S3Configuration: Sendable {
    /// The region requests are signed for (`us-east-1`; R2 takes `auto`). Empty: the
    /// `AWS_REGION` or `AWS_DEFAULT_REGION` variable, else `us-east-1`.
    public var region: String
    /// Another S3-compatible endpoint (`https://ACCOUNT.r2.cloudflarestorage.com`,
    /// `http://127.0.0.1:9000`); `nil`: AWS's own, `https://s3.REGION.amazonaws.com`.
    public var endpoint: URL?
    /// With a custom ``endpoint``: `endpoint/bucket/key` (path style, the default, as
    /// imgproxy's) rather than `bucket.endpoint/key`. AWS's own endpoint always uses the
    /// virtual-hosted form for bucket names that allow it.
    public var usesPathStyle = true
    /// Where the key pair comes from; by default, the AWS SDKs' standard chain.
    public var credentials: AWSCredentialSource = .standard

    /// S3 in `region` (empty: from the environment), at `endpoint` (`nil`: AWS's).
    public init(region: String = "", endpoint: URL? = nil) {
        self.region = region
        self.endpoint = endpoint
    }
}

/// Where an S3 store's key pair comes from.
public enum AWSCredentialSource: Sendable {
    /// The order the AWS SDKs follow: the `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and
    /// `AWS_SESSION_TOKEN` variables; the shared credentials file (`AWS_SHARED_CREDENTIALS_FILE`,
    /// else `~/.aws/credentials`) and then the config file (`AWS_CONFIG_FILE`, else
    /// `~/.aws/config`), in the profile `AWS_PROFILE` names (else `default`); the container
    /// endpoint (`AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` or `_FULL_URI`, with
    /// `AWS_CONTAINER_AUTHORIZATION_TOKEN`); the instance metadata service (IMDSv2, unless
    /// `AWS_EC2_METADATA_DISABLED` is `true`). Temporary credentials are fetched again
    /// five minutes before they expire.
    case standard
    /// The same chain, reading `environment` instead of the process's variables.
    case standardWith(environment: [String: String])
    /// This key pair.
    case fixed(AWSCredentials)
    /// Requests go unsigned: public buckets.
    case anonymous
}

/// An AWS key pair, with a session token when it is temporary. Its description shows
/// none of it: credentials never reach logs.
///
/// ```swift
/// let credentials = AWSCredentials(accessKeyID: "AKIA...", secretAccessKey: "...")
/// ```
public struct AWSCredentials: Sendable, Hashable, CustomStringConvertible {
    /// The access key ID.
    public var accessKeyID: String
    /// The secret access key.
    public var secretAccessKey: String
    /// The session token of temporary credentials.
    public var sessionToken: String?
    /// When temporary credentials expire; `nil` for long-lived ones.
    public var expiration: Date?

    /// A key pair (and token).
    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil, expiration: Date? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
        self.expiration = expiration
    }

    public var description: String { "AWSCredentials(redacted)" }
}

/// How `gs://` URLs are read.
///
/// ```swift
/// let key = try String(contentsOfFile: "/etc/imageloader/gcs-key.json", encoding: .utf8)
/// let gcs = GCSConfiguration(serviceAccountKey: key)
/// ```
public struct GCSConfiguration: Sendable {
    /// The JSON API's endpoint; `nil`: `https://storage.googleapis.com`.
    public var endpoint: URL?
    /// A service account's JSON key (its contents, as imgproxy's `IMGPROXY_GCS_KEY`):
    /// requests carry an access token for it, got by a signed JWT and fetched again
    /// before it expires. `nil`: with an ``endpoint``, requests go unauthenticated (an
    /// emulator, public buckets); without one, the key file `GOOGLE_APPLICATION_CREDENTIALS`
    /// names, else the machine's service account from the metadata server (on Google
    /// Cloud; `GCE_METADATA_HOST` moves it), as Google's libraries find credentials.
    public var serviceAccountKey: String?
    /// The variables read for `GOOGLE_APPLICATION_CREDENTIALS` and `GCE_METADATA_HOST`;
    /// `nil`: the process's.
    public var environment: [String: String]?

    /// GCS at `endpoint` (`nil`: Google's) with the service account `serviceAccountKey`.
    public init(serviceAccountKey: String? = nil, endpoint: URL? = nil) {
        self.serviceAccountKey = serviceAccountKey
        self.endpoint = endpoint
    }
}

/// How `abs://` URLs are read.
///
/// ```swift
/// let azure = AzureBlobConfiguration(accountName: "photos", accountKey: "base64 key")
/// ```
public struct AzureBlobConfiguration: Sendable {
    /// The storage account.
    public var accountName: String
    /// The account's key (base64, as the portal shows it): requests are signed with
    /// Shared Key authorization. `nil`: requests go unsigned (public containers).
    public var accountKey: String?
    /// The Blob service endpoint; `nil`: `https://ACCOUNT.blob.core.windows.net`. An
    /// emulator's form with the account in the path (`http://127.0.0.1:10000/ACCOUNT`) works.
    public var endpoint: URL?

    /// The account `accountName`, signed with `accountKey`, at `endpoint` (`nil`: Azure's).
    public init(accountName: String, accountKey: String? = nil, endpoint: URL? = nil) {
        self.accountName = accountName
        self.accountKey = accountKey
        self.endpoint = endpoint
    }
}
