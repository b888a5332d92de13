import AsyncHTTPClient
import Foundation
import ImageLoaderSupport
import Logging
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
        // A connection that fails fails the request at once: the client's own retries
        // (with backoff, until the connect timeout) made a refused connection cost the
        // whole timeout. `exchange` retries what may pass, a bounded number of times.
        settings.connectionPool.retryConnectionEstablishment = false
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

    /// ``Configuration/addressFilter``, which every connection of this loader passes.
    public func addressFilter(for url: URL) -> (@Sendable (String) -> Bool)? { configuration.addressFilter }

    public func shutdown() async throws {
        try await runEvery([
            { try await self.pinned?.shutdown() },
            { if self.ownsClient { try await self.client.shutdown() } },
        ])
    }

    /// The client for a request to `url`: the shared one, or, with an address filter,
    /// one pinned to the first allowed address of the URL's host (resolved now, for
    /// this hop), and that address.
    private func client(for url: URL, key: String) async throws -> (HTTPClient, address: String?) {
        guard let filter = configuration.addressFilter, let pinned else { return (client, nil) }
        var host = url.host ?? ""
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let name = host
        let resolved = try await pinned.resolver.run { Resolver.addresses(of: name) }
        switch resolved {
        case .failure(let error):
            let failure = ConnectionFailure(
                .nameNotResolved, host: host, port: Origin(url).port, detail: error.message.lowercased())
            throw ImageLoadingError(.cannotConnect(failure), url: key)
        case .success(let addresses):
            guard let address = addresses.first(where: filter) else {
                logger.warning("address refused", metadata: ["host": "\(host)", "addresses": "\(addresses)"])
                throw ImageLoadingError(.forbiddenAddress(host: host, addresses: addresses), url: key)
            }
            return (pinned.client(host: host, address: address), address)
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
        var addresses: [String] = []
        let requestTime = configuration.clock()
        while true {
            var outgoing = HTTPClientRequest(url: url.absoluteString)
            outgoing.method = HTTPMethod(rawValue: request.method)
            if let body = request.body { outgoing.body = .bytes(ByteBuffer(bytes: body)) }
            let sameOrigin = Origin(url) == origin
            for field in request.headers
            where sameOrigin || !configuration.sameOriginHeaders.contains(field.name.lowercased()) {
                outgoing.headers.add(name: field.name, value: field.value)
            }
            if let credentials = configuration.credentials, sameOrigin {
                let token = Data("\(credentials.user):\(credentials.password)".utf8).base64EncodedString()
                outgoing.headers.replaceOrAdd(name: "Authorization", value: "Basic \(token)")
            }
            let (response, address) = try await send(outgoing, to: url, key: key, deadline: deadline)
            if let address { addresses.append(address) }
            let headerBytes = response.headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count }
            guard headerBytes <= configuration.maxHeaderBytes else {
                throw ImageLoadingError(
                    .invalidResponse("header fields larger than \(configuration.maxHeaderBytes) bytes"), url: key)
            }
            let status = Int(response.status.code)
            if request.method == "GET", [301, 302, 303, 307, 308].contains(status),
                let location = response.headers.first(name: "Location")
            {
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
                throw HTTPDataLoader.map(error, url: url, key: key)
            }
            if let expected, status != 304, status != 204, expected != body.count {
                throw ImageLoadingError(
                    .invalidResponse("\(body.count) body bytes for a Content-Length of \(expected)"), url: key)
            }
            let headers = response.headers.map { HeaderField($0.name, $0.value) }
            return DataResponse(
                url: url, status: status, headers: headers, body: body, requestTime: requestTime,
                responseTime: configuration.clock(), connectedAddresses: pinned == nil ? nil : addresses)
        }
    }

    /// Delays before the attempts after the first, when sending fails before any
    /// response in a way that may pass (``isTransient(_:)``): two more attempts at most,
    /// within the request's deadline.
    static let retryDelays: [Duration] = [.milliseconds(50), .milliseconds(250)]

    /// Sends one request (one hop of a redirect chain) and waits for the response head.
    /// A failure that waiting cannot mend (refused, unreachable, unresolvable, TLS) ends
    /// it at once; one that may pass (a reset or an abort before the response, no local
    /// port or buffer free) is tried again after ``retryDelays``.
    private func send(_ request: HTTPClientRequest, to url: URL, key: String, deadline: NIODeadline) async throws
        -> (HTTPClientResponse, address: String?)
    {
        var attempt = 0
        while true {
            do {
                let (client, address) = try await client(for: url, key: key)
                return (try await client.execute(request, deadline: deadline, logger: logger), address)
            } catch let error as ImageLoadingError {
                throw error
            } catch {
                guard attempt < HTTPDataLoader.retryDelays.count, HTTPDataLoader.isTransient(error),
                    NIODeadline.now() + TimeAmount(HTTPDataLoader.retryDelays[attempt]) < deadline
                else { throw HTTPDataLoader.map(error, url: url, key: key) }
                logger.debug(
                    "retrying", metadata: ["url": "\(url)", "attempt": "\(attempt + 2)", "error": "\(error)"])
                try await Task.sleep(for: HTTPDataLoader.retryDelays[attempt])
                attempt += 1
            }
        }
    }

    /// The system's error numbers for failures before a response that may pass.
    static let transientErrnos: Set<Int32> = [ECONNRESET, ECONNABORTED, EPIPE, EAGAIN, EADDRNOTAVAIL, ENOBUFS]

    /// Whether `error`, met before any response, may pass if the request is sent again.
    static func isTransient(_ error: any Error) -> Bool {
        switch error {
        case let error as IOError: return transientErrnos.contains(error.errnoCode)
        case let error as NIOConnectionError:
            return !error.connectionErrors.isEmpty && error.connectionErrors.allSatisfy { isTransient($0.error) }
        default: return false
        }
    }

    /// The typed error for what the HTTP client (or NIO, or the TLS library) threw for `url`.
    static func map(_ error: any Error, url: URL, key: String) -> ImageLoadingError {
        var host = url.host ?? ""
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if let failure = ConnectionFailure(error, host: host, port: Origin(url).port) {
            return ImageLoadingError(.cannotConnect(failure), url: key)
        }
        return map(error, url: key)
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
        return ImageLoadingError(.network(HTTPDataLoader.describe(error)), url: url)
    }

    /// An error in words without the libraries' decoration: NIO's `IOError` text
    /// ("connection reset (error set): Connection refused) (errno: 111)") becomes the
    /// system's text for its error number.
    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as IOError: return System.describe(errno: error.errnoCode)
        case let error as NIOConnectionError:
            if let first = error.connectionErrors.first { return describe(first.error) }
            return String(describing: error)
        default: return String(describing: error)
        }
    }
}

extension ConnectionFailure {
    /// The failure `error` stands for, when it is one that waiting would not mend; `nil`
    /// for anything else (a timeout, a reset, a failure after connecting).
    init?(_ error: any Error, host: String, port: Int) {
        switch error {
        case let error as IOError:
            guard let kind = ConnectionFailure.kind(errno: error.errnoCode) else { return nil }
            self.init(kind, host: host, port: port, detail: System.describe(errno: error.errnoCode).lowercased())
        case let error as NIOConnectionError:
            if error.connectionErrors.isEmpty, let lookup = error.dnsAError ?? error.dnsAAAAError {
                let detail = (lookup as? SocketAddressError.UnknownHost)?.errorDescription ?? "\(lookup)"
                self.init(.nameNotResolved, host: host, port: port, detail: detail.lowercased())
                return
            }
            // Every address tried failed for a reason of that kind: the first one speaks for all.
            let failures = error.connectionErrors.map { ConnectionFailure($0.error, host: host, port: port) }
            guard let first = failures.first, let failure = first, failures.allSatisfy({ $0 != nil }) else {
                return nil
            }
            self = failure
        case let error as SocketAddressError.UnknownHost:
            self.init(.nameNotResolved, host: host, port: port, detail: error.errorDescription.lowercased())
        case let error as NIOSSLError:
            switch error {
            case .handshakeFailed(let reason):
                self.init(.tlsHandshake, host: host, port: port, detail: ConnectionFailure.words(reason))
            case .unableToValidateCertificate, .noCertificateToValidate, .cannotMatchULabel:
                self.init(.tlsHandshake, host: host, port: port, detail: "\(error)")
            default:
                return nil
            }
        case let error as NIOSSLExtraError:
            guard error == .failedToValidateHostname || error == .serverHostnameImpossibleToMatch else { return nil }
            self.init(.tlsHandshake, host: host, port: port, detail: "the certificate does not name \(host)")
        default:
            return nil
        }
    }

    /// The kind of a `connect` failure by its error number, when waiting would not mend it.
    static func kind(errno: Int32) -> Kind? {
        switch errno {
        case ECONNREFUSED: .refused
        case ENETUNREACH, EHOSTUNREACH, EACCES, EPERM, ENETDOWN, EHOSTDOWN: .unreachable
        default: nil
        }
    }

    /// BoringSSL's reasons in words: "error:1000007d:SSL routines:OPENSSL_internal:
    /// CERTIFICATE_VERIFY_FAILED at ..." becomes "certificate verify failed".
    static func words(_ error: BoringSSLError) -> String {
        let text = "\(error)"
        var reasons: [String] = []
        for part in text.split(separator: ":") {
            let token = part.split(separator: " ").first.map(String.init) ?? ""
            if token.count > 3, token.allSatisfy({ $0.isUppercase || $0 == "_" || $0.isNumber }),
                token.contains(where: \.isLetter)
            {
                let phrase = token.replacingOccurrences(of: "_", with: " ").lowercased()
                if !reasons.contains(phrase) { reasons.append(phrase) }
            }
        }
        return reasons.isEmpty ? text : reasons.joined(separator: ", ")
    }
}

/// HTTP clients that each connect one host name to one checked address (AsyncHTTPClient's
/// `dnsOverride`, which keeps SNI and certificate checks on the name), so connections to
/// the same pair are pooled. At most `capacity` are kept; the oldest is shut down, after
/// the longest a request on it may still run.
///
/// Not a ``BoundedCache`` user: an evicted client must be shut down, which the cache
/// does not report; the order of arrival is the eviction order here.
final class PinnedClients: Sendable {
    /// A host name and the address it is pinned to.
    private struct Key: Hashable, Sendable {
        let host: String
        let address: String
    }

    private let state = Lock<(clients: [Key: HTTPClient], order: [Key])>(([:], []))
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
        let key = Key(host: host, address: address)
        let (client, evicted) = state.withLock { state -> (HTTPClient, HTTPClient?) in
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
        let clients = state.withLock { state in
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
