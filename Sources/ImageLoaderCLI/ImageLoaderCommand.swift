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
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as CommandFailure {
            Terminal.error(error.description)
            System.exit(1)
        } catch let error as ImageDecodingError {
            Terminal.error(error.description)
            System.exit(1)
        } catch let error as ImageEncodingError {
            Terminal.error(error.description)
            System.exit(1)
        } catch let error as ImageLoadingError {
            Terminal.error(error.description)
            System.exit(1)
        } catch {
            exit(withError: error)
        }
    }
}

/// A failure the command reports in one line.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
