/// Bounds on what a decode may read and allocate. Every decoder checks them against
/// the header before it allocates pixels, so hostile files fail fast with
/// ``ImageDecodingError``.
///
/// The limits bound the work and the working memory of a decode, not only its
/// output: the decoders' own buffers (libjpeg's coefficients, libpng's rows, libtiff's
/// strips and tiles, animation canvases) are checked against ``maxWorkingBytes``
/// before they are allocated, and the pixels decoded over all frames against
/// ``maxTotalPixels``. A decode's peak memory is at most the output
/// (``maxTotalBytes``) plus ``maxWorkingBytes`` plus a small constant.
///
/// The defaults suit untrusted input on a server: about 100 megapixels per frame
/// (400 MB decoded), 2,000 frames and 512 MiB over all frames of an animation,
/// 256 MiB of working memory, 400 megapixels decoded in all, 256 MiB of input,
/// 500 progressive JPEG scans, 10,000 metadata blocks.
///
/// ```swift
/// var options = DecodingOptions()
/// options.limits.maxPixelsPerFrame = 24_000_000    // phone photos only
/// let image = try ImageDecoder(options: options).decode(.data(data))
/// ```
public struct DecodingLimits: Sendable, Hashable {
    /// Most pixels in one frame, or in an animation's canvas.
    public var maxPixelsPerFrame: Int = 100_000_000
    /// Most frames in an animation (every frame is counted, decoded or not).
    public var maxFrames: Int = 2_000
    /// Most decoded bytes over all the frames a decode returns.
    public var maxTotalBytes: Int = 512 << 20
    /// Most bytes of input.
    public var maxInputBytes: Int = 256 << 20
    /// Most scans in a progressive JPEG; each costs a pass over the whole image.
    public var maxProgressiveScans: Int = 500
    /// Most bytes a decoder may hold besides its output: libjpeg's coefficient buffer
    /// (progressive and multi-scan files) and memory pool, libpng's row buffers,
    /// libtiff's strip and tile buffers, an animation's canvases.
    public var maxWorkingBytes: Int = 256 << 20
    /// What an SVG document may hold and cost (``SVGLimits``), checked before librsvg sees it.
    public var svg = SVGLimits()
    /// Most pixels decoded over all frames, each frame counted by its own rectangle
    /// (a GIF frame may be far larger than its canvas): bounds the work of an animation.
    public var maxTotalPixels: Int = 400_000_000
    /// Most metadata blocks a file may hold besides one per frame: GIF extension blocks
    /// and WebP (RIFF) chunks other than frames. A file of a few hundred KB can hold a
    /// hundred thousand of them, each read, parsed and (for WebP) allocated; none of the
    /// files a camera, an editor or a browser writes comes near the limit. (Other
    /// formats' metadata is skipped without being counted: PNG's unused chunks and
    /// JPEG's unused markers as they pass; TIFF directories count as frames.)
    public var maxMetadataBlocks: Int = 10_000

    /// The default limits (each property says its value).
    public init() {}

    /// Throws unless a decoder may hold `bytes` (`nil`: too large to count) of working memory.
    func checkWorking(bytes: Int?, format: ImageFormat, what: String) throws {
        guard let bytes, bytes <= maxWorkingBytes else {
            throw ImageDecodingError(
                .tooMuchWorkingMemory(bytes: bytes ?? Int.max, limit: maxWorkingBytes), format: format,
                message: what)
        }
    }

    /// Throws unless `pixels` (`nil`: too many to count) decoded over all frames are allowed.
    func checkTotal(pixels: Int?, format: ImageFormat) throws {
        guard let pixels, pixels <= maxTotalPixels else {
            throw ImageDecodingError(.tooMuchWork(pixels: pixels ?? Int.max, limit: maxTotalPixels), format: format)
        }
    }

    /// Throws unless `blocks` metadata blocks (besides one per frame) are allowed.
    func checkMetadata(blocks: Int, format: ImageFormat) throws {
        guard blocks <= maxMetadataBlocks else {
            throw ImageDecodingError(.tooManyMetadataBlocks(limit: maxMetadataBlocks), format: format)
        }
    }

    /// Throws unless a frame of this size is allowed.
    func check(width: Int, height: Int, format: ImageFormat) throws {
        let (pixels, overflow) = width.multipliedReportingOverflow(by: height)
        guard width > 0, height > 0, !overflow, pixels <= maxPixelsPerFrame else {
            throw ImageDecodingError(
                .tooManyPixels(width: width, height: height, limit: maxPixelsPerFrame), format: format)
        }
    }

    /// Throws unless `frames` frames of `frameBytes` each are allowed.
    func check(frames: Int, frameBytes: Int, format: ImageFormat) throws {
        guard frames <= maxFrames else { throw ImageDecodingError(.tooManyFrames(limit: maxFrames), format: format) }
        let (total, overflow) = frames.multipliedReportingOverflow(by: frameBytes)
        guard !overflow, total <= maxTotalBytes else {
            throw ImageDecodingError(
                .tooManyBytes(bytes: overflow ? Int.max : total, limit: maxTotalBytes), format: format)
        }
    }
}

/// Which frames of an animation (or pages of a TIFF) a decode returns.
public enum FrameSelection: Sendable, Hashable {
    /// The first frame only: the cheapest decode, and what a thumbnail shows.
    case first
    /// Every frame. For a TIFF, every page, when all pages have the first page's size.
    case all
    /// Frame (or TIFF page) `n`, counting from 0, composited as it would be shown.
    case index(Int)
    /// The first `n` frames (or TIFF pages), all of them when there are fewer: an
    /// animation cut short, as imgproxy keeps `max_animation_frames` of a longer one.
    case prefix(Int)
}

/// How ``ImageDecoder`` decodes.
public struct DecodingOptions: Sendable, Hashable {
    /// Bounds checked before any large allocation.
    public var limits = DecodingLimits()
    /// The frames to decode. Default: all of them, so an animation stays animated.
    public var frames: FrameSelection = .all
    /// When `true`, data that ends early yields the part that was decoded instead of
    /// ``ImageDecodingError/Reason/truncated``: the rest is transparent, except in a JPEG,
    /// where libjpeg fills it with flat colour from the last data it saw. A PNG keeps the
    /// rows libpng could finish (it reads image data in pieces of up to 8 KiB); a TIFF
    /// keeps whole strips. WebP, whose library decodes only whole files, still throws.
    public var allowsTruncatedData = false

    /// Options with `limits`, `frames` and whether truncated data is allowed.
    public init(
        limits: DecodingLimits = DecodingLimits(), frames: FrameSelection = .all, allowsTruncatedData: Bool = false
    ) {
        self.limits = limits
        self.frames = frames
        self.allowsTruncatedData = allowsTruncatedData
    }
}
