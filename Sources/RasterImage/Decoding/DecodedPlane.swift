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
    /// 4 (RGBA) or 3 (RGB: opaque, alpha 255 written).
    var channels = 4

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

    /// Writes `region`'s rows into `target` as 8-bit RGBA with straight alpha, as the
    /// target's rows from `firstRow` on.
    func write(_ region: Rect, into target: some RowTarget, at firstRow: Int = 0) {
        var y = 0
        while y < region.height {
            let count = min(target.maxRows, region.height - y)
            let destination = target.rows(firstRow + y, count: count)
            for row in 0..<count {
                let source = base + (region.y + y + row) * stride
                let output = destination + row * target.bytesPerRow
                switch (storageBits, channels) {
                case (8, 4):
                    output.update(
                        from: (source + region.x * 4).assumingMemoryBound(to: UInt8.self), count: region.width * 4)
                case (8, _):
                    DecodedPlane.expand(
                        (source + region.x * 3).assumingMemoryBound(to: UInt8.self), into: output, count: region.width)
                case (_, 4):
                    DecodedPlane.reduce(
                        (source + region.x * 8).assumingMemoryBound(to: UInt16.self), into: output,
                        count: region.width * 4, depth: depth)
                default:
                    DecodedPlane.reduceRGB(
                        (source + region.x * 6).assumingMemoryBound(to: UInt16.self), into: output,
                        count: region.width, depth: depth)
                }
                if premultiplied { PixelAlpha.unpremultiply(output, region.width) }
            }
            target.commit(firstRow + y, count: count)
            y += count
        }
    }

    /// `count` RGB pixels to RGBA, opaque.
    static func expand(_ source: UnsafePointer<UInt8>, into output: UnsafeMutablePointer<UInt8>, count: Int) {
        for index in 0..<count {
            output[index * 4] = source[index * 3]
            output[index * 4 + 1] = source[index * 3 + 1]
            output[index * 4 + 2] = source[index * 3 + 2]
            output[index * 4 + 3] = 255
        }
    }

    /// `count` RGB pixels of `depth`-bit samples to 8-bit RGBA, opaque, rounded as ``reduce(_:into:count:depth:)``.
    static func reduceRGB(
        _ source: UnsafePointer<UInt16>, into output: UnsafeMutablePointer<UInt8>, count: Int, depth: Int
    ) {
        for index in 0..<count {
            reduce(source + index * 3, into: output + index * 4, count: 3, depth: depth)
            output[index * 4 + 3] = 255
        }
    }

    /// `count` samples of `depth` bits to 8 bits, rounded to the nearest
    /// (`v * 255 / max`, as libvips and Pillow reduce), not truncated.
    static func reduce(
        _ source: UnsafePointer<UInt16>, into output: UnsafeMutablePointer<UInt8>, count: Int, depth: Int
    ) {
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
    ) throws -> RasterImage {
        try DecodedPlane.image(
            width: region.width, height: region.height, orientation: orientation, iccProfile: iccProfile,
            format: format, hasAlpha: hasAlpha, duration: duration
        ) { target in write(region, into: target) }
    }

    /// A thumbnail of the plane's `region`: its rows streamed into a resize, never copied whole.
    func thumbnail(
        _ region: Rect, orientation: Orientation, iccProfile: [UInt8]?, format: ImageFormat, hasAlpha: Bool,
        options: ThumbnailOptions, limits: DecodingLimits
    ) throws -> RasterImage {
        try DecodedPlane.thumbnail(
            width: region.width, height: region.height, orientation: orientation, iccProfile: iccProfile,
            format: format, hasAlpha: hasAlpha, options: options, limits: limits
        ) { target in write(region, into: target) }
    }

    /// A `width` × `height` image whose rows `rows` writes, top to bottom, into the output.
    static func image(
        width: Int, height: Int, orientation: Orientation, iccProfile: [UInt8]?, format: ImageFormat, hasAlpha: Bool,
        duration: Duration = .zero, rows: (any RowTarget) throws -> Void
    ) throws -> RasterImage {
        let bytesPerRow = width * 4
        let pixels = try PixelBuffer.make(count: bytesPerRow * height) { base in
            try rows(ImageBufferTarget(base, bytesPerRow: bytesPerRow))
        }
        return RasterImage(
            validatedWidth: width, height: height, bytesPerRow: bytesPerRow,
            frames: [.init(pixels: pixels, duration: duration)], alphaMode: .straight, loopCount: 1,
            orientation: orientation, iccProfile: iccProfile, format: format, hasAlpha: hasAlpha)
    }

    /// A thumbnail of a `width` × `height` image whose rows `rows` writes, top to bottom,
    /// into a streaming resize: the full-size image is never held.
    static func thumbnail(
        width: Int, height: Int, orientation: Orientation, iccProfile: [UInt8]?, format: ImageFormat, hasAlpha: Bool,
        options: ThumbnailOptions, limits: DecodingLimits, rows: (any RowTarget) throws -> Void
    ) throws -> RasterImage {
        let geometry = try ThumbnailGeometry(
            sourceWidth: width, sourceHeight: height, orientation: orientation, options: options, limits: limits)
        let resizer = StreamingResizer(
            window: geometry.window(inputWidth: width, inputHeight: height), kernel: options.kernel,
            channels: hasAlpha ? .straightAlpha : .independent, linearLight: options.linearLight)
        try rows(ResizingTarget(resizer: resizer))
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
