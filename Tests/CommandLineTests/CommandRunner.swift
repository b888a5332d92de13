import Foundation
import TestSupport
import Testing

/// Runs the built `imageloader` executable and collects what it printed.
struct CommandResult {
    let status: Int32
    let stdout: String
    let stderr: String
    let crashed: Bool

    var stderrLines: [Substring] { stderr.split(separator: "\n") }
}

enum Command {
    static let repository = RepositoryPaths.root
    static let fixtures = FixturePaths.root

    /// The executable next to the test bundle (the build products folder), or the one
    /// named by `IMAGELOADER_EXECUTABLE` (to test a release build).
    static let executable: URL = {
        if let path = ProcessInfo.processInfo.environment["IMAGELOADER_EXECUTABLE"], !path.isEmpty {
            return URL(fileURLWithPath: path, relativeTo: repository)
        }
        let candidates = [
            Bundle.main.bundleURL.appendingPathComponent("imageloader"),
            Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("imageloader"),
            repository.appendingPathComponent(".build/debug/imageloader"),
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) } ?? candidates[0]
    }()

    /// Runs `program` (the `imageloader` executable unless given) with `arguments`, and
    /// `environment` added to this process's, waiting for it on the calling thread: only
    /// for a thread that may block (``run(_:program:environment:)`` is the one for tests).
    static func runBlocking(_ arguments: [String], program: URL = executable, environment: [String: String] = [:])
        throws -> CommandResult
    {
        let process = Process()
        process.executableURL = program
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return CommandResult(
            status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
            stderr: String(decoding: stderr, as: UTF8.self),
            crashed: process.terminationReason == .uncaughtSignal)
    }

    static func fixture(_ relative: String) -> String { fixtures + "/" + relative }

    /// ``runBlocking(_:program:environment:)`` on a thread of its own.
    static func run(_ arguments: [String], program: URL = executable, environment: [String: String] = [:])
        async throws -> CommandResult
    {
        try await onThreadOfItsOwn { try Command.runBlocking(arguments, program: program, environment: environment) }
    }

    /// `body` on a new thread: waiting for a process there holds none of the cooperative
    /// pool's threads (two here), which every async test beside it needs, an in-process
    /// origin answering that process included.
    static func onThreadOfItsOwn<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
        }
    }

    /// Runs `body` with a new empty directory, removed afterwards.
    static func withTemporaryDirectory<R>(_ body: (URL) throws -> R) throws -> R {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        return try body(directory)
    }

    static func withTemporaryDirectory<R>(_ body: (URL) async throws -> R) async throws -> R {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        return try await body(directory)
    }
}

extension Command {
    /// Runs the executable with output discarded and returns its exit status, whether a
    /// signal ended it, and its own peak resident memory in KiB.
    ///
    /// The peak is the child's `VmHWM`, read from `/proc` every millisecond while it
    /// runs, not `wait4`'s `ru_maxrss`: glibc's `posix_spawn` starts the child with
    /// `vfork`, and when that child calls `exec` the kernel counts the memory it shared
    /// until then, the test process's, into the child's `ru_maxrss`. With other tests
    /// running beside it the test process peaked at 134 MB, and so did a 32 MB child.
    static func peakMemory(_ arguments: [String]) async throws -> (status: Int32, signaled: Bool, maxRSSKiB: Int) {
        try await onThreadOfItsOwn { try Command.peakMemoryBlocking(arguments) }
    }

    private static func peakMemoryBlocking(_ arguments: [String]) throws -> (
        status: Int32, signaled: Bool, maxRSSKiB: Int
    ) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv = ([executable.path] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable.path, &actions, nil, argv, environ)
        guard spawned == 0 else { throw POSIXError(POSIXErrorCode(rawValue: spawned) ?? .EIO) }
        var status: Int32 = 0
        var peak = 0
        while true {
            let reaped = waitpid(pid, &status, WNOHANG)
            if reaped == pid || (reaped < 0 && errno != EINTR) { break }
            // Until its exec the child shares the test process's memory (glibc's posix_spawn
            // returns only after the exec; this check keeps that from mattering): only once
            // /proc names the executable is VmHWM the executable's own.
            let path = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")) ?? ""
            if path == executable.path || path == executable.resolvingSymlinksInPath().path {
                peak = max(peak, highWaterMarkKiB(pid))
            }
            usleep(1000)
        }
        let signaled = (status & 0x7F) != 0 && (status & 0x7F) != 0x7F
        return ((status >> 8) & 0xFF, signaled, peak)
    }

    /// `VmHWM` of a running process, in KiB; 0 once it has exited.
    private static func highWaterMarkKiB(_ pid: pid_t) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }
}
