import CLCMS
import ImageLoaderSupport

/// The colour model of pixels handed to ``ColorProfileConversion``.
enum PixelColorModel: Hashable {
    /// RGBA, straight alpha (gray images have R = G = B).
    case rgba
    /// Four ink channels; `inverted` when stored as 255 minus ink (Adobe).
    case cmyk(inverted: Bool)
}

/// Converts pixels from an embedded ICC profile to sRGB with Little CMS, relative
/// colorimetric with black point compensation. Transforms are cached by profile, and
/// created without lcms's one-pixel cache so that one transform serves every thread.
enum ColorProfileConversion {
    /// Converts `pixels` (RGBA layout, `bytesPerRow` a row) in place. Returns `false`,
    /// leaving the pixels as they were, when the profile cannot be read or does not
    /// describe pixels of this model (an RGB profile on CMYK data, a Lab profile, ...).
    @discardableResult
    static func convertToSRGB(
        _ pixels: inout [UInt8], width: Int, height: Int, bytesPerRow: Int, profile: [UInt8], model: PixelColorModel
    ) -> Bool {
        guard let transform = TransformCache.shared.transform(for: profile, model: model) else { return false }
        pixels.withUnsafeMutableBufferPointer { buffer in
            let base = buffer.baseAddress!
            switch transform.input {
            case .gray:
                // One channel in, RGB out, alpha kept.
                var gray = [UInt8](repeating: 0, count: width)
                var rgb = [UInt8](repeating: 0, count: width * 3)
                for y in 0..<height {
                    let row = base + y * bytesPerRow
                    for x in 0..<width { gray[x] = row[x * 4] }
                    cmsDoTransform(transform.handle, gray, &rgb, UInt32(width))
                    for x in 0..<width {
                        row[x * 4] = rgb[x * 3]
                        row[x * 4 + 1] = rgb[x * 3 + 1]
                        row[x * 4 + 2] = rgb[x * 3 + 2]
                    }
                }
            case .rgba:
                for y in 0..<height {
                    let row = base + y * bytesPerRow
                    cmsDoTransform(transform.handle, row, row, UInt32(width))
                }
            case .cmyk:
                // CMYK in, RGBA out, same four bytes a pixel: lcms allows the same buffer.
                for y in 0..<height {
                    let row = base + y * bytesPerRow
                    cmsDoTransform(transform.handle, row, row, UInt32(width))
                    for x in 0..<width { row[x * 4 + 3] = 255 }
                }
            }
        }
        return true
    }

    /// The colour space an ICC profile describes, by its four-letter signature.
    static func colorSpace(of profile: [UInt8]) -> String? {
        guard profile.count >= 20 else { return nil }
        return String(decoding: profile[16..<20], as: UTF8.self).trimmingASCIISpaces()
    }
}

/// A Little CMS transform to sRGB. Safe to share: it is immutable once made, and made
/// with cmsFLAGS_NOCACHE, which lcms documents as the condition for concurrent use.
final class SRGBTransform: @unchecked Sendable {
    enum Input { case gray, rgba, cmyk }

    let handle: cmsHTRANSFORM
    let input: Input

    init?(profile: [UInt8], model: PixelColorModel) {
        guard let source = profile.withUnsafeBytes({ cmsOpenProfileFromMem($0.baseAddress, UInt32($0.count)) }) else {
            return nil
        }
        defer { cmsCloseProfile(source) }
        guard let sRGB = cmsCreate_sRGBProfile() else { return nil }
        defer { cmsCloseProfile(sRGB) }
        let space = cmsGetColorSpace(source)
        let inputFormat: UInt32
        let outputFormat: UInt32
        var flags = UInt32(cmsFLAGS_NOCACHE | cmsFLAGS_BLACKPOINTCOMPENSATION)
        switch (model, space) {
        case (.rgba, cmsSigRgbData):
            (input, inputFormat, outputFormat) = (.rgba, clcms_format_rgba8(), clcms_format_rgba8())
            flags |= UInt32(cmsFLAGS_COPY_ALPHA)
        case (.rgba, cmsSigGrayData):
            (input, inputFormat, outputFormat) = (.gray, clcms_format_gray8(), clcms_format_rgb8())
        case (.cmyk(let inverted), cmsSigCmykData):
            (input, inputFormat, outputFormat) = (.cmyk, clcms_format_cmyk8(inverted ? 1 : 0), clcms_format_rgba8())
        default:
            return nil
        }
        guard
            let handle = cmsCreateTransform(
                source, inputFormat, sRGB, outputFormat, UInt32(INTENT_RELATIVE_COLORIMETRIC), flags)
        else { return nil }
        self.handle = handle
    }

    deinit { cmsDeleteTransform(handle) }
}

/// The last few transforms made, by profile bytes and pixel model.
final class TransformCache: Sendable {
    static let shared = TransformCache(capacity: 16)

    private struct Key: Hashable {
        let profile: [UInt8]
        let model: PixelColorModel
    }

    private let capacity: Int
    private let entries = Lock<[(key: Key, transform: SRGBTransform?)]>([])

    init(capacity: Int) { self.capacity = capacity }

    func transform(for profile: [UInt8], model: PixelColorModel) -> SRGBTransform? {
        let key = Key(profile: profile, model: model)
        if let hit = entries.withLock({ entries -> SRGBTransform?? in
            guard let index = entries.firstIndex(where: { $0.key == key }) else { return nil }
            let entry = entries.remove(at: index)
            entries.append(entry)
            return .some(entry.transform)
        }) {
            return hit
        }
        // Made outside the lock: creating a transform takes a moment. A profile lcms
        // rejects is remembered too, as nil.
        let made = SRGBTransform(profile: profile, model: model)
        entries.withLock { entries in
            if !entries.contains(where: { $0.key == key }) { entries.append((key, made)) }
            if entries.count > capacity { entries.removeFirst(entries.count - capacity) }
        }
        return made
    }
}
