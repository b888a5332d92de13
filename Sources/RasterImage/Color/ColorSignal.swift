import CLCMS
import ImageLoaderSupport

/// Colour described by code points (ITU-T H.273: HEIF's and AVIF's `nclx`, JPEG XL's
/// colour encoding) instead of an ICC profile, and the ICC profile that says the same
/// thing, so that such an image goes through the same conversion to sRGB as one with a
/// profile (``ThumbnailOptions`` converts, ``RasterImage/iccProfile`` carries it).
///
/// sRGB needs no profile. The BT.709 family of transfer curves (1, 6, 14, 15) is
/// shown with the sRGB curve, as browsers show such stills. HDR transfer functions are
/// mapped to SDR by the profile's curve: PQ (16) decoded to light relative to 203 cd/m²
/// (ITU-R BT.2408's reference white), kept as it is up to 0.75 and above that rolled off
/// by an exponential shoulder, `0.75 + 0.25 (1 - e^(-(L - 0.75) / 0.25))`, which meets
/// it with the same slope and approaches 1 (reference white lands at 0.91, 1,000 cd/m²
/// at 1.0); HLG (18) through its inverse OETF and the BT.2100 system gamma of 1.2 for a
/// 1,000 cd/m² display, then the same shoulder. The curve applies to each channel in the image's own primaries before
/// the conversion to sRGB's, so saturated highlights keep their hue only roughly: a
/// documented approximation for thumbnails, not a grading tool.
struct ColorSignal: Hashable {
    var primaries: Int
    var transfer: Int

    /// The profile for these code points, or `nil` where the pixels are sRGB already
    /// (or the code points are ones this does not know, which are shown as sRGB).
    var iccProfile: [UInt8]? {
        guard let chromaticities = ColorSignal.chromaticities(primaries) else { return nil }
        let srgbLike = [0, 1, 2, 6, 13, 14, 15].contains(transfer)
        if srgbLike && (primaries == 1 || primaries == 2) { return nil }
        guard srgbLike || [4, 5, 8, 16, 18].contains(transfer) else { return nil }
        return ColorSignal.cache.profile(for: self) { make(chromaticities) }
    }

    /// Primaries (red, green, blue, white) as CIE xy, for the H.273 codes in use.
    private static func chromaticities(_ code: Int) -> [(Double, Double)]? {
        switch code {
        case 1, 2: [(0.64, 0.33), (0.30, 0.60), (0.15, 0.06), (0.3127, 0.3290)]
        case 5: [(0.64, 0.33), (0.29, 0.60), (0.15, 0.06), (0.3127, 0.3290)]
        case 6, 7: [(0.630, 0.340), (0.310, 0.595), (0.155, 0.070), (0.3127, 0.3290)]
        case 9: [(0.708, 0.292), (0.170, 0.797), (0.131, 0.046), (0.3127, 0.3290)]
        case 11: [(0.680, 0.320), (0.265, 0.690), (0.150, 0.060), (0.314, 0.351)]
        case 12: [(0.680, 0.320), (0.265, 0.690), (0.150, 0.060), (0.3127, 0.3290)]
        default: nil
        }
    }

    /// Linear light (1 = SDR white) for an encoded value in 0...1.
    func linear(_ value: Double) -> Double {
        switch transfer {
        case 4: return System.power(value, 2.2)
        case 5: return System.power(value, 2.8)
        case 8: return value
        case 16:
            // SMPTE ST 2084 (PQ) to cd/m², then relative to reference white.
            let (m1, m2, c1, c2, c3) = (0.1593017578125, 78.84375, 0.8359375, 18.8515625, 18.6875)
            let p = System.power(value, 1 / m2)
            let nits = 10_000 * System.power(max(p - c1, 0) / (c2 - c3 * p), 1 / m1)
            return ColorSignal.rollOff(nits / 203)
        case 18:
            // ARIB STD-B67 (HLG) inverse OETF, then the system gamma of 1.2 at 1,000 cd/m².
            let (a, b, c) = (0.17883277, 0.28466892, 0.55991073)
            let scene = value <= 0.5 ? value * value / 3 : (System.exponential((value - c) / a) + b) / 12
            return ColorSignal.rollOff(1000 * System.power(scene, 1.2) / 203)
        default:
            // sRGB's curve.
            return value <= 0.04045 ? value / 12.92 : System.power((value + 0.055) / 1.055, 2.4)
        }
    }

    /// Identity up to 0.75, then an exponential shoulder towards 1 with the same slope.
    private static func rollOff(_ light: Double) -> Double {
        guard light > 0.75 else { return max(light, 0) }
        return min(1, 0.75 + 0.25 * (1 - System.exponential(-(light - 0.75) / 0.25)))
    }

    private func make(_ chromaticities: [(Double, Double)]) -> [UInt8]? {
        var white = cmsCIExyY(x: chromaticities[3].0, y: chromaticities[3].1, Y: 1)
        var triple = cmsCIExyYTRIPLE(
            Red: cmsCIExyY(x: chromaticities[0].0, y: chromaticities[0].1, Y: 1),
            Green: cmsCIExyY(x: chromaticities[1].0, y: chromaticities[1].1, Y: 1),
            Blue: cmsCIExyY(x: chromaticities[2].0, y: chromaticities[2].1, Y: 1))
        let samples = (0..<4096).map { Float(linear(Double($0) / 4095)) }
        guard let curve = cmsBuildTabulatedToneCurveFloat(nil, UInt32(samples.count), samples) else { return nil }
        defer { cmsFreeToneCurve(curve) }
        var curves: [OpaquePointer?] = [curve, curve, curve]
        guard let profile = cmsCreateRGBProfile(&white, &triple, &curves) else { return nil }
        defer { cmsCloseProfile(profile) }
        var size: UInt32 = 0
        guard cmsSaveProfileToMem(profile, nil, &size) != 0, size > 0 else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(size))
        guard cmsSaveProfileToMem(profile, &bytes, &size) != 0 else { return nil }
        return Array(bytes.prefix(Int(size)))
    }

    /// Profiles made so far: a handful of code point pairs in practice.
    private static let cache = ProfileCache()

    private final class ProfileCache: Sendable {
        private let profiles = Lock<[ColorSignal: [UInt8]?]>([:])

        func profile(for signal: ColorSignal, make: () -> [UInt8]?) -> [UInt8]? {
            if let known = profiles.withLock({ $0[signal] }) { return known }
            let made = make()
            profiles.withLock { profiles in
                if profiles.count < 64 { profiles[signal] = made }
            }
            return made
        }
    }
}
