/// A decoded image: 8-bit RGBA pixels, one buffer a frame, and what the file said
/// about how to show them.
///
/// `RasterImage` is platform-neutral: no UI framework needed. It is an
/// immutable value whose pixel buffers are copy-on-write arrays, so passing it between
/// tasks or storing it in a cache never copies pixels.
///
/// Pixels are stored exactly as the file holds them: the ``orientation`` is metadata,
/// and the ``iccProfile`` has not been applied.
///
/// ```swift
/// let image = try ImageDecoder().decode(.file(path: "photo.jpg"))
/// print(image.width, image.height, image.orientation)
/// let red = image.pixels[0]          // R of the top-left pixel
/// print(image.cost)                  // decoded bytes, for cache accounting
/// ```
public struct RasterImage: Sendable, Hashable {
    /// One picture of the image: a still image has one; an animation has one for
    /// every frame, each the whole canvas as it looks while that frame is shown.
    public struct Frame: Sendable, Hashable {
        /// `height` rows of `bytesPerRow` bytes, 4 bytes (R, G, B, A) a pixel.
        public let pixels: [UInt8]
        /// How long the frame is shown; zero for still images and when the file gives none.
        public let duration: Duration

        /// Creates a frame from its pixels and display time.
        public init(pixels: [UInt8], duration: Duration = .zero) {
            self.pixels = pixels
            self.duration = duration
        }
    }

    /// Width in pixels.
    public let width: Int
    /// Height in pixels.
    public let height: Int
    /// Bytes from one row to the next: at least `width * 4`.
    public let bytesPerRow: Int
    /// Whether the colour channels are multiplied by alpha.
    public let alphaMode: AlphaMode
    /// The frames, at least one, all of the same size.
    public let frames: [Frame]
    /// How many times an animation plays: 0 means forever. 1 for still images and
    /// for animations whose file does not say.
    public let loopCount: Int
    /// How the stored pixels must be turned to be upright (EXIF or TIFF orientation).
    public let orientation: Orientation
    /// The embedded ICC colour profile, as stored in the file; not applied to the pixels.
    public let iccProfile: [UInt8]?
    /// The format the image was decoded from, or `nil` for an image made in code.
    public let format: ImageFormat?
    /// Whether the source carried transparency (an alpha channel, a transparent
    /// colour or an uncovered canvas). `false` means every alpha byte is 255.
    public let hasAlpha: Bool

    /// Creates an image from frames of RGBA pixels.
    ///
    /// Returns `nil` when the sizes do not add up: a dimension is not positive,
    /// `bytesPerRow` is smaller than `width * 4`, a frame holds fewer than
    /// `height * bytesPerRow` bytes, or there is no frame.
    ///
    /// ```swift
    /// let red = RasterImage(width: 1, height: 1, pixels: [255, 0, 0, 255])!
    /// ```
    public init?(
        width: Int,
        height: Int,
        bytesPerRow: Int? = nil,
        frames: [Frame],
        alphaMode: AlphaMode = .straight,
        loopCount: Int = 1,
        orientation: Orientation = .up,
        iccProfile: [UInt8]? = nil,
        format: ImageFormat? = nil,
        hasAlpha: Bool = true
    ) {
        let rowBytes = bytesPerRow ?? width * 4
        guard width > 0, height > 0, rowBytes >= width * 4, !frames.isEmpty, loopCount >= 0 else { return nil }
        let (needed, overflow) = rowBytes.multipliedReportingOverflow(by: height)
        guard !overflow, frames.allSatisfy({ $0.pixels.count >= needed }) else { return nil }
        self.init(
            validatedWidth: width, height: height, bytesPerRow: rowBytes, frames: frames,
            alphaMode: alphaMode, loopCount: loopCount, orientation: orientation,
            iccProfile: iccProfile, format: format, hasAlpha: hasAlpha)
    }

    /// Creates a still image from one buffer of RGBA pixels (`width * 4` bytes a row).
    public init?(
        width: Int, height: Int, pixels: [UInt8], alphaMode: AlphaMode = .straight, hasAlpha: Bool = true
    ) {
        self.init(
            width: width, height: height, frames: [Frame(pixels: pixels)], alphaMode: alphaMode,
            hasAlpha: hasAlpha)
    }

    /// The initializer the decoders use: they have checked every size already.
    init(
        validatedWidth width: Int, height: Int, bytesPerRow: Int, frames: [Frame], alphaMode: AlphaMode,
        loopCount: Int, orientation: Orientation, iccProfile: [UInt8]?, format: ImageFormat?, hasAlpha: Bool
    ) {
        self.width = width
        self.height = height
        self.bytesPerRow = bytesPerRow
        self.frames = frames
        self.alphaMode = alphaMode
        self.loopCount = loopCount
        self.orientation = orientation
        self.iccProfile = iccProfile
        self.format = format
        self.hasAlpha = hasAlpha
    }

    /// The first frame's pixels: the whole image for a still image.
    public var pixels: [UInt8] { frames[0].pixels }

    /// Whether the image has more than one frame.
    public var isAnimated: Bool { frames.count > 1 }

    /// Decoded bytes over all frames: what the image costs in memory. Caches size themselves by it.
    public var cost: Int { frames.reduce(0) { $0 + $1.pixels.count } }

    /// The size the image has once ``orientation`` is applied.
    public var orientedSize: (width: Int, height: Int) {
        orientation.swapsDimensions ? (height, width) : (width, height)
    }

    /// The RGBA value of one pixel of one frame, or `nil` when the point or the frame is
    /// outside the image (coordinates that came from a request never trap).
    ///
    /// ```swift
    /// if let (r, g, b, a) = image.pixel(x: 0, y: 0) { ... }
    /// ```
    public func pixel(x: Int, y: Int, frame: Int = 0) -> (r: UInt8, g: UInt8, b: UInt8, a: UInt8)? {
        guard x >= 0, x < width, y >= 0, y < height, frames.indices.contains(frame) else { return nil }
        let pixels = frames[frame].pixels
        let offset = y * bytesPerRow + x * 4
        return (pixels[offset], pixels[offset + 1], pixels[offset + 2], pixels[offset + 3])
    }

    /// A copy of this image with some properties replaced and the rest kept.
    func with(
        width: Int? = nil, height: Int? = nil, frames: [Frame], bytesPerRow: Int? = nil, alphaMode: AlphaMode? = nil,
        orientation: Orientation? = nil, iccProfile: [UInt8]?? = .none, hasAlpha: Bool? = nil
    ) -> RasterImage {
        RasterImage(
            validatedWidth: width ?? self.width, height: height ?? self.height,
            bytesPerRow: bytesPerRow ?? self.bytesPerRow, frames: frames, alphaMode: alphaMode ?? self.alphaMode,
            loopCount: loopCount, orientation: orientation ?? self.orientation,
            iccProfile: iccProfile ?? self.iccProfile, format: format, hasAlpha: hasAlpha ?? self.hasAlpha)
    }
}

extension RasterImage: CustomStringConvertible {
    /// A one-line summary; the pixels are left out.
    public var description: String {
        var text = "RasterImage(\(width)x\(height)"
        if let format { text += " \(format.rawValue)" }
        if frames.count > 1 { text += ", \(frames.count) frames, loop \(loopCount)" }
        text += ", \(alphaMode.rawValue) alpha\(hasAlpha ? "" : " (opaque)")"
        if orientation != .up { text += ", orientation \(orientation.rawValue)" }
        if let iccProfile { text += ", ICC \(iccProfile.count) bytes" }
        return text + ", \(cost) bytes)"
    }
}

extension RasterImage.Frame: CustomStringConvertible {
    /// The frame's size in bytes and its duration.
    public var description: String { "Frame(\(pixels.count) bytes, \(duration))" }
}

/// How the colour channels of a pixel relate to its alpha.
public enum AlphaMode: String, Sendable, Hashable, Codable {
    /// Colour values are independent of alpha (as PNG, GIF, WebP and BMP store them).
    case straight
    /// Colour values are already multiplied by alpha (what compositing and
    /// resampling want; TIFF's associated alpha).
    case premultiplied
}
