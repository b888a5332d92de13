import CGIF

/// Writes GIF with giflib: every frame of an animation (or one frame), each with its
/// own palette of up to 255 colours chosen by giflib's median-cut quantiser
/// (`GifQuantizeBuffer`, no dithering), pixels under half opacity transparent.
///
/// A palette per frame follows each frame's colours (a fade or a scene change keeps
/// its tones) at the cost of up to 768 bytes a frame; a global palette would band
/// every frame whose colours differ from the first's. Without dithering, gradients
/// show steps, as in most GIFs; flat drawings, GIF's usual content, come out exact
/// when they have fewer than 256 colours.
///
/// ```swift
/// let gif = try GIFEncoder().encodeAnimation(animation)
/// ```
public struct GIFEncoder: Sendable, Hashable {
    /// GIF's limit on a side.
    static let maxSide = 65_535

    /// The encoder; it has no settings.
    public init() {}

    /// Encodes frame `frame` of `image` as a still GIF.
    public func encode(_ image: RasterImage, frame: Int = 0) throws(ImageEncodingError) -> [UInt8] {
        try ImageEncodingError.checkFrame(frame, of: image, format: .gif)
        let still = image.with(frames: [image.frames[frame]])
        return try encodeAnimation(still)
    }

    /// Encodes every frame of `image`: an animation when there are several, each shown
    /// for its duration (in hundredths of a second, as GIF counts), looping as the image
    /// says (`loopCount` 0: forever).
    public func encodeAnimation(_ image: RasterImage) throws(ImageEncodingError) -> [UInt8] {
        guard image.width <= Self.maxSide, image.height <= Self.maxSide else {
            throw ImageEncodingError(.unsupportedImage, format: .gif, message: "GIF is limited to 65535 pixels a side")
        }
        let straight = image.straightAlpha()
        let output = GIFOutput()
        var status: Int32 = 0
        let opened = withExtendedLifetime(output) {
            EGifOpen(Unmanaged.passUnretained(output).toOpaque(), gifWrite, &status)
        }
        guard let file = opened else {
            throw ImageEncodingError(.failed, format: .gif, message: "giflib: cannot start (\(status))")
        }
        var closed = false
        defer { if !closed { EGifCloseFile(file, nil) } }
        let (width, height) = (Int32(straight.width), Int32(straight.height))
        EGifSetGifVersion(file, true)
        guard EGifPutScreenDesc(file, width, height, 8, 0, nil) == GIF_OK else {
            throw ImageEncodingError(.failed, format: .gif, message: Self.message(file))
        }
        if straight.frames.count > 1 {
            // The NETSCAPE2.0 application extension: the loop count.
            var application = Array("NETSCAPE2.0".utf8)
            let loops = UInt16(clamping: straight.loopCount)
            var count: [UInt8] = [1, UInt8(loops & 0xff), UInt8(loops >> 8)]
            guard EGifPutExtensionLeader(file, APPLICATION_EXT_FUNC_CODE) == GIF_OK,
                EGifPutExtensionBlock(file, Int32(application.count), &application) == GIF_OK,
                EGifPutExtensionBlock(file, Int32(count.count), &count) == GIF_OK,
                EGifPutExtensionTrailer(file) == GIF_OK
            else { throw ImageEncodingError(.failed, format: .gif, message: Self.message(file)) }
        }
        for frame in straight.frames {
            try writeFrame(frame, of: straight, to: file)
        }
        closed = true
        guard EGifCloseFile(file, &status) == GIF_OK else {
            throw ImageEncodingError(.failed, format: .gif, message: "giflib: cannot finish (\(status))")
        }
        return output.bytes
    }

    private func writeFrame(
        _ frame: RasterImage.Frame, of image: RasterImage, to file: UnsafeMutablePointer<GifFileType>
    )
        throws(ImageEncodingError)
    {
        let (width, height, stride) = (image.width, image.height, image.bytesPerRow)
        let count = width * height
        var red = [UInt8](repeating: 0, count: count)
        var green = red
        var blue = red
        var transparent = [Bool](repeating: false, count: count)
        var anyTransparent = false
        frame.pixels.withUnsafeBufferPointer { pixels in
            for y in 0..<height {
                for x in 0..<width {
                    let p = y * stride + x * 4
                    let i = y * width + x
                    (red[i], green[i], blue[i]) = (pixels[p], pixels[p + 1], pixels[p + 2])
                    if image.hasAlpha && pixels[p + 3] < 128 {
                        transparent[i] = true
                        anyTransparent = true
                    }
                }
            }
        }
        var indices = [UInt8](repeating: 0, count: count)
        var palette = [GifColorType](repeating: GifColorType(), count: 256)
        var colors: Int32 = 255
        guard
            GifQuantizeBuffer(
                UInt32(width), UInt32(height), &colors, &red, &green, &blue, &indices, &palette) == GIF_OK
        else { throw ImageEncodingError(.failed, format: .gif, message: "giflib: cannot quantise the colours") }
        let transparentIndex: Int32 = anyTransparent ? 255 : -1
        if anyTransparent {
            for i in 0..<count where transparent[i] { indices[i] = 255 }
        }
        var control = GraphicsControlBlock(
            DisposalMode: DISPOSE_BACKGROUND, UserInputFlag: false,
            DelayTime: Int32(
                clamping: frame.duration.components.seconds * 100
                    + frame.duration.components.attoseconds / 10_000_000_000_000_000),
            TransparentColor: transparentIndex)
        var controlBytes = [UInt8](repeating: 0, count: 4)
        let length = EGifGCBToExtension(&control, &controlBytes)
        guard let map = GifMakeMapObject(256, &palette) else {
            throw ImageEncodingError(.failed, format: .gif, message: "giflib: out of memory")
        }
        defer { GifFreeMapObject(map) }
        guard EGifPutExtension(file, GRAPHICS_EXT_FUNC_CODE, Int32(length), &controlBytes) == GIF_OK,
            EGifPutImageDesc(file, 0, 0, Int32(width), Int32(height), false, map) == GIF_OK
        else { throw ImageEncodingError(.failed, format: .gif, message: Self.message(file)) }
        let written = indices.withUnsafeMutableBufferPointer { buffer -> Bool in
            for y in 0..<height where EGifPutLine(file, buffer.baseAddress! + y * width, Int32(width)) != GIF_OK {
                return false
            }
            return true
        }
        guard written else { throw ImageEncodingError(.failed, format: .gif, message: Self.message(file)) }
    }

    private static func message(_ file: UnsafeMutablePointer<GifFileType>) -> String {
        GifErrorString(file.pointee.Error).map { "giflib: " + String(cString: $0) } ?? "giflib failed"
    }
}

/// Where giflib's output collects.
private final class GIFOutput {
    var bytes: [UInt8] = []
}

/// giflib's write callback: appends to the ``GIFOutput`` passed as user data.
private func gifWrite(_ file: UnsafeMutablePointer<GifFileType>?, _ data: UnsafePointer<GifByteType>?, _ count: Int32)
    -> Int32
{
    guard let file, let data, count > 0, let user = file.pointee.UserData else { return 0 }
    let output = Unmanaged<GIFOutput>.fromOpaque(user).takeUnretainedValue()
    output.bytes.append(contentsOf: UnsafeBufferPointer(start: data, count: Int(count)))
    return count
}
