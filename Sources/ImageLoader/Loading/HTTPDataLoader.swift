import AsyncHTTPClient
import Foundation
import ImageLoaderSupport
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import RasterImage

/// HTTP through AsyncHTTPClient: one client, redirects followed here (so credentials,
/// and header fields that carry them, are sent to the first origin only), a connect
/// timeout, a read (idle) timeout, a total deadline over the whole redirect chain and
/// every body byte, and caps on the header fields and on the body, checked as they arrive.
public final class HTTPDataLoader: DataLoading {
    /// The HTTP client's settings: timeouts, caps, redirects, credentials, TLS.
    ///
    /// ```swift
    /// var http = HTTPDataLoader.Configuration()
    /// http.connectTimeout = .milliseconds(500)
    /// http.maxResponseBytes = 20 << 20
    /// ```
    public struct Configuration: Sendable {
        /// The longest wait for a connection (sub-second values work).
        public var connectTimeout: Duration = .seconds(10)
        /// The longest wait for the next bytes of a response (sub-second values work).
        public var readTimeout: Duration = .seconds(30)
        /// From the first byte sent to the last body byte received, redirects included.
        public var timeout: Duration = .seconds(60)
        /// The largest body accepted; a larger one fails with `.responseTooLarge`, checked as it arrives.
        public var maxResponseBytes = 50 << 20
        /// The most bytes of header fields (names and values) a response may have.
        public var maxHeaderBytes = 64 << 10
        /// The most redirects followed before `.tooManyRedirects`.
        public var maxRedirects = 5
        /// Request header fields sent only to the origin of the URL asked for, dropped
        /// when a redirect leads to another origin (lowercased names).
        public var sameOriginHeaders: Set<String> = ["authorization", "proxy-authorization", "cookie"]
        /// Basic authentication, sent only to the origin of the URL asked for.
        public var credentials: (user: String, password: String)?
        /// Accept any TLS certificate. Off by default; for tests and closed networks only.
        public var trustAnySSLCertificate = false
        /// Which resolved addresses a connection may go to (given as numeric text,
        /// `"203.0.113.7"` or `"2001:db8::1"`), checked for the first request and again
        /// for every redirect. When set, the loader resolves each host itself and
        /// connects to the first address the filter allows, pinned: the connection goes
        /// to exactly the address that was checked, so a second DNS answer (rebinding)
        /// cannot send it elsewhere. TLS still verifies the certificate for the host
        /// name. When no address is allowed the load fails with
        /// ``ImageLoadingError/Reason/forbiddenAddress(host:addresses:)``. Names are
        /// resolved on 16 threads of the loader's own, not on NIO's shared blocking
        /// pool: a name server that never answers holds up only lookups.
        /// `nil` (the default): the client resolves and connects as usual.
        ///
        /// ```swift
        /// http.addressFilter = { address in !address.hasPrefix("127.") && address != "::1" }
        /// ```
        public var addressFilter: (@Sendable (String) -> Bool)?
        /// The clock for the request and response times (tests substitute their own).
        public var clock: @Sendable () -> Date = { Date() }

        /// The defaults.
        public init() {}
    }

    private let client: HTTPClient
    /// Whether the client is this loader's own, to shut down with it.
    private let ownsClient: Bool
    private let configuration: Configuration
    private let logger: Logger
    /// The clients pinned to checked addresses, when there is an address filter.
    private let pinned: PinnedClients?

    /// A loader with its own client, built from `configuration`.
    public init(configuration: Configuration = Configuration(), logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        client = HTTPDataLoader.makeClient(configuration, dnsOverride: [:])
        ownsClient = true
        pinned = configuration.addressFilter.map { _ in PinnedClients(configuration) }
    }

    /// A client with `configuration`'s TLS and timeouts, following no redirects itself.
    static func makeClient(_ configuration: Configuration, dnsOverride: [String: String]) -> HTTPClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        if configuration.trustAnySSLCertificate { tls.certificateVerification = .none }
        var settings = HTTPClient.Configuration(
            tlsConfiguration: tls, redirectConfiguration: .disallow,
            // NIO's Duration conversion keeps sub-second parts and clamps instead of overflowing.
            timeout: HTTPClient.Configuration.Timeout(
                connect: TimeAmount(configuration.connectTimeout), read: TimeAmount(configuration.readTimeout)),
            decompression: .disabled)
        settings.dnsOverride = dnsOverride
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: settings)
    }

    /// A loader sending through `client`, which the application owns: ``shutdown()``
    /// leaves it running. The client's connect and read timeouts and TLS settings
    /// apply; `configuration`'s total timeout, caps and redirect rules too.
    ///
    /// ```swift
    /// let client = HTTPClient(eventLoopGroupProvider: .singleton)
    /// let loader = HTTPDataLoader(client: client, logger: logger)
    /// ```
    public init(client: HTTPClient, configuration: Configuration = Configuration(), logger: Logger) {
        self.client = client
        self.configuration = configuration
        self.logger = logger
        ownsClient = false
        pinned = configuration.addressFilter.map { _ in PinnedClients(configuration) }
    }

    public func shutdown() async throws {
        try await runEvery([
            { try await self.pinned?.shutdown() },
            { if self.ownsClient { try await self.client.shutdown() } },
        ])
    }

    /// The client for a request to `url`: the shared one, or, with an address filter,
    /// one pinned to the first allowed address of the URL's host (resolved now, for
    /// this hop).
    private func client(for url: URL, key: String) async throws -> HTTPClient {
        guard let filter = configuration.addressFilter, let pinned else { return client }
        var host = url.host ?? ""
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let name = host
        let resolved = try await pinned.resolver.run { Resolver.addresses(of: name) }
        switch resolved {
        case .failure(let error):
            throw ImageLoadingError(.network("cannot resolve \(host): \(error.message)"), url: key)
        case .success(let addresses):
            guard let address = addresses.first(where: filter) else {
                logger.warning("address refused", metadata: ["host": "\(host)", "addresses": "\(addresses)"])
                throw ImageLoadingError(.forbiddenAddress(host: host, addresses: addresses), url: key)
            }
            return pinned.client(host: host, address: address)
        }
    }

    public func load(_ request: DataRequest, progress: @escaping @Sendable (Int, Int?) -> Void) async throws
        -> DataResponse
    {
        let key = request.url.absoluteString
        let timeout = TimeAmount(configuration.timeout)
        let deadline = NIODeadline.now() + timeout
        // AsyncHTTPClient's deadline covers the response head only: the body races a
        // timer, so a body that trickles in (or never ends) fails at the deadline.
        return try await withThrowingTaskGroup(of: DataResponse?.self) { group in
            group.addTask { try await self.exchange(request, deadline: deadline, progress: progress) }
            group.addTask {
                try await Task.sleep(nanoseconds: UInt64(max(0, timeout.nanoseconds)))
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let response = first else {
                throw ImageLoadingError(.timeout, url: key)
            }
            return response
        }
    }

    /// The request, its redirects and the final response's body.
    private func exchange(
        _ request: DataRequest, deadline: NIODeadline, progress: @escaping @Sendable (Int, Int?) -> Void
    ) async throws -> DataResponse {
        let key = request.url.absoluteString
        let origin = Origin(request.url)
        var url = request.url
        var redirects = 0
        let requestTime = configuration.clock()
        while true {
            var outgoing = HTTPClientRequest(url: url.absoluteString)
            outgoing.method = .GET
            let sameOrigin = Origin(url) == origin
            for field in request.headers
            where sameOrigin || !configuration.sameOriginHeaders.contains(field.name.lowercased()) {
                outgoing.headers.add(name: field.name, value: field.value)
            }
            if let credentials = configuration.credentials, sameOrigin {
                let token = Data("\(credentials.user):\(credentials.password)".utf8).base64EncodedString()
                outgoing.headers.replaceOrAdd(name: "Authorization", value: "Basic \(token)")
            }
            let response: HTTPClientResponse
            do {
                let client = try await client(for: url, key: key)
                response = try await client.execute(outgoing, deadline: deadline, logger: logger)
            } catch let error as ImageLoadingError {
                throw error
            } catch {
                throw HTTPDataLoader.map(error, url: key)
            }
            let headerBytes = response.headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count }
            guard headerBytes <= configuration.maxHeaderBytes else {
                throw ImageLoadingError(
                    .invalidResponse("header fields larger than \(configuration.maxHeaderBytes) bytes"), url: key)
            }
            let status = Int(response.status.code)
            if [301, 302, 303, 307, 308].contains(status), let location = response.headers.first(name: "Location") {
                redirects += 1
                guard redirects <= configuration.maxRedirects else {
                    throw ImageLoadingError(.tooManyRedirects(limit: configuration.maxRedirects), url: key)
                }
                guard let next = URL(string: location, relativeTo: url)?.absoluteURL,
                    next.scheme == "http" || next.scheme == "https", next.host != nil
                else { throw ImageLoadingError(.unsupportedURL, url: location) }
                logger.debug("redirect", metadata: ["from": "\(url)", "to": "\(next)", "status": "\(status)"])
                url = next
                continue
            }
            // Digits only: "-1", "+5" or a number past Int.max is no length at all.
            let expected = response.headers.first(name: "Content-Length").flatMap { Checked.decimal($0) }
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
            if let expected, status != 304, status != 204, expected != body.count {
                throw ImageLoadingError(
                    .invalidResponse("\(body.count) body bytes for a Content-Length of \(expected)"), url: key)
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
            case .remoteConnectionClosed:
                // A connection failure like a reset, not a malformed response: the origin
                // went away (while it was asked, or before it finished).
                return ImageLoadingError(.network("the connection closed before the response ended"), url: url)
            default:
                break
            }
        }
        if let parser = error as? HTTPParserError {
            return ImageLoadingError(.invalidResponse("malformed HTTP (\(parser))"), url: url)
        }
        return ImageLoadingError(.network(String(describing: error)), url: url)
    }
}

/// HTTP clients that each connect one host name to one checked address (AsyncHTTPClient's
/// `dnsOverride`, which keeps SNI and certificate checks on the name), so connections to
/// the same pair are pooled. At most `capacity` are kept; the oldest is shut down, after
/// the longest a request on it may still run.
final class PinnedClients: Sendable {
    private let state = NIOLockedValueBox<(clients: [String: HTTPClient], order: [String])>(([:], []))
    private let configuration: HTTPDataLoader.Configuration
    static let capacity = 64
    /// Where host names are resolved: threads of the loader's own, so lookups that
    /// hang on a slow name server hold up neither each other (up to this many) nor the
    /// rest of the process.
    let resolver = WaitingThreads(threads: 16)

    init(_ configuration: HTTPDataLoader.Configuration) {
        self.configuration = configuration
    }

    func client(host: String, address: String) -> HTTPClient {
        let key = host + " " + address
        let (client, evicted) = state.withLockedValue { state -> (HTTPClient, HTTPClient?) in
            if let client = state.clients[key] { return (client, nil) }
            let client = HTTPDataLoader.makeClient(configuration, dnsOverride: [host: address])
            state.clients[key] = client
            state.order.append(key)
            guard state.order.count > PinnedClients.capacity else { return (client, nil) }
            let oldest = state.order.removeFirst()
            return (client, state.clients.removeValue(forKey: oldest))
        }
        if let evicted {
            let grace = configuration.timeout
            Task {
                try? await Task.sleep(for: grace)
                try? await evicted.shutdown()
            }
        }
        return client
    }

    /// Shuts every client down, oldest first, then the resolver's threads: each of them
    /// even when one before it throws (an already shut down client does); the first
    /// error is rethrown.
    func shutdown() async throws {
        let clients = state.withLockedValue { state in
            defer { state = ([:], []) }
            return state.order.compactMap { state.clients[$0] }
        }
        try await runEvery(
            clients.map { client in { try await client.shutdown() } } + [{ await self.resolver.shutdown() }])
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
