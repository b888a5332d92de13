import ArgumentParser
import Foundation
import ImageLoader
import RasterImage

struct BatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "batch",
        abstract: "Make thumbnails of many images through the loader's caches.",
        discussion: """
            INPUT is an http, https or file URL, an image file, a directory (every file inside), or a \
            text file listing inputs, one a line. Thumbnails go to DIR, named after their inputs. A \
            progress bar shows on a terminal (plain lines otherwise); a summary says what came from \
            memory, disk and network and why anything failed. Exits 1 if any input failed. The \
            memory cache defaults to 64 MiB here (--memory-cache-mb): a batch asks for each \
            thumbnail once, and memory stays flat however many images there are.
            """
    )

    @Argument(help: "URLs, files, directories, or text files of them.")
    var inputs: [String]

    @Option(help: "The longest side, in pixels.")
    var size: Int

    @Option(help: "Where to write the thumbnails.")
    var out: String

    @Option(help: "Thumbnails in progress at once.")
    var concurrency = 16

    @Option(help: "Also draw a contact sheet (a grid with names) to this PNG.")
    var sheet: String?

    @Option(
        help:
            "The output format by its extension (\(BatchCommand.formatNames)), or auto (PNG with alpha, JPEG otherwise)."
    )
    var format = "auto"

    @Option(help: "The quality of a lossy format (JPEG, WebP, AVIF, JPEG XL, HEIC), 1-100.")
    var quality = 85

    @Flag(help: "Cover a SIZE x SIZE square and crop, instead of fitting inside it.")
    var fill = false

    @OptionGroup(title: "Loading") var loader: LoaderArguments

    /// The names `--format` takes besides `auto`: every writable format's extensions.
    static var formatNames: String {
        ImageFormat.writable.flatMap(\.traits.fileExtensions).joined(separator: ", ")
    }

    func validate() throws {
        guard size > 0 && size <= 8192 else { throw ValidationError("--size must be between 1 and 8192") }
        guard concurrency > 0 else { throw ValidationError("--concurrency must be positive") }
        guard (1...100).contains(quality) else { throw ValidationError("--quality must be between 1 and 100") }
        guard format == "auto" || OutputFormat(fileExtension: format) != nil else {
            throw ValidationError("--format must be \(BatchCommand.formatNames) or auto")
        }
    }

    var thumbnailOptions: ThumbnailOptions {
        var options = ThumbnailOptions(maxPixelSize: size, fit: fill ? .fill : .fit)
        options.outputFormat =
            format == "auto" ? .automatic(quality: quality) : OutputFormat(fileExtension: format, quality: quality)!
        return options
    }

    func run() async throws {
        let (named, problems) = BatchInputs.expand(inputs)
        let (items, repeats) = BatchInputs.distinct(named)
        guard !items.isEmpty else {
            throw CommandFailure(problems.first.map { "\($0.0): \($0.1)" } ?? "no inputs")
        }
        // Each thumbnail of a batch is asked for once (repeats are dropped): a small memory
        // cache does, and keeps the process's memory flat however many images there are.
        let summary = try await loader.withLoader(memoryCacheDefaultMB: 64) { loader in
            try await BatchRunner(
                loader: loader, options: thumbnailOptions, outputDirectory: out, concurrency: concurrency,
                keepsImages: sheet != nil
            ).run(items)
        }
        var all = summary
        all.repeats = repeats
        all.failures += problems.map { (input: $0.0, reason: $0.1) }
        print(BatchReport.text(all, outputDirectory: out))
        if let sheet {
            try BatchReport.writeSheet(all, to: sheet, size: size)
            print("contact sheet: \(sheet)")
        }
        if !all.failures.isEmpty { throw ExitCode.failure }
    }
}

/// The batch's summary and contact sheet.
enum BatchReport {
    static func text(_ summary: BatchSummary, outputDirectory: String) -> String {
        let seconds = Double(summary.elapsed.components.seconds) + Double(summary.elapsed.components.attoseconds) / 1e18
        let rate = seconds > 0 ? Double(summary.succeeded) / seconds : 0
        var lines = [
            "\(summary.succeeded) of \(summary.total) thumbnails in \(String(format: "%.2f", seconds)) s"
                + " (\(String(format: "%.1f", rate))/s) -> \(outputDirectory)"
        ]
        let network = [LoadedImage.Source.networkToDisk, .networkNotModified, .network]
            .reduce(0) { $0 + summary.bySource[$1, default: 0] }
        lines.append(
            "  from memory \(summary.bySource[.memory, default: 0]), disk \(summary.bySource[.disk, default: 0]),"
                + " network \(network) (downloaded \(summary.bySource[.networkToDisk, default: 0] + summary.bySource[.network, default: 0]),"
                + " not modified \(summary.bySource[.networkNotModified, default: 0])),"
                + " files \(summary.bySource[.localFile, default: 0])")
        if summary.repeats > 0 { lines.append("  repeated inputs \(summary.repeats) (each made once)") }
        lines.append("  failed \(summary.failures.count)")
        let grouped = Dictionary(grouping: summary.failures, by: \.reason).sorted { $0.value.count > $1.value.count }
        for (reason, failures) in grouped {
            let examples = failures.prefix(3).map(\.input).joined(separator: ", ")
            lines.append("    \(failures.count) x \(reason): \(examples)\(failures.count > 3 ? ", ..." : "")")
        }
        return lines.joined(separator: "\n")
    }

    static func writeSheet(_ summary: BatchSummary, to path: String, size: Int) throws {
        let entries = summary.written.map { written in
            let source = written.source.map { $0.displayName + " → " } ?? ""
            return SheetEntry(
                title: URL(fileURLWithPath: written.input).lastPathComponent,
                details: ["\(source)\(written.format.displayName), \(written.image.width)x\(written.image.height)"],
                image: written.image)
        }
        guard let sheet = ContactSheet(cellSize: size).render(entries) else {
            throw CommandFailure("no thumbnails for the contact sheet")
        }
        try Terminal.write(try PNGEncoder().encode(sheet), to: path)
    }
}
