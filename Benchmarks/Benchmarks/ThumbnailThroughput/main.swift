// thumbnail-throughput: thumbnails per second through the RasterImage API, in one
// process, for Benchmarks/inprocess_compare.py.
//
//     thumbnail-throughput --list FILES.txt --size 256 --format jpg --quality 85 --jobs 2 [--warmup N]
//         [--height H --fit fill] [--cores-per-job C]
//
// `--size` alone fits the image into a square of that many pixels; with `--height` it
// is the width of the box, and `--fit fill` fills the box and crops the centre.
// Reads the files named in FILES.txt (one path a line). One untimed pass over the first
// N of them (all by default: page cache, first-touch of the allocator), then one timed
// pass: `--jobs` threads take the next file from a shared counter, and each file is
// read, decoded with shrink-on-load, resampled and encoded in memory, on one core
// (`ResizeParallelism.withCores(1)`, as a loader's worker beside others; `--cores-per-job`
// gives each job more, as the loader gives a job that runs alone every core); nothing is
// written. Prints one JSON line: {"seconds": S, "images": N, "bytes": B}.
import Dispatch
import Foundation
import RasterImage
import Synchronization

struct Arguments {
    var list = ""
    var size = 256
    var format = "jpg"
    var quality = 85
    var jobs = 1
    var coresPerJob = 1
    var warmup = Int.max
    var height: Int?
    var fit = ThumbnailOptions.Fit.fit

    init(_ arguments: [String]) throws {
        var rest = arguments[...]
        while let name = rest.popFirst() {
            guard let value = rest.popFirst() else { throw Failure("\(name) needs a value") }
            switch name {
            case "--list": list = value
            case "--size": size = try Arguments.number(name, value)
            case "--format": format = value
            case "--quality": quality = try Arguments.number(name, value)
            case "--jobs": jobs = try Arguments.number(name, value)
            case "--cores-per-job": coresPerJob = try Arguments.number(name, value)
            case "--warmup": warmup = try Arguments.number(name, value)
            case "--height": height = try Arguments.number(name, value)
            case "--fit":
                guard let fit = ThumbnailOptions.Fit(rawValue: value) else { throw Failure("--fit takes fit, fill or force") }
                self.fit = fit
            default: throw Failure("unknown option \(name)")
            }
        }
        guard !list.isEmpty else { throw Failure("--list is required") }
    }

    static func number(_ name: String, _ value: String) throws -> Int {
        guard let number = Int(value), number > 0 else { throw Failure("\(name) takes a positive number") }
        return number
    }
}

struct Failure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Makes every thumbnail of `paths` on `jobs` threads; the total of the encoded sizes.
func pass(_ paths: [String], options: ThumbnailOptions, jobs: Int, coresPerJob: Int) throws -> Int {
    let next = Atomic<Int>(0)
    let bytes = Atomic<Int>(0)
    let failure = Mutex<String?>(nil)
    DispatchQueue.concurrentPerform(iterations: jobs) { _ in
        while true {
            let index = next.add(1, ordering: .relaxed).oldValue
            guard index < paths.count else { return }
            do {
                // One core a job by default, as a loader's worker beside others has (no HEIF
                // tile threads, no JPEG strips).
                let encoded = try ResizeParallelism.withCores(coresPerJob) {
                    try ImageDecoder().encodedThumbnail(.file(path: paths[index]), options: options)
                }
                bytes.add(encoded.bytes.count, ordering: .relaxed)
            } catch {
                failure.withLock { $0 = "\(paths[index]): \(error)" }
                return
            }
        }
    }
    if let message = failure.withLock({ $0 }) { throw Failure(message) }
    return bytes.load(ordering: .relaxed)
}

do {
    let arguments = try Arguments(Array(CommandLine.arguments.dropFirst()))
    let paths = try String(contentsOfFile: arguments.list, encoding: .utf8)
        .split(separator: "\n").map(String.init).filter { !$0.isEmpty }
    guard let format = OutputFormat(fileExtension: arguments.format, quality: arguments.quality) else {
        throw Failure("--format takes jpg, png or webp")
    }
    var options =
        if let height = arguments.height {
            ThumbnailOptions(width: arguments.size, height: height, fit: arguments.fit)
        } else {
            ThumbnailOptions(maxPixelSize: arguments.size, fit: arguments.fit)
        }
    options.outputFormat = format
    _ = try pass(
        Array(paths.prefix(arguments.warmup)), options: options, jobs: arguments.jobs,
        coresPerJob: arguments.coresPerJob)
    let start = ContinuousClock.now
    let bytes = try pass(paths, options: options, jobs: arguments.jobs, coresPerJob: arguments.coresPerJob)
    let elapsed = ContinuousClock.now - start
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
    print("{\"seconds\": \(seconds), \"images\": \(paths.count), \"bytes\": \(bytes)}")
} catch {
    FileHandle.standardError.write(Data("thumbnail-throughput: \(error)\n".utf8))
    exit(1)
}
