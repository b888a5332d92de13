import ArgumentParser
import RasterImage

struct ValidateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Check that files are whole, decodable images of an accepted type.",
        discussion: """
            Each file is sniffed, checked against the accepted types (and --content-type, when given), \
            then decoded in full, every frame. Exits 0 when every file is good; otherwise prints one line \
            per bad file on stderr and exits 1.
            """
    )

    @Argument(help: "The files to check.")
    var files: [String]

    @Option(help: "The type the files are declared as (as an HTTP Content-Type would say).")
    var contentType: String?

    @Option(
        name: .customLong("accept"),
        help: "An accepted type (repeatable; default: the types of \(Terminal.formatNames)).")
    var accepted: [String] = []

    @Flag(help: "Also print a line for every good file, on stdout.")
    var verbose = false

    func run() throws {
        let types = accepted.isEmpty ? AcceptedContentTypes.default : AcceptedContentTypes(accepted)
        let decoder = ImageDecoder(options: DecodingOptions(frames: .all))
        var bad = 0
        for file in files {
            do {
                let source = ImageSource.file(path: file)
                let head = try source.leadingBytes()
                let format = try types.validate(head, declaredContentType: contentType)
                // Every frame of an animation and every page of a TIFF.
                let pages = try decoder.decodePages(source)
                if verbose {
                    let frames = pages.reduce(0) { $0 + $1.frames.count }
                    print("\(file): ok (\(format.contentType), \(pages[0].width)x\(pages[0].height), \(frames) frames)")
                }
            } catch {
                bad += 1
                Terminal.error("\(file): \(error)")
            }
        }
        if bad > 0 { throw ExitCode.failure }
    }
}
