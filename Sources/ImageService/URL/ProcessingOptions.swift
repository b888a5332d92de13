import Foundation
import ImageLoaderSupport
import RasterImage

/// The processing options of a URL, by imgproxy's names (long and short), with
/// imgproxy's meanings. Each option below is applied in the order imgproxy applies it
/// (trim, crop, scale, rotate and flip, the result's crop, filters, extend, padding,
/// background, watermark), whatever its place in the URL; a later option of the same
/// name replaces an earlier one.
///
/// | option | arguments |
/// |---|---|
/// | `rs`, `resize` | `{type}:{width}:{height}:{enlarge}:{extend}:{gravity}:{x}:{y}` (each may be empty) |
/// | `s`, `size` | `{width}:{height}:{enlarge}:{extend}:{gravity}:{x}:{y}` |
/// | `rt`, `resizing_type` | `fit`, `fill`, `fill-down`, `force`, `auto` |
/// | `w`, `width` / `h`, `height` | pixels; 0 follows the other side |
/// | `mw`, `min-width` / `mh`, `min-height` | pixels the result keeps at least (the scale grows to reach them) |
/// | `z`, `zoom` | `{x}:{y}` or one factor for both, multiplying the result's size |
/// | `dpr` | 0.1 to 8: multiplies the box, padding and pixel offsets |
/// | `el`, `enlarge` | `1`, `t`, `true`, `0`, `f`, `false` |
/// | `ex`, `extend` | `{extend}:{gravity}:{x}:{y}`: pads the result to the box |
/// | `exar`, `extend_ar`, `extend_aspect_ratio` | the same, padding to the box's aspect ratio only |
/// | `g`, `gravity` | `ce`, `no`, `so`, `ea`, `we`, `noea`, `nowe`, `soea`, `sowe` with `:{x}:{y}` offsets (pixels, or fractions of the image below 1); `sm` (smart, `RasterImage.attentionRegion(width:height:)`); `fp:{x}:{y}` (focus point, 0 to 1) |
/// | `c`, `crop` | `{width}:{height}:{gravity}...`: a part of the source, before resizing (below 1: a fraction) |
/// | `t`, `trim` | `{threshold}:{color}:{equal_hor}:{equal_ver}` |
/// | `pd`, `padding` | `{top}:{right}:{bottom}:{left}` in CSS order, scaled by dpr |
/// | `ar`, `auto_rotate` | follow the source's orientation (default on) |
/// | `rot`, `rotate` | a multiple of 90 degrees, clockwise |
/// | `fl`, `flip` | `{horizontal}:{vertical}` |
/// | `bg`, `background` | `RRGGBB` or `{r}:{g}:{b}`: flattens transparency, fills padding |
/// | `bl`, `blur` / `sh`, `sharpen` | a Gaussian's sigma |
/// | `pix`, `pixelate` | the block size in pixels |
/// | `wm`, `watermark` | `{opacity}:{position}:{x}:{y}:{scale}` (positions: the gravities and `re`, tiled) |
/// | `q`, `quality` | 1 to 100 (0: the default) |
/// | `fq`, `format_quality` | `{format}:{quality}` pairs |
/// | `mb`, `max_bytes` | the most bytes the result may take: lower quality until it fits |
/// | `f`, `format`, `ext` | `jpg`, `jpeg`, `png`, `webp`, `avif`, `jxl`, `gif` |
/// | `sm`, `strip_metadata` / `kcr`, `keep_copyright` | strip EXIF (default), keeping `Copyright` and `Artist` unless `kcr:0`; `sm:0` keeps it all (JPEG, PNG, WebP results) |
/// | `scp`, `strip_color_profile` | on (the default): convert to sRGB; off: keep the source's ICC profile |
/// | `eth`, `enforce_thumbnail` | use a HEIF's embedded thumbnail when it is large enough |
/// | `ph`, `preserve_hdr` | accepted; HDR is always mapped to SDR |
/// | `skp`, `skip_processing` | source formats sent as they are |
/// | `raw` | send the source as it is |
/// | `cb`, `cachebuster` | any text: changes the URL, nothing else |
/// | `exp`, `expires` | a Unix time after which the URL is a 404 |
/// | `fn`, `filename` | `{name}:{encoded}`: the name in `Content-Disposition` |
/// | `att`, `return_attachment` | `Content-Disposition: attachment` |
/// | `pr`, `preset` | names of presets, applied in place |
/// | `msr`, `msfs`, `maf`, `mafr`, `mrd` | security limits, with `--allow-security-options`: lower the service's only |
struct ProcessingOptions: Sendable, Hashable {
    /// How the image meets the box.
    enum ResizingType: String, Sendable, Hashable, CaseIterable {
        /// `fit` keeps the whole image inside the box; `fill` covers the box and crops.
        case fit, fill
        /// `fill`, but a source too small to cover the box is cropped to its aspect ratio.
        case fillDown = "fill-down"
        /// `force` stretches each side to the box; `auto` is `fill` or `fit` by orientation.
        case force, auto
    }

    /// The kinds of placement a gravity names.
    enum GravityType: String, Sendable, Hashable, CaseIterable {
        /// The centre.
        case center = "ce"
        /// The top edge, centred across.
        case north = "no"
        /// The bottom edge, centred across.
        case south = "so"
        /// The right edge, centred down.
        case east = "ea"
        /// The left edge, centred down.
        case west = "we"
        /// The top right corner.
        case northEast = "noea"
        /// The top left corner.
        case northWest = "nowe"
        /// The bottom right corner.
        case southEast = "soea"
        /// The bottom left corner.
        case southWest = "sowe"
        /// Where the image draws the eye (`RasterImage.attentionRegion(width:height:)`).
        case smart = "sm"
        /// Centred on a point given as fractions of the image (`fp:0.3:0.6`).
        case focusPoint = "fp"
    }

    /// Where a crop or a padding places the image: a kind and offsets. An offset of 1
    /// or more (or -1 or less) is in pixels (times dpr, for the result); between -1 and 1,
    /// a fraction of the image; for `fp`, the point's position, 0 to 1.
    struct Gravity: Sendable, Hashable {
        /// The kind of placement.
        var type: GravityType
        /// Offsets across and down (see above).
        var x: Double
        var y: Double

        /// A placement of `type` with offsets.
        init(_ type: GravityType, x: Double = 0, y: Double = 0) {
            (self.type, self.x, self.y) = (type, x, y)
        }

        /// The centre, no offsets.
        static let center = Gravity(.center)
        /// Smart: where the image draws the eye.
        static let smart = Gravity(.smart)

        /// Whether the offsets are both 0 (a plain compass point, or the centre).
        var hasNoOffset: Bool { x == 0 && y == 0 }
    }

    /// An output format a URL can name.
    typealias Format = ResultFormat

    /// Padding the result to a box (`extend`) or to its aspect ratio (`extend_aspect_ratio`).
    struct Extend: Sendable, Hashable {
        /// Whether to pad.
        var enabled = false
        /// Where the image sits on the padded canvas.
        var gravity = Gravity.center
        /// No padding, centred.
        init() {}
    }

    /// A part of the source kept before resizing: sides in pixels (1 or more) or
    /// fractions of the source (below 1); 0 keeps the whole side.
    struct Crop: Sendable, Hashable {
        /// The part's width: pixels from 1, a fraction of the source below 1, 0 for all.
        var width: Double
        /// The part's height, as ``width``.
        var height: Double
        /// `nil`: the main ``ProcessingOptions/gravity``.
        var gravity: Gravity?
    }

    /// Cutting away the border of a flat colour (`trim`).
    struct Trim: Sendable, Hashable {
        /// How far (0 to 255, per channel) a pixel may differ from the colour and still be border.
        var threshold: Double
        /// The border's colour; `nil`: the top-left pixel's.
        var color: PixelColor?
        /// Take as much from the right as from the left (the smaller of the two).
        var equalHorizontal = false
        /// Take as much from the bottom as from the top (the smaller of the two).
        var equalVertical = false
    }

    /// Space around the result in CSS order, in pixels before dpr.
    struct Padding: Sendable, Hashable {
        /// Pixels above, below, right and left of the result, before dpr.
        var top = 0
        var right = 0
        var bottom = 0
        var left = 0
        /// No padding.
        init() {}
        var isEmpty: Bool { top == 0 && right == 0 && bottom == 0 && left == 0 }
    }

    /// Where the watermark goes: a gravity, or tiled over the whole image (`re`).
    enum WatermarkPosition: Sendable, Hashable {
        /// Placed by a gravity (not `sm` or `fp`), offsets from that edge.
        case gravity(GravityType)
        /// Repeated over the whole result (`re`).
        case tiled
    }

    /// The service's watermark drawn over the result.
    struct Watermark: Sendable, Hashable {
        /// 0 (none) to 1.
        var opacity: Double
        /// Where it goes.
        var position = WatermarkPosition.gravity(.center)
        /// Offsets from the position (for `re`, the space between tiles), in pixels before dpr.
        var x = 0.0
        var y = 0.0
        /// The watermark's width as a fraction of the result's; 0: its own size.
        var scale = 0.0
    }

    /// Limits a URL may set for itself (`--allow-security-options`); each only lowers the service's.
    struct SecurityLimits: Sendable, Hashable {
        /// `msr`: the largest source, in pixels.
        var maxSourcePixels: Int?
        /// `msfs`: the largest source, in bytes.
        var maxSourceBytes: Int?
        /// `maf`: the most frames of an animation processed.
        var maxAnimationFrames: Int?
        /// `mafr`: the largest frame of an animation, in pixels.
        var maxAnimationFramePixels: Int?
        /// `mrd`: the longest side of a result.
        var maxResultSide: Int?
        /// No limits of the URL's own.
        init() {}
    }

    /// How the image meets the box (`fit` by default).
    var resizingType = ResizingType.fit
    /// Pixels; 0 means "follow the other side" (both 0: the source's size).
    var width = 0
    /// Pixels; 0 means "follow the other side".
    var height = 0
    /// The least width of the result: the scale grows to reach it (imgproxy's `min-width`).
    var minWidth = 0
    /// The least height of the result.
    var minHeight = 0
    /// Factors multiplying the result's size after everything else decides it.
    var zoomWidth = 1.0
    /// The zoom factor down (``zoomWidth`` across).
    var zoomHeight = 1.0
    /// Whether a source smaller than the box is enlarged.
    var enlarge = false
    /// Padding the result to the box.
    var extend = Extend()
    /// Padding the result to the box's aspect ratio.
    var extendAspectRatio = Extend()
    /// What a `fill` crop keeps.
    var gravity = Gravity.center
    /// A part of the source kept before resizing.
    var crop: Crop?
    /// A flat border cut away before anything else.
    var trim: Trim?
    /// Space around the result.
    var padding = Padding()
    /// Follow the orientation the source states (EXIF, HEIF `irot`/`imir`); `nil`: yes.
    var autoRotate: Bool?
    /// Degrees clockwise: 0, 90, 180 or 270.
    var rotate = 0
    /// Mirror left to right.
    var flipHorizontal = false
    /// Mirror top to bottom.
    var flipVertical = false
    /// The colour transparency is flattened onto and padding is filled with; `nil`:
    /// transparency kept where the format has it, padding transparent (white in JPEG).
    var background: PixelColor?
    /// A Gaussian blur's sigma; 0: none.
    var blur = 0.0
    /// An unsharp mask's sigma; 0: none.
    var sharpen = 0.0
    /// The block size of pixelation; 1 or less: none.
    var pixelate = 0
    /// The service's watermark, when it has one.
    var watermark: Watermark?
    /// 1 to 100; `nil` for the service's default.
    var quality: Int?
    /// Qualities by output format (`fq`), before ``quality``.
    var formatQuality: [Format: Int] = [:]
    /// The most bytes the result may take; 0: no limit.
    var maxBytes = 0
    /// The output format the URL names, if any.
    var format: Format?
    /// Device pixel ratio: the box is multiplied by it.
    var dpr = 1.0
    /// Leave the source's EXIF out of the result (the default); `false`: keep it (JPEG, PNG
    /// and WebP results), its orientation set to 1 when the result is turned upright.
    var stripMetadata = true
    /// While stripping, keep the EXIF `Copyright` and `Artist` (default on, as imgproxy's
    /// `IMGPROXY_KEEP_COPYRIGHT`).
    var keepCopyright = true
    /// Convert to sRGB and leave the profile out (the default); `false`: keep the source's profile.
    var stripColorProfile = true
    /// Use a HEIF's own thumbnail when it is large enough.
    var enforceThumbnail = false
    /// Accepted for imgproxy's URLs; results are SDR.
    var preserveHDR = false
    /// Source formats sent as they are, without processing.
    var skipProcessing: Set<ImageFormat> = []
    /// Send the source as it is.
    var raw = false
    /// Text that only changes the URL.
    var cacheBuster: String?
    /// A Unix time after which the URL is a 404.
    var expires: Int64?
    /// The name in `Content-Disposition`.
    var filename: String?
    /// `Content-Disposition: attachment` rather than `inline`.
    var returnAttachment = false
    /// Limits set by the URL (applied only with `--allow-security-options`).
    var security = SecurityLimits()
    /// `/info` only: BlurHash's components across and down (`bh:{x}:{y}`, 1 to 9; 4:3 by default).
    var blurHash: BlurHashSize?

    /// BlurHash's components across and down.
    struct BlurHashSize: Sendable, Hashable {
        /// Components across and down.
        var x: Int
        var y: Int
    }

    /// The largest width or height a URL may ask for before the service's own limit.
    static let maxSide = 100_000

    /// The defaults: fit, no box, no enlargement, centre gravity, the service's quality and format.
    init() {}

    /// Whether anything beyond a resize with a plain compass crop is asked for: such
    /// options take the general path (a scaled image, then each step on it).
    var needsGeneralPath: Bool {
        crop != nil || trim != nil || !padding.isEmpty || extend.enabled || extendAspectRatio.enabled
            || autoRotate == false || rotate != 0 || flipHorizontal || flipVertical || blur > 0 || sharpen > 0
            || pixelate > 1 || !gravity.hasNoOffset || gravity.type == .smart || gravity.type == .focusPoint
            || minWidth > 0 || minHeight > 0 || zoomWidth != 1 || zoomHeight != 1 || (watermark?.opacity ?? 0) > 0
            || background != nil || maxBytes > 0
    }

    /// Whether the result may have transparent pixels, as imgproxy judges it when it
    /// picks a format: the source's alpha, padding or `extend`, unless a background
    /// flattens them.
    func expectsTransparency(sourceHasAlpha: Bool) -> Bool {
        background == nil && (sourceHasAlpha || !padding.isEmpty || extend.enabled)
    }

    /// The quality for `format`: `q`'s, else `fq`'s, else `nil` (the service's), in
    /// imgproxy's order.
    func quality(for format: Format) -> Int? { quality ?? formatQuality[format] }
}
