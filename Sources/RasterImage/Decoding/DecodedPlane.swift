/// Interleaved RGBA pixels a codec library decoded into its own buffer (libheif,
/// libavif, libjxl), 8 or 16 bits a sample, and how they become a ``RasterImage``:
/// written in place into the output (a decode) or streamed into a resize (a
/// thumbnail), cropped, reduced to 8 bits with rounding, alpha made straight.
struct DecodedPlane {
    /// The library's pixels: `height` rows, `stride` bytes apart.
    let base: UnsafeRawPointer
    let stride: Int
    let width: Int
    let height: Int
    /// 8, or 16 for samples stored in native-endian 16-bit words.
    let storageBits: Int
    /// The significant bits of a sample: 8, 10, 12 or 16.
    let depth: Int
    /// Whether the colour samples are multiplied by alpha.
    let premultiplied: Bool

    /// A rectangle of the plane.
    struct Rect: Equatable {
        var x: Int
        var y: Int
        var width: Int
        var height: Int
    }

    /// The rectangle `crop` asks for, kept inside the plane; the whole plane for `nil`.
    func region(_ crop: Rect?) -> Rect {
        guard let crop else { return Rect(x: 0, y: 0, width: width, height: height) }
        let x = min(max(crop.x, 0), width - 1)
        let y = min(max(crop.y, 0), height - 1)
        return Rect(x: x, y: y, width: min(crop.width, width - x), height: min(crop.height, height - y))
    }

    /// Writes `region`'s rows into `target` as 8-bit RGBA with straight alpha.
    func write(_ region: Rect, into target: some RowTarget) {
        var y = 0
        while y < region.height {
            let count = min(target.maxRows, region.height - y)
            let destination = target.rows(y, count: count)
            for row in 0..<count {
                let source = base + (region.y + y + row) * stride
                let output = destination + row * target.bytesPerRow
                if storageBits == 8 {
                    output.update(
                        from: (source + region.x * 4).assumingMemoryBound(to: UInt8.self), count: region.width * 4)
                } else {
                    DecodedPlane.reduce(
                        (source + region.x * 8).assumingMemoryBound(to: UInt16.self), into: output,
                        count: region.width * 4, depth: depth)
                }
                if premultiplied { PixelAlpha.unpremultiply(output, region.width) }
            }
            target.commit(y, count: count)
            y += count
        }
    }

    /// `count` samples of `depth` bits to 8 bits, rounded to the nearest
    /// (`v * 255 / max`, as libvips and Pillow reduce), not truncated.
    static func reduce(_ source: UnsafePointer<UInt16>, into output: UnsafeMutablePointer<UInt8>, count: Int, depth: Int)
    {
        let maximum = UInt32((1 << depth) - 1)
        let half = maximum / 2
        for index in 0..<count {
            let value = min(UInt32(source[index]), maximum)
            output[index] = UInt8((value * 255 + half) / maximum)
        }
    }

    /// The plane's `region` as a full-size image in its stored orientation.
    func image(
        _ region: Rect, orientation: Orientation, iccProfile: [UInt8]?, format: ImageFormat, hasAlpha: Bool,
        duration: Duration = .zero
    ) -> RasterImage {
        let bytesPerRow = region.width * 4
        let pixels = PixelBuffer.make(count: bytesPerRow * region.height) { base in
            write(region, into: ImageBufferTarget(base, bytesPerRow: bytesPerRow))
        }
        return RasterImage(
            validatedWidth: region.width, height: region.height, bytesPerRow: bytesPerRow,
            frames: [.init(pixels: pixels, duration: duration)], alphaMode: .straight, loopCount: 1,
            orientation: orientation, iccProfile: iccProfile, format: format, hasAlpha: hasAlpha)
    }

    /// A thumbnail of the plane's `region`: its rows streamed into a resize, never copied whole.
    func thumbnail(
        _ region: Rect, orientation: Orientation, iccProfile: [UInt8]?, format: ImageFormat, hasAlpha: Bool,
        options: ThumbnailOptions
    ) throws -> RasterImage {
        let geometry = try ThumbnailGeometry(
            sourceWidth: region.width, sourceHeight: region.height, orientation: orientation, options: options)
        let resizer = StreamingResizer(
            window: geometry.window(inputWidth: region.width, inputHeight: region.height), kernel: options.kernel,
            channels: hasAlpha ? .straightAlpha : .independent, linearLight: options.linearLight)
        write(region, into: ResizingTarget(resizer: resizer))
        let image = RasterImage(
            validatedWidth: geometry.croppedWidth, height: geometry.croppedHeight,
            bytesPerRow: geometry.croppedWidth * 4, frames: [.init(pixels: resizer.finish())], alphaMode: .straight,
            loopCount: 1, orientation: orientation, iccProfile: iccProfile, format: format, hasAlpha: hasAlpha)
        return ThumbnailFinisher.finish(image, geometry: geometry, options: options)
    }
}

/// A C library's object, released when the last reference goes: an initializer that
/// throws half-way (a limit, a parse error) releases what it had already made, since
/// Swift destroys the stored properties it had set.
final class Owned<Pointer> {
    let pointer: Pointer
    private let release: (Pointer) -> Void

    init(_ pointer: Pointer, release: @escaping (Pointer) -> Void) {
        self.pointer = pointer
        self.release = release
    }

    deinit { release(pointer) }
}
