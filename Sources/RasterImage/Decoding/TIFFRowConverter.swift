import CTIFF
import ImageLoaderSupport

/// Turns one row of TIFF samples (in one buffer, or one a plane) into RGBA.
struct TIFFRowConverter {
    let page: TIFFPage
    let color: TIFFPage.Color
    let colormap: [UInt8]
    let channels: Int
    /// The samples of one pixel, unpacked to 8 bits (palette indices left as they are).
    private let scratch: UnsafeMutablePointer<UInt8>
    private let keeper: ScratchKeeper

    private final class ScratchKeeper {
        let pointer: UnsafeMutablePointer<UInt8>
        init(count: Int) { pointer = .allocate(capacity: count) }
        deinit { pointer.deallocate() }
    }

    init(page: TIFFPage, color: TIFFPage.Color, colormap: [UInt8]?) throws {
        self.page = page
        self.color = color
        if case .palette = color {
            guard let colormap else {
                throw ImageDecodingError(.corrupt, format: .tiff, message: "palette image without a colormap")
            }
            self.colormap = colormap
        } else {
            self.colormap = []
        }
        switch color {
        case .gray, .palette: channels = 1
        case .rgb: channels = 3
        case .cmyk: channels = 4
        }
        keeper = ScratchKeeper(count: page.width * page.samplesPerPixel)
        scratch = keeper.pointer
    }

    /// Unpacks the samples of a row into `scratch`, `samplesPerPixel` bytes a pixel.
    private func unpack(_ planes: [UnsafeRawPointer]) -> UnsafePointer<UInt8> {
        let bits = page.bitsPerSample
        let samples = page.samplesPerPixel
        let width = page.width
        if bits == 8 && !page.separatePlanes { return planes[0].assumingMemoryBound(to: UInt8.self) }
        let scaleLowBits: Bool
        if case .palette = color { scaleLowBits = false } else { scaleLowBits = true }
        for sample in 0..<samples {
            let plane = page.separatePlanes ? planes[sample] : planes[0]
            let stride = page.separatePlanes ? 1 : samples
            let first = page.separatePlanes ? 0 : sample
            var out = scratch + sample
            switch bits {
            case 8:
                let p = plane.assumingMemoryBound(to: UInt8.self)
                for x in 0..<width {
                    out.pointee = p[x * stride + first]
                    out += samples
                }
            case 16:
                let p = plane.assumingMemoryBound(to: UInt16.self)
                for x in 0..<width {
                    out.pointee = ColorConversion.scale16to8(p[x * stride + first])
                    out += samples
                }
            default:
                let p = plane.assumingMemoryBound(to: UInt8.self)
                let maxValue = (1 << bits) - 1
                for x in 0..<width {
                    let bit = (x * stride + first) * bits
                    let value = (Int(p[bit >> 3]) >> (8 - bits - (bit & 7))) & maxValue
                    out.pointee = scaleLowBits ? UInt8(value * 255 / maxValue) : UInt8(value)
                    out += samples
                }
            }
        }
        return UnsafePointer(scratch)
    }

    func convert(_ planes: [UnsafeRawPointer], into row: UnsafeMutablePointer<UInt8>) {
        let s = unpack(planes)
        let samples = page.samplesPerPixel
        let alphaIndex = page.alpha?.index
        var out = row
        var p = s
        for _ in 0..<page.width {
            switch color {
            case .gray(let whiteIsZero):
                let v = whiteIsZero ? 255 - p[0] : p[0]
                out[0] = v
                out[1] = v
                out[2] = v
            case .rgb:
                out[0] = p[0]
                out[1] = p[1]
                out[2] = p[2]
            case .palette:
                let i = Int(p[0]) * 3
                out[0] = colormap[i]
                out[1] = colormap[i + 1]
                out[2] = colormap[i + 2]
            case .cmyk:
                out[0] = p[0]
                out[1] = p[1]
                out[2] = p[2]
                out[3] = p[3]
                ColorConversion.cmykToRGBA(out, count: 1, inverted: false)
            }
            out[3] = alphaIndex.map { p[$0] } ?? 255
            out += 4
            p += samples
        }
    }
}
