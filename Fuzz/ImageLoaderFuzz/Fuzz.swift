// libFuzzer's entry for every parser of untrusted input (Targets.swift). Built only
// by scripts/fuzz.sh (IMAGELOADER_FUZZ=1, -sanitize=fuzzer,address, .build-fuzz);
// FUZZ_TARGET names the target. SwiftPM names this executable's entry point
// ImageLoaderFuzz_main, which hands over to libFuzzer's driver.
import CFuzzDriver
import Foundation

nonisolated let targets: [String: @Sendable ([UInt8]) -> Void] = [
    "png": { fuzzDecoder(.png, $0) },
    "jpeg": { fuzzDecoder(.jpeg, $0) },
    "jpeg-eighth": fuzzJPEGEighth,
    "jpeg-strips": fuzzJPEGStrips,
    "gif": { fuzzDecoder(.gif, $0) },
    "tiff": { fuzzDecoder(.tiff, $0) },
    "webp": { fuzzDecoder(.webp, $0) },
    "bmp": { fuzzDecoder(.bmp, $0) },
    "heif": { fuzzDecoder(.heif, $0) },
    "avif": { fuzzDecoder(.avif, $0) },
    "jxl": { fuzzDecoder(.jxl, $0) },
    "ico": { fuzzDecoder(.ico, $0) },
    "svg": fuzzSVGSanitizer,
    "cache-policy": fuzzCachePolicy,
    "http-date": fuzzHTTPDate,
    "disk-entry": fuzzDiskEntry,
    "sniff": fuzzSniff,
    "processing-url": fuzzProcessingURL,
    "metadata": fuzzMetadata,
    "zlib": fuzzZlib,
    "object-storage": fuzzObjectStorage,
]

/// The target FUZZ_TARGET names, looked up once.
nonisolated let selected: (@Sendable ([UInt8]) -> Void)? = targets[
    ProcessInfo.processInfo.environment["FUZZ_TARGET"] ?? ""]

/// Called by libFuzzer for every input.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let selected else {
        FileHandle.standardError.write(
            Data("FUZZ_TARGET must be one of: \(targets.keys.sorted().joined(separator: ", "))\n".utf8))
        exit(2)
    }
    selected(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
    return 0
}

/// The executable's entry when SwiftPM's own main calls it: libFuzzer's driver takes over.
@_cdecl("ImageLoaderFuzz_main")
func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzOneInput(data, size) }
}
