import ImageLoader
import ImageLoaderSupport
import RasterImage

/// The service's watermark (`--watermark-path`), decoded once at start, with the
/// sizes results ask for resized once each and kept (up to ``maxSizes``).
///
/// Drawn with imgproxy's meanings: `wm:{opacity}:{position}:{x}:{y}:{scale}`, the
/// opacity multiplied by the service's (`--watermark-opacity`); a `scale` above 0 fits
/// the watermark into that fraction of the result (enlarging it when needed), else it
/// keeps its own size; a gravity places it with offsets (pixels times dpr, or fractions)
/// and it may hang over the edges; `re` tiles it from the top-left corner, the offsets
/// being the space between tiles. Composited "over" in premultiplied sRGB (as libvips'
/// `composite` in imgproxy): colours are mixed as stored, not in linear light.
final class WatermarkImage: Sendable {
    static let maxSizes = 32
    let image: RasterImage
    /// The opacity every watermark is multiplied by (0 to 1).
    let opacity: Double
    /// The sizes made so far: at most ``maxSizes``, 64 MiB of pixels in all.
    private let sized = BoundedCache<SizeKey, RasterImage>(
        limits: .init(maxBytes: 64 << 20, maxCount: WatermarkImage.maxSizes, maxEntryFraction: 1))

    private struct SizeKey: Hashable {
        let width: Int
        let height: Int
    }

    init(image: RasterImage, opacity: Double = 1) {
        self.image = image.oriented().premultiplied()
        self.opacity = max(0, min(1, opacity))
    }

    /// `result` with the watermark drawn over every frame as `options` say.
    func drawn(over result: RasterImage, options: ProcessingOptions.Watermark, dpr: Double) -> RasterImage {
        var (width, height) = (image.width, image.height)
        if options.scale > 0 {
            let boxWidth = max(1, ImgproxyGeometry.scaleToEven(result.width, options.scale))
            let boxHeight = max(1, ImgproxyGeometry.scaleToEven(result.height, options.scale))
            let fit = min(Double(boxWidth) / Double(width), Double(boxHeight) / Double(height))
            width = max(1, ImgproxyGeometry.scale(width, fit))
            height = max(1, ImgproxyGeometry.scale(height, fit))
        }
        let mark = resized(width: width, height: height)
        let alpha = options.opacity * opacity
        let places: [PixelPoint]
        switch options.position {
        case .gravity(let type):
            let gravity = ProcessingOptions.Gravity(type, x: options.x, y: options.y)
            let (x, y) = ImgproxyGeometry.position(
                width: result.width, height: result.height, innerWidth: mark.width, innerHeight: mark.height,
                gravity: gravity, dpr: dpr, allowsOverflow: true)
            places = [PixelPoint(x: x, y: y)]
        case .tiled:
            let stepX =
                mark.width + max(0, min(result.width, ImgproxyGeometry.offset(options.x, of: result.width, dpr: dpr)))
            let stepY =
                mark.height
                + max(0, min(result.height, ImgproxyGeometry.offset(options.y, of: result.height, dpr: dpr)))
            // One layer of the result's size holding every tile, drawn once: the work and the
            // memory follow the result's pixels, however small the mark is scaled.
            return result.composited(
                with: Self.tiles(of: mark, width: result.width, height: result.height, stepX: stepX, stepY: stepY),
                at: [PixelPoint(x: 0, y: 0)], opacity: alpha)
        }
        return result.composited(with: mark, at: places, opacity: alpha)
    }

    /// A `width` x `height` layer with `mark` repeated from the top-left corner every
    /// `stepX` across and `stepY` down, transparent between.
    static func tiles(of mark: RasterImage, width: Int, height: Int, stepX: Int, stepY: Int) -> RasterImage {
        let rowBytes = width * 4
        var pixels = [UInt8](repeating: 0, count: rowBytes * height)
        mark.frames[0].pixels.withUnsafeBufferPointer { source in
            pixels.withUnsafeMutableBufferPointer { layer in
                for y in 0..<height {
                    let markRow = y % stepY
                    guard markRow < mark.height else { continue }
                    var x = 0
                    while x < width {
                        let count = min(mark.width, width - x)
                        (layer.baseAddress! + y * rowBytes + x * 4).update(
                            from: source.baseAddress! + markRow * mark.bytesPerRow, count: count * 4)
                        x += stepX
                    }
                }
            }
        }
        return RasterImage(
            width: width, height: height, frames: [.init(pixels: pixels)], alphaMode: mark.alphaMode,
            hasAlpha: true)!
    }

    /// The watermark at `width` x `height`, resized once per size.
    private func resized(width: Int, height: Int) -> RasterImage {
        let key = SizeKey(width: width, height: height)
        if let hit = sized.value(for: key) { return hit }
        let made = image.resized(width: width, height: height).premultiplied()
        sized.insert(made, cost: made.cost, for: key)
        return made
    }

}
