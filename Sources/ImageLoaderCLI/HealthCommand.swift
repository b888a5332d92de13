import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore

/// `imageloader health`: imgproxy's `imgproxy health`, for a container's health check and
/// probes in images without curl. It reads the address as `serve` does (the same options
/// and variables), so one environment configures both.
struct HealthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "health",
        abstract: "Exit 0 when the service configured by the same variables answers /health with 200, 1 otherwise.",
        discussion: """
            The address is serve's: --host and --port, else IMAGELOADER_HOST and IMAGELOADER_PORT, else \
            IMGPROXY_BIND, else PORT, else :8080; an address of every interface (0.0.0.0, ::) is asked on \
            loopback. The path is /health under --path-prefix (IMGPROXY_PATH_PREFIX). A draining service \
            (after SIGTERM) answers 503: not healthy.
            """)

    @Option(help: "The address serve listens on (IMGPROXY_BIND: host:port) [default: 127.0.0.1].")
    var host: String?

    @Option(help: "The port serve listens on (PORT) [default: 8080].")
    var port: Int?

    @Option(help: "The path all routes are under (IMGPROXY_PATH_PREFIX).")
    var pathPrefix: String?

    @Option(help: "Seconds to wait for the answer.")
    var wait: Double = 2

    func run() async throws {
        let environment = ImgproxyEnvironment(ProcessInfo.processInfo.environment)
        let (host, port) = try ServeCommand.address(host: host, port: port, environment: environment)
        var prefix = pathPrefix ?? environment.text("IMGPROXY_PATH_PREFIX") ?? ""
        if prefix.hasSuffix("/") { prefix.removeLast() }
        let probed = ["0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"][host] ?? host
        let authority = probed.contains(":") ? "[\(probed)]:\(port)" : "\(probed):\(port)"
        guard wait > 0, wait <= 600 else { throw ValidationError("--wait is above 0, at most 600") }
        let url = "http://\(authority)\(prefix)/health"
        let client = HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: .init(
                redirectConfiguration: .disallow,
                timeout: .init(connect: .milliseconds(Int64(wait * 1000)), read: .milliseconds(Int64(wait * 1000)))))
        let status: UInt
        do {
            let response = try await client.execute(
                HTTPClientRequest(url: url), timeout: .milliseconds(Int64(wait * 1000)))
            status = response.status.code
            _ = try? await response.body.collect(upTo: 1 << 16)
        } catch {
            try? await client.shutdown()
            throw CommandFailure("\(url): \(Terminal.describe(error))")
        }
        try await client.shutdown()
        guard status == 200 else { throw CommandFailure("\(url) answered \(status)") }
        Terminal.line("ok: \(url)")
    }
}
