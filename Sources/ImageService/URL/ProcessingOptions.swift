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
public struct ProcessingOptions: Sendable, Hashable {
    /// How the image meets the box.
    public enum ResizingType: String, Sendable, Hashable, CaseIterable {
        /// `fit` keeps the whole image inside the box; `fill` covers the box and crops.
        case fit, fill
        /// `fill`, but a source too small to cover the box is cropped to its aspect ratio.
        case fillDown = "fill-down"
        /// `force` stretches each side to the box; `auto` is `fill` or `fit` by orientation.
        case force, auto
    }

    /// The kinds of placement a gravity names.
    public enum GravityType: String, Sendable, Hashable, CaseIterable {
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
    public struct Gravity: Sendable, Hashable {
        /// The kind of placement.
        public var type: GravityType
        /// Offsets across and down (see above).
        public var x: Double
        public var y: Double

        /// A placement of `type` with offsets.
        public init(_ type: GravityType, x: Double = 0, y: Double = 0) {
            (self.type, self.x, self.y) = (type, x, y)
        }

        /// The centre, no offsets.
        public static let center = Gravity(.center)
        /// Smart: where the image draws the eye.
        public static let smart = Gravity(.smart)

        /// Whether the offsets are both 0 (a plain compass point, or the centre).
        var hasNoOffset: Bool { x == 0 && y == 0 }
    }

    /// An output format a URL can name.
    public enum Format: String, Sendable, Hashable, CaseIterable {
        /// The encoders the service has, and `svg`: an SVG source passed through, sanitised.
        case jpeg, png, webp, avif, jxl, gif, heic, ico, bmp, tiff, svg

        /// The format by one of imgproxy's names for it (`jpg` and `jpeg` both name
        /// JPEG), `nil` for others.
        ///
        /// ```swift
        /// ProcessingOptions.Format(name: "JPG")  // .jpeg
        /// ```
        public init?(name: String) {
            switch name.lowercased() {
            case "jpg", "jpeg": self = .jpeg
            case "png": self = .png
            case "webp": self = .webp
            case "avif": self = .avif
            case "jxl": self = .jxl
            case "gif": self = .gif
            case "heic", "heif": self = .heic
            case "ico": self = .ico
            case "bmp": self = .bmp
            case "tiff", "tif": self = .tiff
            case "svg": self = .svg
            default: return nil
            }
        }
    }

    /// Padding the result to a box (`extend`) or to its aspect ratio (`extend_aspect_ratio`).
    public struct Extend: Sendable, Hashable {
        /// Whether to pad.
        public var enabled = false
        /// Where the image sits on the padded canvas.
        public var gravity = Gravity.center
        /// No padding, centred.
        public init() {}
    }

    /// A part of the source kept before resizing: sides in pixels (1 or more) or
    /// fractions of the source (below 1); 0 keeps the whole side.
    public struct Crop: Sendable, Hashable {
        /// The part's width: pixels from 1, a fraction of the source below 1, 0 for all.
        public var width: Double
        /// The part's height, as ``width``.
        public var height: Double
        /// `nil`: the main ``ProcessingOptions/gravity``.
        public var gravity: Gravity?
    }

    /// Cutting away the border of a flat colour (`trim`).
    public struct Trim: Sendable, Hashable {
        /// How far (0 to 255, per channel) a pixel may differ from the colour and still be border.
        public var threshold: Double
        /// The border's colour; `nil`: the top-left pixel's.
        public var color: PixelColor?
        /// Take as much from the right as from the left (the smaller of the two).
        public var equalHorizontal = false
        /// Take as much from the bottom as from the top (the smaller of the two).
        public var equalVertical = false
    }

    /// Space around the result in CSS order, in pixels before dpr.
    public struct Padding: Sendable, Hashable {
        /// Pixels above, below, right and left of the result, before dpr.
        public var top = 0
        public var right = 0
        public var bottom = 0
        public var left = 0
        /// No padding.
        public init() {}
        var isEmpty: Bool { top == 0 && right == 0 && bottom == 0 && left == 0 }
    }

    /// Where the watermark goes: a gravity, or tiled over the whole image (`re`).
    public enum WatermarkPosition: Sendable, Hashable {
        /// Placed by a gravity (not `sm` or `fp`), offsets from that edge.
        case gravity(GravityType)
        /// Repeated over the whole result (`re`).
        case tiled
    }

    /// The service's watermark drawn over the result.
    public struct Watermark: Sendable, Hashable {
        /// 0 (none) to 1.
        public var opacity: Double
        /// Where it goes.
        public var position = WatermarkPosition.gravity(.center)
        /// Offsets from the position (for `re`, the space between tiles), in pixels before dpr.
        public var x = 0.0
        public var y = 0.0
        /// The watermark's width as a fraction of the result's; 0: its own size.
        public var scale = 0.0
    }

    /// Limits a URL may set for itself (`--allow-security-options`); each only lowers the service's.
    public struct SecurityLimits: Sendable, Hashable {
        /// `msr`: the largest source, in pixels.
        public var maxSourcePixels: Int?
        /// `msfs`: the largest source, in bytes.
        public var maxSourceBytes: Int?
        /// `maf`: the most frames of an animation processed.
        public var maxAnimationFrames: Int?
        /// `mafr`: the largest frame of an animation, in pixels.
        public var maxAnimationFramePixels: Int?
        /// `mrd`: the longest side of a result.
        public var maxResultSide: Int?
        /// No limits of the URL's own.
        public init() {}
    }

    /// How the image meets the box (`fit` by default).
    public var resizingType = ResizingType.fit
    /// Pixels; 0 means "follow the other side" (both 0: the source's size).
    public var width = 0
    /// Pixels; 0 means "follow the other side".
    public var height = 0
    /// The least width of the result: the scale grows to reach it (imgproxy's `min-width`).
    public var minWidth = 0
    /// The least height of the result.
    public var minHeight = 0
    /// Factors multiplying the result's size after everything else decides it.
    public var zoomWidth = 1.0
    /// The zoom factor down (``zoomWidth`` across).
    public var zoomHeight = 1.0
    /// Whether a source smaller than the box is enlarged.
    public var enlarge = false
    /// Padding the result to the box.
    public var extend = Extend()
    /// Padding the result to the box's aspect ratio.
    public var extendAspectRatio = Extend()
    /// What a `fill` crop keeps.
    public var gravity = Gravity.center
    /// A part of the source kept before resizing.
    public var crop: Crop?
    /// A flat border cut away before anything else.
    public var trim: Trim?
    /// Space around the result.
    public var padding = Padding()
    /// Follow the orientation the source states (EXIF, HEIF `irot`/`imir`); `nil`: yes.
    public var autoRotate: Bool?
    /// Degrees clockwise: 0, 90, 180 or 270.
    public var rotate = 0
    /// Mirror left to right.
    public var flipHorizontal = false
    /// Mirror top to bottom.
    public var flipVertical = false
    /// The colour transparency is flattened onto and padding is filled with; `nil`:
    /// transparency kept where the format has it, padding transparent (white in JPEG).
    public var background: PixelColor?
    /// A Gaussian blur's sigma; 0: none.
    public var blur = 0.0
    /// An unsharp mask's sigma; 0: none.
    public var sharpen = 0.0
    /// The block size of pixelation; 1 or less: none.
    public var pixelate = 0
    /// The service's watermark, when it has one.
    public var watermark: Watermark?
    /// 1 to 100; `nil` for the service's default.
    public var quality: Int?
    /// Qualities by output format (`fq`), before ``quality``.
    public var formatQuality: [Format: Int] = [:]
    /// The most bytes the result may take; 0: no limit.
    public var maxBytes = 0
    /// The output format the URL names, if any.
    public var format: Format?
    /// Device pixel ratio: the box is multiplied by it.
    public var dpr = 1.0
    /// Leave the source's EXIF out of the result (the default); `false`: keep it (JPEG, PNG
    /// and WebP results), its orientation set to 1 when the result is turned upright.
    public var stripMetadata = true
    /// While stripping, keep the EXIF `Copyright` and `Artist` (default on, as imgproxy's
    /// `IMGPROXY_KEEP_COPYRIGHT`).
    public var keepCopyright = true
    /// Convert to sRGB and leave the profile out (the default); `false`: keep the source's profile.
    public var stripColorProfile = true
    /// Use a HEIF's own thumbnail when it is large enough.
    public var enforceThumbnail = false
    /// Accepted for imgproxy's URLs; results are SDR.
    public var preserveHDR = false
    /// Source formats sent as they are, without processing.
    public var skipProcessing: Set<ImageFormat> = []
    /// Send the source as it is.
    public var raw = false
    /// Text that only changes the URL.
    public var cacheBuster: String?
    /// A Unix time after which the URL is a 404.
    public var expires: Int64?
    /// The name in `Content-Disposition`.
    public var filename: String?
    /// `Content-Disposition: attachment` rather than `inline`.
    public var returnAttachment = false
    /// Limits set by the URL (applied only with `--allow-security-options`).
    public var security = SecurityLimits()
    /// `/info` only: BlurHash's components across and down (`bh:{x}:{y}`, 1 to 9; 4:3 by default).
    public var blurHash: BlurHashSize?

    /// BlurHash's components across and down.
    public struct BlurHashSize: Sendable, Hashable {
        /// Components across and down.
        public var x: Int
        public var y: Int
    }

    /// The largest width or height a URL may ask for before the service's own limit.
    static let maxSide = 100_000

    /// The defaults: fit, no box, no enlargement, centre gravity, the service's quality and format.
    public init() {}

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

// MARK: Parsing

extension ProcessingOptions {
    mutating func apply(
        name: String, _ arguments: [String], rules: ProcessingURL.Rules = .init(), presetsInUse: [String] = []
    ) throws(ProcessingURL.Failure) {
        var reader = ArgumentReader(option: name, arguments: arguments)
        switch name {
        case "rs", "resize":
            try reader.limit(8)
            if let type = reader.text(0) { resizingType = try reader.parse(type) }
            try applySize(&reader, from: 1)
        case "s", "size":
            try reader.limit(7)
            try applySize(&reader, from: 0)
        case "rt", "resizing_type":
            try reader.limit(1)
            resizingType = try reader.parse(reader.required(0))
        case "w", "width":
            try reader.limit(1)
            width = try reader.pixels(reader.required(0))
        case "h", "height":
            try reader.limit(1)
            height = try reader.pixels(reader.required(0))
        case "mw", "min-width", "min_width":
            try reader.limit(1)
            minWidth = try reader.pixels(reader.required(0))
        case "mh", "min-height", "min_height":
            try reader.limit(1)
            minHeight = try reader.pixels(reader.required(0))
        case "z", "zoom":
            try reader.limit(2)
            zoomWidth = try reader.decimal(reader.required(0), above: 0, max: 100)
            zoomHeight =
                try reader.text(1).map { text throws(ProcessingURL.Failure) in
                    try reader.decimal(text, above: 0, max: 100)
                } ?? zoomWidth
        case "dpr":
            try reader.limit(1)
            dpr = try reader.decimal(reader.required(0), atLeast: 0.1, max: 8)
        case "el", "enlarge":
            try reader.limit(1)
            enlarge = try reader.flag(reader.required(0))
        case "ex", "extend":
            try reader.limit(4)
            extend = try reader.extend(from: 0)
        case "exar", "extend_ar", "extend_aspect_ratio":
            try reader.limit(4)
            extendAspectRatio = try reader.extend(from: 0)
        case "g", "gravity":
            try reader.limit(3)
            gravity = try reader.gravity(from: 0, allowed: GravityType.allCases)
        case "c", "crop":
            try reader.limit(5)
            let cropWidth = try reader.decimal(reader.required(0), atLeast: 0, max: Double(Self.maxSide))
            let cropHeight =
                try reader.text(1).map { text throws(ProcessingURL.Failure) in
                    try reader.decimal(text, atLeast: 0, max: Double(Self.maxSide))
                } ?? 0
            let cropGravity =
                arguments.count > 2 ? try reader.gravity(from: 2, allowed: GravityType.allCases) : nil
            crop = Crop(width: cropWidth, height: cropHeight, gravity: cropGravity)
        case "t", "trim":
            try reader.limit(4)
            guard let thresholdText = reader.text(0) else {
                trim = nil
                return
            }
            var value = Trim(threshold: try reader.decimal(thresholdText, atLeast: 0, max: 255))
            if let color = reader.text(1) { value.color = try reader.color(color) }
            if let equal = reader.text(2) { value.equalHorizontal = try reader.flag(equal) }
            if let equal = reader.text(3) { value.equalVertical = try reader.flag(equal) }
            trim = value
        case "pd", "padding":
            try reader.limit(4)
            var value = Padding()
            value.top = try reader.text(0).map { text throws(ProcessingURL.Failure) in try reader.pixels(text) } ?? 0
            value.right =
                try reader.text(1).map { text throws(ProcessingURL.Failure) in try reader.pixels(text) }
                ?? value.top
            value.bottom =
                try reader.text(2).map { text throws(ProcessingURL.Failure) in try reader.pixels(text) }
                ?? value.top
            value.left =
                try reader.text(3).map { text throws(ProcessingURL.Failure) in try reader.pixels(text) }
                ?? value.right
            padding = value
        case "ar", "auto_rotate":
            try reader.limit(1)
            autoRotate = try reader.flag(reader.required(0))
        case "rot", "rotate":
            try reader.limit(1)
            let text = try reader.required(0)
            guard text.utf8.count <= 10, let degrees = Int(text), degrees % 90 == 0 else { throw reader.invalid }
            rotate = ((degrees % 360) + 360) % 360
        case "fl", "flip":
            try reader.limit(2)
            if let horizontal = reader.text(0) { flipHorizontal = try reader.flag(horizontal) }
            if let vertical = reader.text(1) { flipVertical = try reader.flag(vertical) }
        case "bg", "background":
            switch arguments.count {
            case 1:
                background = try reader.text(0).map { text throws(ProcessingURL.Failure) in try reader.color(text) }
            case 3:
                let channels = try (0..<3).map { index throws(ProcessingURL.Failure) in
                    UInt8(try reader.number(reader.required(index), max: 255))
                }
                background = PixelColor(red: channels[0], green: channels[1], blue: channels[2])
            default:
                throw reader.invalid
            }
        case "bl", "blur":
            try reader.limit(1)
            blur = try reader.decimal(reader.required(0), atLeast: 0, max: 1000)
        case "sh", "sharpen":
            try reader.limit(1)
            sharpen = try reader.decimal(reader.required(0), atLeast: 0, max: 1000)
        case "pix", "pixelate":
            try reader.limit(1)
            pixelate = try reader.number(reader.required(0), max: Self.maxSide)
        case "wm", "watermark":
            try reader.limit(5)
            var value = Watermark(opacity: try reader.decimal(reader.required(0), atLeast: 0, max: 1))
            if let position = reader.text(1) {
                if position == "re" {
                    value.position = .tiled
                } else {
                    let type: GravityType = try reader.parse(position)
                    guard type != .smart, type != .focusPoint else { throw reader.invalid }
                    value.position = .gravity(type)
                }
            }
            if let x = reader.text(2) {
                value.x = try reader.decimal(x, atLeast: -Double(Self.maxSide), max: Double(Self.maxSide))
            }
            if let y = reader.text(3) {
                value.y = try reader.decimal(y, atLeast: -Double(Self.maxSide), max: Double(Self.maxSide))
            }
            if let scale = reader.text(4) { value.scale = try reader.decimal(scale, atLeast: 0, max: 1) }
            watermark = value.opacity > 0 ? value : nil
        case "q", "quality":
            try reader.limit(1)
            let value = try reader.number(reader.required(0), max: 100)
            quality = value == 0 ? nil : value
        case "fq", "format_quality":
            guard !arguments.isEmpty, arguments.count % 2 == 0, arguments.count <= 2 * Format.allCases.count else {
                throw reader.invalid
            }
            for pair in stride(from: 0, to: arguments.count, by: 2) {
                guard let target = Format(name: arguments[pair]) else { throw reader.invalid }
                let value = try reader.number(arguments[pair + 1], max: 100)
                formatQuality[target] = value == 0 ? nil : value
            }
        case "mb", "max_bytes":
            try reader.limit(1)
            maxBytes = try reader.number(reader.required(0), max: 1 << 30)
        case "f", "format", "ext":
            try reader.limit(1)
            let text = try reader.required(0)
            guard let named = Format(name: text) else {
                // imgproxy's Pro formats: known, but not written here (422, not 404).
                if ["pdf", "mp4"].contains(text.lowercased()) {
                    throw .cannotWrite(text.lowercased())
                }
                throw reader.invalid
            }
            format = named
        case "sm", "strip_metadata":
            try reader.limit(1)
            stripMetadata = try reader.flag(reader.required(0))
        case "kcr", "keep_copyright":
            try reader.limit(1)
            keepCopyright = try reader.flag(reader.required(0))
        case "scp", "strip_color_profile":
            try reader.limit(1)
            stripColorProfile = try reader.flag(reader.required(0))
        case "eth", "enforce_thumbnail":
            try reader.limit(1)
            enforceThumbnail = try reader.flag(reader.required(0))
        case "ph", "preserve_hdr":
            try reader.limit(1)
            preserveHDR = try reader.flag(reader.required(0))
        case "skp", "skip_processing":
            guard !arguments.isEmpty, arguments.count <= 16 else { throw reader.invalid }
            for text in arguments {
                guard let source = ProcessingOptions.sourceFormat(named: text) else { throw reader.invalid }
                skipProcessing.insert(source)
            }
        case "bh", "blurhash":
            guard rules.forInfo else { throw .unknownOption(name) }
            try reader.limit(2)
            let x = try reader.number(reader.required(0), max: 9)
            let y =
                try reader.text(1).map { text throws(ProcessingURL.Failure) in try reader.number(text, max: 9) } ?? x
            guard x >= 1, y >= 1 else { throw reader.invalid }
            blurHash = BlurHashSize(x: x, y: y)
        case "raw":
            try reader.limit(1)
            raw = try reader.flag(reader.required(0))
        case "cb", "cachebuster":
            try reader.limit(1)
            cacheBuster = reader.text(0)
        case "exp", "expires":
            try reader.limit(1)
            let text = try reader.required(0)
            guard text.utf8.count <= 19, let time = Int64(text) else { throw reader.invalid }
            if time > 0 && time < Int64(rules.now().timeIntervalSince1970) { throw .expired }
            expires = time
        case "fn", "filename":
            try reader.limit(2)
            let text = try reader.required(0)
            if let encoded = reader.text(1), try reader.flag(encoded) {
                guard let bytes = Base64URL.decode(Substring(text)),
                    let name = String(validating: bytes, as: UTF8.self)
                else { throw reader.invalid }
                filename = name
            } else {
                filename = text.removingPercentEncoding ?? text
            }
        case "att", "return_attachment":
            try reader.limit(1)
            returnAttachment = try reader.flag(reader.required(0))
        case "pr", "preset":
            guard !arguments.isEmpty else { throw reader.invalid }
            for preset in arguments {
                guard let options = rules.presets[preset] else { throw .unknownPreset(preset) }
                // A preset naming itself, directly or not, is applied once.
                guard !presetsInUse.contains(preset) else { continue }
                for option in options {
                    try apply(name: option.name, option.arguments, rules: rules, presetsInUse: presetsInUse + [preset])
                }
            }
        case "msr", "max_src_resolution", "msfs", "max_src_file_size", "maf", "max_animation_frames", "mafr",
            "max_animation_frame_resolution", "mrd", "max_result_dimension":
            guard rules.allowsSecurityOptions else { throw .forbiddenOption(name) }
            try reader.limit(1)
            let text = try reader.required(0)
            switch name {
            case "msr", "max_src_resolution":
                security.maxSourcePixels = Int(try reader.decimal(text, atLeast: 0, max: 100_000) * 1_000_000)
            case "mafr", "max_animation_frame_resolution":
                security.maxAnimationFramePixels = Int(try reader.decimal(text, atLeast: 0, max: 100_000) * 1_000_000)
            case "msfs", "max_src_file_size":
                security.maxSourceBytes = try reader.number(text, max: Int(Int32.max))
            case "maf", "max_animation_frames":
                let frames = try reader.number(text, max: 100_000)
                guard frames > 0 else { throw reader.invalid }
                security.maxAnimationFrames = frames
            default:
                security.maxResultSide = try reader.number(text, max: Self.maxSide)
            }
        default:
            throw .unknownOption(name)
        }
    }

    /// `size`'s arguments from `start`: width, height, enlarge, then extend's.
    private mutating func applySize(_ reader: inout ArgumentReader, from start: Int) throws(ProcessingURL.Failure) {
        if let text = reader.text(start) { width = try reader.pixels(text) }
        if let text = reader.text(start + 1) { height = try reader.pixels(text) }
        if let text = reader.text(start + 2) { enlarge = try reader.flag(text) }
        if reader.text(start + 3) != nil { extend = try reader.extend(from: start + 3) }
    }

    /// A source format by the names `skp` takes (imgproxy's: `jpg`, `heic`, `tiff`...).
    ///
    /// ```swift
    /// ProcessingOptions.sourceFormat(named: "heic")  // .heif
    /// ```
    public static func sourceFormat(named name: String) -> ImageFormat? {
        switch name.lowercased() {
        case "jpg", "jpeg": .jpeg
        case "png": .png
        case "gif": .gif
        case "webp": .webp
        case "avif": .avif
        case "heic", "heif": .heif
        case "jxl": .jxl
        case "tiff", "tif": .tiff
        case "bmp": .bmp
        case "ico": .ico
        case "svg": .svg
        default: nil
        }
    }
}

/// An option's arguments, read with the checks every option shares.
private struct ArgumentReader {
    let option: String
    let arguments: [String]

    var invalid: ProcessingURL.Failure {
        .invalidArgument(option: option, value: arguments.joined(separator: ":"))
    }

    /// The argument at `index` when present and not empty.
    func text(_ index: Int) -> String? {
        index < arguments.count && !arguments[index].isEmpty ? arguments[index] : nil
    }

    func required(_ index: Int) throws(ProcessingURL.Failure) -> String {
        guard let text = text(index) else { throw invalid }
        return text
    }

    func limit(_ count: Int) throws(ProcessingURL.Failure) {
        guard arguments.count <= count, !arguments.isEmpty else { throw invalid }
    }

    func parse<T: RawRepresentable<String>>(_ text: String) throws(ProcessingURL.Failure) -> T {
        guard let value = T(rawValue: text) else { throw invalid }
        return value
    }

    func pixels(_ text: String) throws(ProcessingURL.Failure) -> Int {
        try number(text, max: ProcessingOptions.maxSide)
    }

    /// A decimal number of digits only, at most `max`: no sign, no spaces, no overflow.
    func number(_ text: String, max: Int) throws(ProcessingURL.Failure) -> Int {
        guard !text.isEmpty, text.utf8.count <= 10, text.utf8.allSatisfy({ (48...57).contains($0) }),
            let value = Int(text), value <= max
        else { throw invalid }
        return value
    }

    /// A finite decimal in `min...max` (digits, a sign and a point; no exponent).
    func decimal(_ text: String, atLeast min: Double, max: Double) throws(ProcessingURL.Failure) -> Double {
        guard text.utf8.count <= 24,
            text.utf8.allSatisfy({ (48...57).contains($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") }),
            let value = Double(text), value.isFinite, value >= min, value <= max
        else { throw invalid }
        return value
    }

    /// A decimal above `floor` (exclusive), at most `max`.
    func decimal(_ text: String, above floor: Double, max: Double) throws(ProcessingURL.Failure) -> Double {
        let value = try decimal(text, atLeast: floor, max: max)
        guard value > floor else { throw invalid }
        return value
    }

    func flag(_ text: String) throws(ProcessingURL.Failure) -> Bool {
        switch text {
        case "1", "t", "true": return true
        case "0", "f", "false": return false
        default: throw invalid
        }
    }

    func color(_ text: String) throws(ProcessingURL.Failure) -> PixelColor {
        guard let color = PixelColor(hex: text) else { throw invalid }
        return color
    }

    /// A gravity from `start`: its type, then offsets (two, in 0...1, for `fp`; none for `sm`).
    func gravity(from start: Int, allowed: [ProcessingOptions.GravityType]) throws(ProcessingURL.Failure)
        -> ProcessingOptions.Gravity
    {
        let type: ProcessingOptions.GravityType = try parse(required(start))
        guard allowed.contains(type) else { throw invalid }
        let count = arguments.count - start
        switch type {
        case .smart:
            guard count == 1 else { throw invalid }
            return .smart
        case .focusPoint:
            guard count == 3 else { throw invalid }
            return ProcessingOptions.Gravity(
                .focusPoint, x: try decimal(required(start + 1), atLeast: 0, max: 1),
                y: try decimal(required(start + 2), atLeast: 0, max: 1))
        default:
            guard count <= 3 else { throw invalid }
            let limit = Double(ProcessingOptions.maxSide)
            let x =
                try text(start + 1).map { text throws(ProcessingURL.Failure) in
                    try decimal(text, atLeast: -limit, max: limit)
                } ?? 0
            let y =
                try text(start + 2).map { text throws(ProcessingURL.Failure) in
                    try decimal(text, atLeast: -limit, max: limit)
                } ?? 0
            return ProcessingOptions.Gravity(type, x: x, y: y)
        }
    }

    /// `extend`'s arguments from `start`: whether, then a gravity (not smart).
    func extend(from start: Int) throws(ProcessingURL.Failure) -> ProcessingOptions.Extend {
        var value = ProcessingOptions.Extend()
        value.enabled = try flag(required(start))
        if text(start + 1) != nil {
            value.gravity = try gravity(
                from: start + 1, allowed: ProcessingOptions.GravityType.allCases.filter { $0 != .smart })
        }
        return value
    }
}
