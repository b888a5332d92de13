import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL

/// HTTP through AsyncHTTPClient: one client, redirects followed here (so credentials
/// are sent to the first origin only), a connect timeout, a total timeout over the
/// whole redirect chain, and a cap on the body checked as it streams in.
public final class HTTPDataLoader: DataLoading {
    public struct Configuration: Sendable {
        public var connectTimeout: Duration = .seconds(10)
        /// From the first byte sent to the last received, redirects included.
        public var timeout: Duration = .seconds(60)
        public var maxResponseBytes = 50 << 20
        public var maxRedirects = 5
        /// Basic authentication, sent only to the origin of the URL asked for.
        public var credentials: (user: String, password: String)?
        /// Accept any TLS certificate. Off by default; for tests and closed networks only.
        public var trustAnySSLCertificate = false
        public var clock: @Sendable () -> Date = { Date() }

        public init() {}
    }

    private let client: HTTPClient
    private let configuration: Configuration
    private let logger: Logger

    public init(configuration: Configuration = Configuration(), logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        var tls = TLSConfiguration.makeClientConfiguration()
        if configuration.trustAnySSLCertificate { tls.certificateVerification = .none }
        let connect = TimeAmount.nanoseconds(Int64(configuration.connectTimeout.components.seconds) * 1_000_000_000)
        client = HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: HTTPClient.Configuration(
                tlsConfiguration: tls, redirectConfiguration: .disallow,
                timeout: HTTPClient.Configuration.Timeout(connect: connect),
                decompression: .disabled))
    }

    public func shutdown() async throws {
        try await client.shutdown()
    }

    public func load(_ request: DataRequest, progress: @escaping @Sendable (Int, Int?) -> Void) async throws
        -> DataResponse
    {
        let key = request.url.absoluteString
        let origin = Origin(request.url)
        let deadline =
            NIODeadline.now()
            + .nanoseconds(
                Int64(configuration.timeout.components.seconds) * 1_000_000_000
                    + configuration.timeout.components.attoseconds / 1_000_000_000)
        var url = request.url
        var redirects = 0
        let requestTime = configuration.clock()
        while true {
            var outgoing = HTTPClientRequest(url: url.absoluteString)
            outgoing.method = .GET
            for field in request.headers { outgoing.headers.add(name: field.name, value: field.value) }
            if let credentials = configuration.credentials, Origin(url) == origin {
                let token = Data("\(credentials.user):\(credentials.password)".utf8).base64EncodedString()
                outgoing.headers.replaceOrAdd(name: "Authorization", value: "Basic \(token)")
            }
            let response: HTTPClientResponse
            do {
                response = try await client.execute(outgoing, deadline: deadline, logger: logger)
            } catch {
                throw HTTPDataLoader.map(error, url: key)
            }
            let status = Int(response.status.code)
            if [301, 302, 303, 307, 308].contains(status), let location = response.headers.first(name: "Location") {
                redirects += 1
                guard redirects <= configuration.maxRedirects else {
                    throw ImageLoadingError(.tooManyRedirects(limit: configuration.maxRedirects), url: key)
                }
                guard let next = URL(string: location, relativeTo: url)?.absoluteURL,
                    next.scheme == "http" || next.scheme == "https"
                else { throw ImageLoadingError(.unsupportedURL, url: location) }
                logger.debug("redirect", metadata: ["from": "\(url)", "to": "\(next)", "status": "\(status)"])
                url = next
                continue
            }
            let expected = response.headers.first(name: "Content-Length").flatMap(Int.init)
            if let expected, expected > configuration.maxResponseBytes {
                throw ImageLoadingError(.responseTooLarge(limit: configuration.maxResponseBytes), url: key)
            }
            var body: [UInt8] = []
            if let expected { body.reserveCapacity(expected) }
            do {
                for try await chunk in response.body {
                    guard body.count + chunk.readableBytes <= configuration.maxResponseBytes else {
                        throw ImageLoadingError(.responseTooLarge(limit: configuration.maxResponseBytes), url: key)
                    }
                    body.append(contentsOf: chunk.readableBytesView)
                    progress(body.count, expected)
                }
            } catch let error as ImageLoadingError {
                throw error
            } catch {
                throw HTTPDataLoader.map(error, url: key)
            }
            let headers = response.headers.map { HeaderField($0.name, $0.value) }
            return DataResponse(
                url: url, status: status, headers: headers, body: body, requestTime: requestTime,
                responseTime: configuration.clock())
        }
    }

    static func map(_ error: any Error, url: String) -> ImageLoadingError {
        if error is CancellationError { return ImageLoadingError(.cancelled, url: url) }
        if let client = error as? HTTPClientError {
            switch client {
            case .connectTimeout, .deadlineExceeded, .readTimeout, .writeTimeout, .tlsHandshakeTimeout:
                return ImageLoadingError(.timeout, url: url)
            case .cancelled, .requestStreamCancelled:
                return ImageLoadingError(.cancelled, url: url)
            case .alreadyShutdown:
                return ImageLoadingError(.shutDown, url: url)
            default:
                break
            }
        }
        return ImageLoadingError(.network(String(describing: error)), url: url)
    }
}

/// Scheme, host and port: what "the same origin" means for credentials.
struct Origin: Equatable {
    let scheme: String
    let host: String
    let port: Int

    init(_ url: URL) {
        scheme = url.scheme?.lowercased() ?? ""
        host = url.host?.lowercased() ?? ""
        port = url.port ?? (scheme == "https" ? 443 : 80)
    }
}
