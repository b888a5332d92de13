import Foundation
import ImageLoader
import ImageLoaderSupport
import Logging

/// An S3 store's credentials, resolved by ``AWSCredentialSource`` and kept until five
/// minutes before they expire (``KeptCredential``: callers that ask while they are
/// being fetched share the one fetch).
final class AWSCredentialProvider: Sendable {
    private let source: AWSCredentialSource
    private let environment: [String: String]
    /// For the container and instance metadata endpoints (short timeouts).
    private let metadata: any DataLoading
    private let logger: Logger
    private let kept = KeptCredential<AWSCredentials> { !AWSCredentialProvider.expiresSoon($0, now: Date()) }

    /// How long before expiry temporary credentials are replaced.
    static let refreshMargin: TimeInterval = 300

    init(source: AWSCredentialSource, metadata: any DataLoading, logger: Logger) {
        self.source = source
        self.metadata = metadata
        self.logger = logger
        switch source {
        case .standardWith(let environment): self.environment = environment
        default: environment = ProcessInfo.processInfo.environment
        }
    }

    /// The credentials to sign with; `nil` for anonymous requests.
    func credentials() async throws -> AWSCredentials? {
        switch source {
        case .anonymous: return nil
        case .fixed(let credentials): return credentials
        case .standard, .standardWith: return try await kept.value { try await self.resolve() }
        }
    }

    static func expiresSoon(_ credentials: AWSCredentials, now: Date) -> Bool {
        guard let expiration = credentials.expiration else { return false }
        return expiration.timeIntervalSince(now) < refreshMargin
    }

    /// The chain, in the SDKs' order.
    private func resolve() async throws -> AWSCredentials {
        if let id = environment["AWS_ACCESS_KEY_ID"], let secret = environment["AWS_SECRET_ACCESS_KEY"], !id.isEmpty,
            !secret.isEmpty
        {
            return AWSCredentials(
                accessKeyID: id, secretAccessKey: secret, sessionToken: nonEmpty(environment["AWS_SESSION_TOKEN"]))
        }
        if let credentials = fromFiles() { return credentials }
        if let credentials = try await fromContainer() { return credentials }
        if let credentials = try await fromInstanceMetadata() { return credentials }
        throw ImageLoadingError(
            .credentials(
                "no AWS credentials found (environment, shared credentials and config files, "
                    + "container or instance metadata)"), url: "s3://")
    }

    // MARK: Shared files

    private var profile: String {
        nonEmpty(environment["AWS_PROFILE"]) ?? nonEmpty(environment["AWS_DEFAULT_PROFILE"]) ?? "default"
    }

    private func path(_ variable: String, default name: String) -> String? {
        if let path = nonEmpty(environment[variable]) {
            return path.hasPrefix("~/") ? environment["HOME"].map { $0 + path.dropFirst() } : path
        }
        return nonEmpty(environment["HOME"]).map { $0 + "/.aws/" + name }
    }

    /// The profile's keys from the shared credentials file (section `[NAME]`), else
    /// from the config file (`[profile NAME]`, or `[default]`).
    private func fromFiles() -> AWSCredentials? {
        let profile = self.profile
        let files: [(path: String?, section: String)] = [
            (path("AWS_SHARED_CREDENTIALS_FILE", default: "credentials"), profile),
            (path("AWS_CONFIG_FILE", default: "config"), profile == "default" ? "default" : "profile " + profile),
        ]
        for (path, section) in files {
            guard let path, let text = try? String(contentsOfFile: path, encoding: .utf8) else { continue }
            let values = AWSCredentialProvider.section(section, of: text)
            if let id = nonEmpty(values["aws_access_key_id"]), let secret = nonEmpty(values["aws_secret_access_key"]) {
                return AWSCredentials(
                    accessKeyID: id, secretAccessKey: secret, sessionToken: nonEmpty(values["aws_session_token"]))
            }
        }
        return nil
    }

    /// The region the profile's config file section names, if any.
    static func configuredRegion(environment: [String: String]) -> String? {
        if let region = environment["AWS_REGION"], !region.isEmpty { return region }
        if let region = environment["AWS_DEFAULT_REGION"], !region.isEmpty { return region }
        let profile = environment["AWS_PROFILE"].flatMap { $0.isEmpty ? nil : $0 } ?? "default"
        let path = environment["AWS_CONFIG_FILE"] ?? environment["HOME"].map { $0 + "/.aws/config" }
        guard let path, let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        let values = section(profile == "default" ? "default" : "profile " + profile, of: text)
        return values["region"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The `key = value` lines of `[name]` in an INI file (comments with `#` or `;`).
    static func section(_ name: String, of text: String) -> [String: String] {
        var values: [String: String] = [:]
        var inside = false
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("["), line.hasSuffix("]") {
                let title = line.dropFirst().dropLast().split(whereSeparator: \.isWhitespace).joined(separator: " ")
                inside = title == name
                continue
            }
            guard inside, let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
            values[key] = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
        }
        return values
    }

    // MARK: Endpoints

    /// What the container and instance metadata endpoints answer.
    private struct Answer: Decodable {
        var accessKeyID: String?
        var secretAccessKey: String?
        var token: String?
        var expiration: String?

        enum CodingKeys: String, CodingKey {
            case accessKeyID = "AccessKeyId"
            case secretAccessKey = "SecretAccessKey"
            case token = "Token"
            case expiration = "Expiration"
        }
    }

    private func credentials(from body: [UInt8], endpoint: String) throws -> AWSCredentials {
        guard let answer = try? JSONDecoder().decode(Answer.self, from: Data(body)),
            let id = nonEmpty(answer.accessKeyID),
            let secret = nonEmpty(answer.secretAccessKey)
        else {
            throw ImageLoadingError(.credentials("\(endpoint) answered without a key pair"), url: "s3://")
        }
        return AWSCredentials(
            accessKeyID: id, secretAccessKey: secret, sessionToken: nonEmpty(answer.token),
            expiration: answer.expiration.flatMap(HTTPDate.parseISO8601))
    }

    /// ECS and EKS Pod Identity: the endpoint the container's variables name.
    private func fromContainer() async throws -> AWSCredentials? {
        let url: URL?
        if let relative = nonEmpty(environment["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"]) {
            url = URL(string: "http://169.254.170.2" + relative)
        } else if let full = nonEmpty(environment["AWS_CONTAINER_CREDENTIALS_FULL_URI"]) {
            url = URL(string: full)
        } else {
            return nil
        }
        guard let url else {
            throw ImageLoadingError(.credentials("the container credentials URI is not a URL"), url: "s3://")
        }
        var headers: [HeaderField] = []
        if let token = nonEmpty(environment["AWS_CONTAINER_AUTHORIZATION_TOKEN"]) {
            headers.append(HeaderField("Authorization", token))
        } else if let file = nonEmpty(environment["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"]),
            let token = try? String(contentsOfFile: file, encoding: .utf8)
        {
            headers.append(HeaderField("Authorization", token.trimmingCharacters(in: .whitespacesAndNewlines)))
        }
        let response = try await metadata.load(DataRequest(url: url, headers: headers)) { _, _ in }
        guard response.status == 200 else {
            throw ImageLoadingError(
                .credentials("the container credentials endpoint answered \(response.status)"), url: "s3://")
        }
        return try credentials(from: response.body, endpoint: "the container credentials endpoint")
    }

    /// EC2's instance metadata service, version 2 (a session token first). `nil` when it
    /// does not answer: not on EC2.
    private func fromInstanceMetadata() async throws -> AWSCredentials? {
        guard environment["AWS_EC2_METADATA_DISABLED"]?.lowercased() != "true" else { return nil }
        let base = nonEmpty(environment["AWS_EC2_METADATA_SERVICE_ENDPOINT"]) ?? "http://169.254.169.254"
        let trimmed = base.hasSuffix("/") ? String(base.dropLast()) : base
        guard let tokenURL = URL(string: trimmed + "/latest/api/token"),
            let listURL = URL(string: trimmed + "/latest/meta-data/iam/security-credentials/")
        else { return nil }
        let token: String
        do {
            var request = DataRequest(
                url: tokenURL, headers: [HeaderField("X-aws-ec2-metadata-token-ttl-seconds", "21600")])
            request.method = "PUT"
            let response = try await metadata.load(request) { _, _ in }
            guard response.status == 200 else { return nil }
            token = String(decoding: response.body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        } catch {
            logger.debug("no instance metadata service", metadata: ["error": "\(error)"])
            return nil
        }
        let headers = [HeaderField("X-aws-ec2-metadata-token", token)]
        let list = try await metadata.load(DataRequest(url: listURL, headers: headers)) { _, _ in }
        let role = String(decoding: list.body, as: UTF8.self).split(whereSeparator: \.isNewline).first.map(String.init)
        guard list.status == 200, let role, !role.isEmpty,
            let roleURL = URL(string: listURL.absoluteString + SignatureV4.encode(role, keepsSlash: false))
        else {
            throw ImageLoadingError(.credentials("the instance has no IAM role"), url: "s3://")
        }
        let answer = try await metadata.load(DataRequest(url: roleURL, headers: headers)) { _, _ in }
        guard answer.status == 200 else {
            throw ImageLoadingError(.credentials("instance metadata answered \(answer.status)"), url: "s3://")
        }
        return try credentials(from: answer.body, endpoint: "instance metadata")
    }
}

func nonEmpty(_ text: String?) -> String? {
    guard let text, !text.isEmpty else { return nil }
    return text
}
