import Foundation
import NIOConcurrencyHelpers

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A real object store for a test (scripts/storage-server.py, in the virtual environment
/// scripts/storage-servers.sh makes): moto's S3 server with its signature checks,
/// fake-gcs-server, or an Azure Blob endpoint that checks Shared Key signatures with
/// azure-storage-blob's code. Objects are written through the provider's own API; the
/// store's log of requests is read back to count what reached it.
public final class StorageServer: Sendable {
    public enum Kind: String, Sendable { case s3, gcs, azure }

    public let kind: Kind
    /// The store's endpoint, `http://127.0.0.1:PORT`.
    public let endpoint: String
    /// What `READY` said: endpoint, credentials (S3: accessKeyID, secretAccessKey, region;
    /// Azure: accountName, accountKey).
    public let settings: [String: String]
    private let control: String
    private let process: ChildProcess
    private let syncs = NIOLockedValueBox(0)

    /// The package's root folder.
    public static let packageRoot = RepositoryPaths.root

    public struct NotInstalled: Error, CustomStringConvertible {
        public let description =
            "the storage servers' virtual environment is missing: run bash scripts/storage-servers.sh install"
    }

    public struct DidNotStart: Error, CustomStringConvertible {
        public let description: String
    }

    /// Starts a store of `kind` and waits until it is ready.
    public static func start(_ kind: Kind) async throws -> StorageServer {
        let python = packageRoot.appendingPathComponent(".build/storage-venv/bin/python")
        guard FileManager.default.isExecutableFile(atPath: python.path) else { throw NotInstalled() }
        let process = try ChildProcess(
            python, [packageRoot.appendingPathComponent("scripts/storage-server.py").path, kind.rawValue])
        guard let line = await process.waitForOutput(matching: "READY \\{[^\n]*\\}", seconds: 120),
            let json = try? JSONSerialization.jsonObject(with: Data(line.dropFirst(6).utf8)) as? [String: String],
            let endpoint = json["endpoint"], let control = json["control"]
        else {
            let result = await process.terminate()
            throw DidNotStart(description: "\(kind) store did not start: \(result.stderr.suffix(2000))")
        }
        return StorageServer(kind: kind, endpoint: endpoint, settings: json, control: control, process: process)
    }

    private init(kind: Kind, endpoint: String, settings: [String: String], control: String, process: ChildProcess) {
        self.kind = kind
        self.endpoint = endpoint
        self.settings = settings
        self.control = control
        self.process = process
    }

    /// Writes `bytes` to `bucket`/`key` through the provider's API; returns the version
    /// the store gave it (an S3 version ID, a GCS generation), if any.
    @discardableResult
    public func put(_ bucket: String, _ key: String, _ bytes: [UInt8], type: String, cacheControl: String? = nil)
        async throws -> String?
    {
        let path = "/object/\(bucket)/" + (key.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? key)
        var request = URLRequest(url: URL(string: control + path)!)
        request.httpMethod = "PUT"
        request.setValue(type, forHTTPHeaderField: "Content-Type")
        if let cacheControl { request.setValue(cacheControl, forHTTPHeaderField: "Cache-Control") }
        request.httpBody = Data(bytes)
        _ = try await send(request)
        var read = URLRequest(url: URL(string: control + path)!)
        read.httpMethod = "GET"
        let version = String(decoding: try await send(read), as: UTF8.self)
        return version.isEmpty ? nil : version
    }

    /// Makes the store answer 503 to everything (`true`), or serve again.
    public func setDown(_ down: Bool) async throws {
        try await post(down ? "/down" : "/up")
    }

    /// Makes reads wait (`true`) until released (`false`): many requests can then be
    /// seen to meet one read. Each held read is logged.
    public func setHolding(_ holding: Bool) async throws {
        try await post(holding ? "/hold" : "/release")
    }

    /// How many reads are waiting, or have waited, on a hold.
    public var heldReads: Int {
        process.output.split(separator: "\n").filter { $0.hasPrefix("HELD ") }.count
    }

    private func post(_ path: String) async throws {
        var request = URLRequest(url: URL(string: control + path)!)
        request.httpMethod = "POST"
        _ = try await send(request)
    }

    private func send(_ request: URLRequest) async throws -> Data {
        var request = request
        // The control endpoint answers at once; a request that hangs is an error, not a wait.
        request.timeoutInterval = 30
        return try await withCheckedThrowingContinuation { continuation in
            URLSession.shared.dataTask(with: request) { data, _, error in
                if let error {
                    continuation.resume(throwing: error)
                } else {
                    continuation.resume(returning: data ?? Data())
                }
            }.resume()
        }
    }

    /// The requests the store has answered, as `METHOD PATH STATUS`, in order: every one
    /// whose answer has reached a client (the store logs each before answering, and this
    /// reads its log up to a mark it asks the store to write now).
    public func requests() async throws -> [String] {
        let mark = syncs.withLockedValue { value -> Int in
            value += 1
            return value
        }
        var request = URLRequest(url: URL(string: control + "/sync/\(mark)")!)
        request.httpMethod = "GET"
        _ = try await send(request)
        guard await process.waitForOutput(matching: "SYNC \(mark)\n", seconds: 120) != nil else {
            throw DidNotStart(description: "the \(kind) store's log did not reach mark \(mark)")
        }
        return process.output.split(separator: "\n").filter { $0.hasPrefix("REQUEST ") }.map { String($0.dropFirst(8)) }
    }

    /// How many requests with `method` had a path containing `fragment` (as ``requests()``).
    public func count(_ method: String, _ fragment: String) async throws -> Int {
        try await requests().filter { $0.hasPrefix(method + " ") && $0.contains(fragment) }.count
    }

    public func stop() async {
        _ = await process.terminate()
    }
}
