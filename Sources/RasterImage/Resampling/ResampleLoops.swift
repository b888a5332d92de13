import CResample

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The inner loops a resizer runs: CResample's AVX2 and FMA kernels where the CPU has
/// them, Swift's own (SSE2 or NEON through SIMD4) everywhere else. Both make the same
/// sums in the same order; FMA rounds once per tap instead of twice, so the two can
/// differ by a level in a rare pixel.
enum ResampleLoops: Sendable {
    case portable
    case avx2

    /// AVX2 and FMA when this CPU has them, unless `IMAGELOADER_RESAMPLE=portable`
    /// (for measuring one against the other in one binary).
    static let best: ResampleLoops = {
        if let value = getenv("IMAGELOADER_RESAMPLE"), String(cString: value) == "portable" { return .portable }
        return cresample_has_avx2() != 0 ? .avx2 : .portable
    }()
}
