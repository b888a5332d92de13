/// Bounds on an SVG document, checked by the sanitiser every SVG goes through before
/// any renderer sees it (see ``ImageDecoder/sanitizedSVG(_:)``). librsvg 2.54 (Debian 12's) bounds none of these itself: a quadratic entity
/// blow-up takes gigabytes, a large `feConvolveMatrix` aborts the process, hundreds of
/// chained filters exhaust memory, and thousands of filtered elements, a billion
/// turbulence octaves or 200,000 gradient stops each take tens of seconds.
///
/// ```swift
/// var options = DecodingOptions()
/// options.limits.svg.maxElements = 5_000     // icons and logos only
/// ```
public struct SVGLimits: Sendable, Hashable {
    /// The most bytes a document may have.
    public var maxBytes: Int = 8 << 20
    /// The most elements, after `<use>` references are counted as the copies they make.
    public var maxElements: Int = 50_000
    /// The deepest nesting of elements.
    public var maxDepth: Int = 128
    /// The most filter primitives (`fe*` elements) in the document.
    public var maxFilterPrimitives: Int = 200
    /// The most elements a filter is applied to (each application renders the filter
    /// region once per primitive).
    public var maxFilteredElements: Int = 200
    /// The largest `order` of an `feConvolveMatrix` (its work is order² per pixel).
    public var maxConvolveOrder: Int = 16
    /// The largest `radius` of an `feMorphology` (its work is radius² per pixel):
    /// larger radii are lowered to it.
    public var maxMorphologyRadius: Double = 32
    /// The most octaves of an `feTurbulence` (its work grows with each): more are
    /// lowered to it.
    public var maxTurbulenceOctaves: Int = 8
    /// The most gradient stops in the document.
    public var maxGradientStops: Int = 2_000
    /// The bytes entity references may add when expanded, in all.
    public var maxEntityExpansionBytes: Int = 1 << 20

    /// The defaults: room for illustrations, icons and charts as drawing programs write them.
    public init() {}
}
