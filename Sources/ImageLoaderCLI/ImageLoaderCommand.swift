import ArgumentParser
import ImageLoader
import ImageLoaderSupport
import RasterImage

@main
struct ImageLoaderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "imageloader",
        abstract: "Load, decode, validate and thumbnail images, with caches that follow HTTP's rules.",
        subcommands: [
            InfoCommand.self, DecodeCommand.self, ValidateCommand.self, ThumbnailCommand.self, LoadCommand.self,
            BatchCommand.self, CacheCommand.self, DemoCommand.self, ServeCommand.self,
        ]
    )

    /// Runs the command. Failures end with exit code 1 and one line on stderr; usage
    /// mistakes keep ArgumentParser's usage message and code.
    static func main() async {
        var command: any ParsableCommand
        do {
            command = try parseAsRoot()
        } catch {
            exit(withError: error)
        }
        do {
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            // ArgumentParser's own (usage mistakes, help asked for, exit codes) keep its
            // messages and codes; everything else is one line, without the libraries' dumps.
            if String(reflecting: type(of: error)).hasPrefix("ArgumentParser.") { exit(withError: error) }
            Terminal.error(Terminal.describe(error))
            System.exit(1)
        }
    }
}

/// A failure the command reports in one line.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
