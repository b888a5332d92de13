import CSVG
import ImageLoaderSupport

/// SVG through librsvg (opened when the first SVG is met), always sanitised first
/// (``SVGSanitizer``, bounded by ``DecodingLimits/svg``) and always handed to librsvg
/// as bytes with no base location, so that nothing outside the document can be read.
/// A decode renders the document at its intrinsic size; a thumbnail renders it once,
/// at the size the thumbnail needs (a vector is drawn at its final size, never drawn
/// large and shrunk). The pixels are premultiplied, as cairo draws them.
///
/// What librsvg would spend is bounded before it runs: the rendered pixels by the
/// pixel limit (a document larger than it is drawn smaller, not refused), each filter's surfaces (one a primitive, the size of the rendering)
/// by the working-memory limit, and the filters' work (primitives × filtered
/// elements × pixels) by the work limit.
enum SVGDecoder: FormatDecoder {
    static let format = ImageFormat.svg

    static func sanitized(_ reader: ByteReader, limits: DecodingLimits) throws -> SVGSanitizer.Sanitized {
        guard reader.size <= limits.svg.maxBytes else {
            throw ImageDecodingError(.tooManyBytes(bytes: reader.size, limit: limits.svg.maxBytes), format: .svg)
        }
        return try SVGSanitizer(limits: limits.svg, decodingLimits: limits).sanitize(
            reader.bytes(at: 0, count: reader.size))
    }

    /// The size a document is drawn at: its intrinsic size in whole pixels (at least
    /// 1), scaled down, as imgproxy's vector guard does, to fit the pixel limit when it
    /// is larger (a vector can be drawn at any size, so its size is never refused).
    static func pixelSize(_ document: SVGSanitizer.Sanitized, limits: DecodingLimits) -> (width: Int, height: Int) {
        var (width, height) = (document.width, document.height)
        let pixels = width * height
        let limit = Double(max(1, limits.maxPixelsPerFrame))
        if pixels > limit {
            let scale = (limit / pixels).squareRoot()
            (width, height) = (width * scale, height * scale)
        }
        var size = (width: max(1, Int(width.rounded())), height: max(1, Int(height.rounded())))
        // Rounding up may pass the limit by a row: take it back.
        while size.width * size.height > limits.maxPixelsPerFrame && size.width > 1 && size.height > 1 {
            if size.width >= size.height { size.width -= 1 } else { size.height -= 1 }
        }
        return size
    }

    static func info(_ reader: ByteReader, limits: DecodingLimits) throws -> ImageInfo {
        info(of: try sanitized(reader, limits: limits), limits: limits)
    }

    /// The facts of a sanitised document: the size it is drawn at, with alpha.
    static func info(of document: SVGSanitizer.Sanitized, limits: DecodingLimits) -> ImageInfo {
        let size = pixelSize(document, limits: limits)
        return ImageInfo(format: .svg, width: size.width, height: size.height, hasAlpha: true)
    }

    static func decode(_ reader: ByteReader, options: DecodingOptions) throws -> RasterImage {
        if case .index(let n) = options.frames, n != 0 {
            throw ImageDecodingError(.frameOutOfRange(index: n, count: 1), format: .svg)
        }
        let document = try sanitized(reader, limits: options.limits)
        let size = pixelSize(document, limits: options.limits)
        return try render(document, width: size.width, height: size.height, limits: options.limits)
    }

    static func thumbnail(_ reader: ByteReader, _ request: ThumbnailRequest) throws -> RasterImage {
        let document = try sanitized(reader, limits: request.limits)
        let size = pixelSize(document, limits: request.limits)
        let options = try request.options(
            ImageInfo(format: .svg, width: size.width, height: size.height, hasAlpha: true))
        let geometry = try ThumbnailGeometry(
            sourceWidth: size.width, sourceHeight: size.height, orientation: .up, options: options,
            limits: request.limits)
        let image = try render(
            document, width: max(1, geometry.scaledWidth), height: max(1, geometry.scaledHeight), limits: request.limits
        )
        return try image.thumbnail(limits: request.limits, options: options)
    }

    /// Renders `document` to fill `width` x `height`.
    static func render(_ document: SVGSanitizer.Sanitized, width: Int, height: Int, limits: DecodingLimits) throws
        -> RasterImage
    {
        try limits.check(width: width, height: height, format: .svg)
        try limits.check(frames: 1, frameBytes: width * height * 4, format: .svg)
        let pixels = width * height
        // cairo keeps a surface of the rendering's size for each primitive's result.
        try limits.checkWorking(
            bytes: Checked.multiply(document.largestFilter, pixels).flatMap { Checked.multiply($0, 4) },
            format: .svg, what: "filter surfaces")
        try limits.checkTotal(
            pixels: Checked.multiply(document.largestFilter, document.filteredElements).flatMap {
                Checked.multiply($0, pixels)
            } ?? Int.max, format: .svg)
        if let missing = LazyLibraries.svgFailure {
            throw ImageDecodingError(.unsupported, format: .svg, message: missing)
        }
        var message = [CChar](repeating: 0, count: 256)
        var failed = false
        let bgra = PixelBuffer.make(count: pixels * 4) { base in
            failed =
                document.bytes.withUnsafeBufferPointer { data in
                    csvg_render(
                        data.baseAddress, data.count, Int32(width), Int32(height), base, &message, message.count)
                } != 0
        }
        if failed {
            let text = String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw ImageDecodingError(.corrupt, format: .svg, message: "librsvg: \(text)")
        }
        // cairo's ARGB32 is BGRA in memory on a little-endian machine.
        var rgba = bgra
        rgba.withUnsafeMutableBufferPointer { buffer in
            var index = 0
            while index < buffer.count {
                buffer.swapAt(index, index + 2)
                index += 4
            }
        }
        return RasterImage(
            validatedWidth: width, height: height, bytesPerRow: width * 4, frames: [.init(pixels: rgba)],
            alphaMode: .premultiplied, loopCount: 1, orientation: .up, iccProfile: nil, format: .svg, hasAlpha: true)
    }
}

extension ImageDecoder {
    /// The SVG document in `source` made safe to serve, as UTF-8 bytes: no scripts, event
    /// attributes or external references, bounded by ``DecodingLimits/svg`` (the
    /// "Formats, limits and errors" article lists every rule); throws for what is not
    /// SVG or is refused.
    ///
    /// ```swift
    /// let safe = try ImageDecoder().sanitizedSVG(.bytes(upload))
    /// ```
    public func sanitizedSVG(_ source: ImageSource) throws(ImageDecodingError) -> [UInt8] {
        try sanitizedSVGAndInfo(source).bytes
    }

    /// The sanitised document and its facts, from one read (a service passing an SVG
    /// through needs both).
    package func sanitizedSVGAndInfo(_ source: ImageSource) throws(ImageDecodingError) -> (
        bytes: [UInt8], info: ImageInfo
    ) {
        try ImageDecoder.run(source, options.limits) { reader, decoder in
            guard decoder.format == .svg else {
                throw ImageDecodingError(.unsupported, format: decoder.format, message: "not an SVG document")
            }
            let document = try SVGDecoder.sanitized(reader, limits: options.limits)
            return (document.bytes, SVGDecoder.info(of: document, limits: options.limits))
        }
    }
}
