import Foundation
import ImageLoader
import ImageLoaderSupport
import RasterImage

/// One input of a batch: what the user named, and the URL the loader gets.
struct BatchItem: Sendable {
    let input: String
    let url: URL
}

/// Turns the command's inputs into items: URLs as they are; directories, every file
/// inside (recursively, sorted); an image file, itself; any other file, a list of
/// inputs, one a line (blank lines and lines starting with # skipped).
enum BatchInputs {
    static func expand(_ inputs: [String], readingLists: Bool = true) -> (
        items: [BatchItem], problems: [(String, String)]
    ) {
        var items: [BatchItem] = []
        var problems: [(String, String)] = []
        for input in inputs {
            if let url = URL(string: input), let scheme = url.scheme?.lowercased(),
                ["http", "https", "file"].contains(scheme)
            {
                items.append(BatchItem(input: input, url: url))
                continue
            }
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: input, isDirectory: &isDirectory) else {
                problems.append((input, "no such file or directory"))
                continue
            }
            if isDirectory.boolValue {
                let files = (FileManager.default.enumerator(atPath: input)?.compactMap { $0 as? String } ?? [])
                    .filter { !$0.split(separator: "/").contains { $0.hasPrefix(".") } }
                    .map { (input as NSString).appendingPathComponent($0) }
                    .filter { path in
                        var directory: ObjCBool = false
                        return FileManager.default.fileExists(atPath: path, isDirectory: &directory)
                            && !directory.boolValue
                    }
                    .sorted()
                items += files.map { BatchItem(input: $0, url: URL(fileURLWithPath: $0)) }
            } else if (try? ImageSource.file(path: input).leadingBytes()).flatMap(ImageFormat.sniff) != nil
                || !readingLists
            {
                items.append(BatchItem(input: input, url: URL(fileURLWithPath: input)))
            } else if let text = try? String(contentsOfFile: input, encoding: .utf8) {
                let lines = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
                    .filter { !$0.isEmpty && !$0.hasPrefix("#") }
                let nested = expand(lines, readingLists: false)
                items += nested.items
                problems += nested.problems
            } else {
                problems.append((input, "neither an image nor a list of inputs"))
            }
        }
        return (items, problems)
    }
}

extension BatchInputs {
    /// Each input once, in first-seen order: the same URL (fragment aside) or the same
    /// file (however its path is spelled) is one thumbnail, one output file and one
    /// concurrency slot. Returns how many items were repeats.
    static func distinct(_ items: [BatchItem]) -> (items: [BatchItem], repeats: Int) {
        var seen = Set<String>()
        let unique = items.filter { item in
            let identity =
                item.url.isFileURL
                ? item.url.standardizedFileURL.resolvingSymlinksInPath().path
                : (URLComponents(url: item.url, resolvingAgainstBaseURL: false).map {
                    var components = $0
                    components.fragment = nil
                    return components.string ?? item.url.absoluteString
                } ?? item.url.absoluteString)
            return seen.insert(identity).inserted
        }
        return (unique, items.count - unique.count)
    }
}

/// What a batch did.
struct BatchSummary: Sendable {
    /// Inputs named more than once, made once.
    var repeats = 0
    var succeeded = 0
    var bySource: [LoadedImage.Source: Int] = [:]
    var failures: [(input: String, reason: String)] = []
    var elapsed: Duration = .zero
    /// The thumbnails kept for a contact sheet: the output's name, the input, its format
    /// (when known), the format written.
    var written: [(name: String, input: String, source: ImageFormat?, format: ImageFormat, image: RasterImage)] = []

    var total: Int { succeeded + failures.count }
}

/// Makes every item's thumbnail through the loader, writes it to the output folder, and
/// reports progress: a live bar on a terminal, one line an item otherwise.
struct BatchRunner {
    let loader: ImageLoader
    let options: ThumbnailOptions
    let outputDirectory: String
    let concurrency: Int
    /// Keep the thumbnails for a contact sheet.
    var keepsImages = false
    var progressStream: Int32 = 2

    func run(_ items: [BatchItem]) async throws -> BatchSummary {
        try Terminal.createFolder(outputDirectory, for: "output")
        let names = OutputNames(items)
        let progress = ProgressReporter(total: items.count, stream: progressStream)
        let start = ContinuousClock.now
        var summary = BatchSummary()
        await withTaskGroup(of: (Int, Outcome).self) { group in
            // The next item to start. (Not a nested function that captures and mutates this
            // counter: with Swift 6.3.1, the optimized build of that form started item 0
            // every time; the debug build did not, and a small copy of it did not either.)
            var next = 0
            while next < min(concurrency, items.count) {
                group.addTask(operation: thumbnailTask(index: next, url: items[next].url, names: names))
                next += 1
            }
            for await (index, outcome) in group {
                let item = items[index]
                switch outcome {
                case .written(let name, let format, let loaded):
                    summary.succeeded += 1
                    summary.bySource[loaded.source, default: 0] += 1
                    if keepsImages {
                        let source = BatchRunner.sourceFormat(of: loaded, url: item.url)
                        summary.written.append((name, item.input, source, format, loaded.image))
                    }
                    progress.finished(item.input, source: loaded.source.rawValue, failed: false)
                case .failed(let reason):
                    summary.failures.append((item.input, reason))
                    progress.finished(item.input, source: "failed", failed: true)
                }
                if next < items.count {
                    group.addTask(operation: thumbnailTask(index: next, url: items[next].url, names: names))
                    next += 1
                }
            }
        }
        progress.end()
        summary.elapsed = ContinuousClock.now - start
        summary.written.sort { $0.name < $1.name }
        return summary
    }

    /// What became of one item.
    enum Outcome: Sendable {
        case written(name: String, format: ImageFormat, LoadedImage)
        case failed(reason: String)
    }

    /// Makes item `index`'s thumbnail, encodes it and writes it: in the item's own task,
    /// so that encoding and writing run on every core, not one after another in the
    /// loop that collects the results. Written to a temporary file then renamed (a
    /// reader never sees part of one) with the umask's permissions, as any file the user
    /// writes, and without waiting for the disk (no fsync): a thumbnail lost to a crash
    /// is made again by running the batch again.
    private func thumbnailTask(index: Int, url: URL, names: OutputNames)
        -> @Sendable () async -> (Int, Outcome)
    {
        let (loader, options, directory) = (self.loader, self.options, outputDirectory)
        return {
            let loaded: LoadedImage
            do throws(ImageLoadingError) {
                loaded = try await loader.thumbnail(for: url, options: options)
            } catch {
                return (index, .failed(reason: BatchRunner.reason(error)))
            }
            do {
                let encoded = try loaded.encoded ?? loaded.image.encodedKeepingAnimation(as: options.outputFormat)
                let name = names.name(for: index, format: encoded.format)
                try FileSystem.writeAtomically(
                    encoded.bytes, to: directory + "/" + name,
                    through: directory + "/." + FileSystem.temporaryName(), permissions: 0o666)
                return (index, .written(name: name, format: encoded.format, loaded))
            } catch {
                return (index, .failed(reason: "cannot write: \(Terminal.describe(error))"))
            }
        }
    }

    /// The format of a thumbnail's source: the image's own record, unless the thumbnail
    /// was read back from the disk cache (its format is then the output's), when a file
    /// is sniffed and a URL's is not known.
    static func sourceFormat(of loaded: LoadedImage, url: URL) -> ImageFormat? {
        switch loaded.source {
        case .disk, .networkNotModified:
            guard url.isFileURL else { return nil }
            return try? ImageDecoder().format(of: .file(path: url.path))
        default:
            return loaded.image.format
        }
    }

    /// The failure without its URL: the summary groups failures by it.
    static func reason(_ error: ImageLoadingError) -> String {
        let text = error.description
        let prefix = error.url + ": "
        return text.hasPrefix(prefix) ? String(text.dropFirst(prefix.count)) : text
    }
}

/// Output file names: the input's base name with the output format's extension, made
/// safe for a file system and unique.
final class OutputNames: Sendable {
    private let bases: [String]

    init(_ items: [BatchItem]) {
        var seen: [String: Int] = [:]
        bases = items.map { item in
            let last =
                item.url.isFileURL
                ? item.url.lastPathComponent : (item.url.lastPathComponent.removingPercentEncoding ?? "")
            var base = String(last.split(separator: ".").dropLast().joined(separator: ".").ifEmpty(last))
            base = String(base.map { $0.isLetter || $0.isNumber || "-_.".contains($0) ? $0 : "_" }).ifEmpty("image")
            let count = seen[base, default: 0] + 1
            seen[base] = count
            return count == 1 ? base : "\(base)-\(count)"
        }
    }

    func name(for index: Int, format: ImageFormat) -> String {
        bases[index] + "." + (format == .jpeg ? "jpg" : format.rawValue)
    }
}

extension StringProtocol {
    func ifEmpty(_ replacement: String) -> String { isEmpty ? replacement : String(self) }
}

/// Progress on stderr: a bar redrawn in place on a terminal, plain lines otherwise.
final class ProgressReporter: Sendable {
    private struct State {
        var done = 0
        var failed = 0
        var lastDraw = ContinuousClock.now - .seconds(1)
    }

    let total: Int
    private let stream: Int32
    private let isTerminal: Bool
    private let start = ContinuousClock.now
    private let state = Lock(State())

    init(total: Int, stream: Int32) {
        self.total = total
        self.stream = stream
        isTerminal = System.isTerminal(stream)
    }

    func finished(_ input: String, source: String, failed: Bool) {
        let line = state.withLock { state -> String? in
            state.done += 1
            if failed { state.failed += 1 }
            let now = ContinuousClock.now
            if isTerminal {
                // At most ten redraws a second, and always the last.
                guard now - state.lastDraw > .milliseconds(100) || state.done == total else { return nil }
                state.lastDraw = now
                return "\r" + bar(state)
            }
            return "\(state.done)/\(total) \(source) \(input)\n"
        }
        if let line { write(line) }
    }

    func end() {
        if isTerminal { write("\n") }
    }

    private func bar(_ state: State) -> String {
        let width = 30
        let filled = total == 0 ? width : width * state.done / total
        let seconds =
            Double((ContinuousClock.now - start).components.attoseconds) / 1e18
            + Double((ContinuousClock.now - start).components.seconds)
        let rate = seconds > 0 ? Double(state.done) / seconds : 0
        let bar =
            String(repeating: "=", count: filled) + (filled < width ? ">" : "")
            + String(repeating: " ", count: max(0, width - filled - 1))
        return "[\(bar)] \(state.done)/\(total)  \(String(format: "%.1f", rate))/s  failures \(state.failed)\u{1B}[K"
    }

    private func write(_ text: String) {
        // A progress line that cannot be written (a closed pipe) is not worth failing for.
        try? System.write(Array(text.utf8), to: stream)
    }
}
