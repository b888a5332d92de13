import ArgumentParser
import Dispatch
import ImageLoader
import RasterImage
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

@main
struct ImageLoaderCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "imageloader",
        abstract: "Load, decode, validate and thumbnail images, with caches that follow HTTP's rules.",
        subcommands: [
            InfoCommand.self, DecodeCommand.self, ValidateCommand.self, ThumbnailCommand.self, LoadCommand.self,
            BatchCommand.self, CacheCommand.self, DemoCommand.self,
        ]
    )

    /// Runs the command. Failures end with exit code 1 and one line on stderr; usage
    /// mistakes keep ArgumentParser's usage message and code.
    ///
    /// A synchronous entry point on purpose: an async `main` parks the main thread in
    /// `dispatch_main`, which ends it with `pthread_exit`, a forced unwind that reads the
    /// executable's unwind tables (about 0.6 MB more resident memory for a thumbnail).
    /// Async commands run on the cooperative pool while the main thread, which is not
    /// one of the pool's threads and has no main-actor work to do, waits for them.
    static func main() {
        do {
            var command = try parseAsRoot()
            if let asyncCommand = command as? AsyncParsableCommand {
                try runAndWait(asyncCommand)
            } else {
                try command.run()
            }
        } catch let error as CommandFailure {
            Terminal.error(error.description)
            Glibc.exit(1)
        } catch let error as ImageDecodingError {
            Terminal.error(error.description)
            Glibc.exit(1)
        } catch let error as ImageEncodingError {
            Terminal.error(error.description)
            Glibc.exit(1)
        } catch let error as ImageLoadingError {
            Terminal.error(error.description)
            Glibc.exit(1)
        } catch {
            exit(withError: error)
        }
    }
}

/// Runs an async command to its end, blocking the calling (main) thread until it has.
private func runAndWait(_ command: sending any AsyncParsableCommand) throws {
    let outcome = Mutex<Result<Void, any Error>?>(nil)
    let finished = DispatchSemaphore(value: 0)
    Task {
        var command = command
        do {
            try await command.run()
            outcome.withLock { $0 = .success(()) }
        } catch {
            outcome.withLock { $0 = .failure(error) }
        }
        finished.signal()
    }
    finished.wait()
    try outcome.withLock { $0 }?.get()
}

/// A failure the command reports in one line.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
