import CAVIF
import CHEIF

/// The libraries RasterImage opens when their format is first met, not when the
/// process starts (CHEIF's and CAVIF's `lazy.c`): libheif and libavif, with the HEVC
/// and AV1 codecs and the rest they load (30 shared libraries). Every path into them
/// asks here first; a process that never meets HEIF or AVIF maps none of them.
enum LazyLibraries {
    /// Why libheif cannot be used (not installed, or a version without a function
    /// RasterImage calls), or `nil` once it is open.
    static var heifFailure: String? { failure(cheif_open) }

    /// Why libavif cannot be used, or `nil` once it is open.
    static var avifFailure: String? { failure(cavif_open) }

    private static func failure(_ open: (UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> Int32) -> String? {
        var error: UnsafePointer<CChar>?
        guard open(&error) == 0 else { return nil }
        return error.map { String(cString: $0) } ?? "the library cannot be opened"
    }
}
