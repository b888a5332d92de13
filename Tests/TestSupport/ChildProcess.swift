import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// A program the tests run: its output collected on a thread of its own (a full pipe
/// never blocks it), waited for without holding a thread of the cooperative pool.
public final class ChildProcess: Sendable {
    /// How a finished program ended.
    public struct Result: Sendable {
        public let status: Int32
        public let stdout: String
        public let stderr: String
        /// Whether a signal ended it (a crash, or the tests' own SIGTERM).
        public let signaled: Bool
    }

    private let process: Process
    private let stdout = NIOLockedValueBox(Data())
    private let stderr = NIOLockedValueBox(Data())
    private let drained = NIOLockedValueBox(0)

    /// Starts `executable` with `arguments`, in `directory`, with `environment` added to
    /// this process's.
    public init(
        _ executable: URL, _ arguments: [String] = [], environment: [String: String] = [:], directory: URL? = nil
    ) throws {
        process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        if let directory { process.currentDirectoryURL = directory }
        let (out, err) = (Pipe(), Pipe())
        process.standardOutput = out
        process.standardError = err
        try process.run()
        for (pipe, box) in [(out, stdout), (err, stderr)] {
            let handle = pipe.fileHandleForReading
            Thread.detachNewThread { [drained] in
                while true {
                    let data = handle.availableData
                    if data.isEmpty { break }
                    box.withLockedValue { $0.append(data) }
                }
                drained.withLockedValue { $0 += 1 }
            }
        }
    }

    /// What it printed on standard output so far.
    public var output: String { String(decoding: stdout.withLockedValue { $0 }, as: UTF8.self) }

    /// Waits until standard output holds a match of `pattern` (a regular expression) and
    /// returns the match; `nil` if the program ends first or `seconds` pass.
    public func waitForOutput(matching pattern: String, seconds: Double = 120) async -> String? {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            let text = output
            if let range = text.range(of: pattern, options: .regularExpression) { return String(text[range]) }
            if !process.isRunning { return nil }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    /// Sends SIGTERM, then waits for the end.
    public func terminate() async -> Result {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        return await result()
    }

    /// Waits for the end, and for both pipes to be drained.
    public func result() async -> Result {
        let process = self.process
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                process.waitUntilExit()
                continuation.resume()
            }
        }
        while drained.withLockedValue({ $0 }) < 2 { try? await Task.sleep(for: .milliseconds(5)) }
        return Result(
            status: process.terminationStatus, stdout: output,
            stderr: String(decoding: stderr.withLockedValue { $0 }, as: UTF8.self),
            signaled: process.terminationReason == .uncaughtSignal)
    }

    /// Runs a program to its end.
    public static func run(
        _ executable: URL, _ arguments: [String] = [], environment: [String: String] = [:], directory: URL? = nil
    ) async throws -> Result {
        try await ChildProcess(executable, arguments, environment: environment, directory: directory).result()
    }
}
