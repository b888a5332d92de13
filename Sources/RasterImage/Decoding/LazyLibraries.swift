import CAVIF
import CHEIF
import CJXL
import CSVG
import CTIFF

/// The libraries RasterImage opens when their format is first met, not when the
/// process starts (CHEIF's, CAVIF's, CTIFF's, CJXL's and CSVG's `lazy.c`, all written by
/// scripts/generate-lazy-libraries.py): libheif, libavif, libtiff, libjxl and librsvg,
/// with the HEVC and AV1 codecs, cairo and the rest they load.
/// Every path into them asks here first; a process that never meets these formats
/// maps none of them.
enum LazyLibraries {
    /// Why libheif cannot be used (not installed, or a version without a function
    /// RasterImage calls), or `nil` once it is open.
    static var heifFailure: String? { failure(cheif_load_library) }

    /// Why libavif cannot be used, or `nil` once it is open.
    static var avifFailure: String? { failure(cavif_load_library) }

    /// Why libtiff cannot be used, or `nil` once it is open.
    static var tiffFailure: String? { failure(ctiff_load_library) }

    /// Why libjxl cannot be used, or `nil` once it is open.
    static var jxlFailure: String? { failure(cjxl_load_library) }

    /// Why librsvg cannot be used, or `nil` once it is open.
    static var svgFailure: String? { failure(csvg_load_library) }

    private static func failure(_ open: (UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> Int32) -> String? {
        var error: UnsafePointer<CChar>?
        guard open(&error) == 0 else { return nil }
        return error.map { String(cString: $0) } ?? "the library cannot be opened"
    }
}
