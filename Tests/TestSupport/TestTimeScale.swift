import Foundation

/// How much slower than a plain debug build this run is expected to be:
/// `IMAGELOADER_TEST_TIME_SCALE` (`scripts/sanitize.sh` sets 4), at least 1. The one
/// place the test targets read it.
public let testTimeScale = max(
    1, ProcessInfo.processInfo.environment["IMAGELOADER_TEST_TIME_SCALE"].flatMap(Double.init) ?? 1)
