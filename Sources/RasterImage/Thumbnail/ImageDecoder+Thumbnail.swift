extension ImageDecoder {
    /// A thumbnail of the image in `source`, decoding as little as the format allows:
    /// JPEG scales in the DCT, WebP in libwebp; PNG, TIFF, BMP and JPEG rows are reduced
    /// as they arrive, so the full-size image is never held (interlaced PNG, GIF and
    /// animations are decoded whole first). The result is upright, sRGB, straight alpha.
    ///
    /// ```swift
    /// let thumb = try ImageDecoder().thumbnail(.file(path: "photo.jpg"), options: ThumbnailOptions(maxPixelSize: 256))
    /// ```
    ///
    /// `limits` bound the whole read: the full-size header is checked before anything is
    /// allocated, and the thumbnail's pixels are held to them too.
    public func thumbnail(_ source: ImageSource, limits: DecodingLimits, options: ThumbnailOptions)
        throws(ImageDecodingError) -> RasterImage
    {
        try options.validate()
        return try ImageDecoder.run(source, limits) { reader, decoder in
            try decoder.thumbnail(reader, ThumbnailRequest(limits: limits, .given(options)))
        }
    }

    /// A thumbnail whose options are chosen from the header that the thumbnail's own
    /// decode reads: no second pass over the header, as ``info(_:options:)`` followed by
    /// ``thumbnail(_:options:)`` would make. `options` sees the header before any pixel
    /// is decoded; `limits` bound the whole read.
    ///
    /// Throws ``ImageDecodingError``, or the error `options` throws, unchanged.
    ///
    /// ```swift
    /// // A square crop of the shorter side, never past 512 pixels; refuse panoramas.
    /// let thumb = try ImageDecoder().thumbnail(.data(body), limits: DecodingLimits()) { info in
    ///     guard info.width <= 4 * info.height else { throw UploadError.panorama }
    ///     let side = min(512, info.width, info.height)
    ///     return ThumbnailOptions(width: side, height: side, fit: .fill)
    /// }
    /// ```
    public func thumbnail(
        _ source: ImageSource, limits: DecodingLimits, options: (ImageInfo) throws -> ThumbnailOptions
    ) throws -> RasterImage {
        // The decoders' errors are made typed on the way out; the chooser's pass through as thrown.
        var chooserError: (any Error)?
        do {
            return try withoutActuallyEscaping(options) { choose in
                try ImageDecoder.run(source, limits) { reader, decoder in
                    try decoder.thumbnail(
                        reader,
                        ThumbnailRequest(
                            limits: limits,
                            .fromHeader { info in
                                do {
                                    return try choose(info)
                                } catch {
                                    chooserError = error
                                    throw error
                                }
                            }))
                }
            }
        } catch {
            throw chooserError ?? error
        }
    }

    /// The thumbnail encoded in `options.outputFormat`. With `options.frames` set to
    /// `.all`, an animation stays animated in GIF and WebP (every frame, its duration
    /// and the loop count); other formats keep its first frame.
    ///
    /// Throws ``ImageDecodingError`` or ``ImageEncodingError``.
    ///
    /// ```swift
    /// let jpeg = try ImageDecoder().encodedThumbnail(.data(body), options: ThumbnailOptions(maxPixelSize: 256))
    /// ```
    public func encodedThumbnail(
        _ source: ImageSource, limits: DecodingLimits = DecodingLimits(), options: ThumbnailOptions
    ) throws -> EncodedImage {
        try thumbnail(source, limits: limits, options: options).encodedKeepingAnimation(as: options.outputFormat)
    }
}

/// What one thumbnail decode is asked for: the limits that bound the read, and the
/// options, given by the caller or chosen from the header the thumbnail's own decode
/// reads (``ImageDecoder/thumbnail(_:limits:options:)-2d06x``).
struct ThumbnailRequest {
    enum Choice {
        case given(ThumbnailOptions)
        case fromHeader((ImageInfo) throws -> ThumbnailOptions)
    }

    /// What bounds the read and the result, known before the options are.
    let limits: DecodingLimits
    let choice: Choice

    init(limits: DecodingLimits, _ choice: Choice) {
        self.limits = limits
        self.choice = choice
    }

    /// The options; `info` is made only when they are chosen from it. The chooser sees
    /// only a header within the limits' pixels; what it chooses is validated.
    func options(_ info: @autoclosure () throws -> ImageInfo) throws -> ThumbnailOptions {
        switch choice {
        case .given(let options):
            return options
        case .fromHeader(let choose):
            let header = try info()
            try limits.check(width: header.width, height: header.height, format: header.format)
            let options = try choose(header)
            try options.validate()
            return options
        }
    }
}

extension JPEGDecoder {
    static func thumbnail(_ reader: ByteReader, _ request: ThumbnailRequest) throws -> RasterImage {
        let session = try JPEGReadSession(reader, limits: request.limits)
        try session.readHeader()
        let (width, height) = (session.imageWidth, session.imageHeight)
        try request.limits.check(width: width, height: height, format: .jpeg)
        let metadata = session.metadata()
        let options = try request.options(info(session, metadata))
        let geometry = try ThumbnailGeometry(
            sourceWidth: width, sourceHeight: height, orientation: metadata.orientation, options: options,
            limits: request.limits)
        // CMYK with a profile lcms can read is converted by the profile, after the resize.
        let cmykModel = PixelColorModel.cmyk(inverted: session.cmykIsInverted)
        let keepsCMYK =
            session.isCMYK
            && metadata.iccProfile.map { TransformCache.shared.transform(for: $0, model: cmykModel) != nil } ?? false
        let denominator = ShrinkFactor.choose(
            width: width, height: height, target: geometry, mode: options.shrinkOnLoad, choices: [8, 4, 2])
        // A progressive file at 1/8 from only the scans it needs (never CMYK); else libjpeg.
        let eighth = denominator == 8 ? try eighth(reader, session: session, limits: request.limits) : nil
        if eighth == nil { try session.start(scaleDenominator: denominator, keepingCMYK: keepsCMYK) }
        let (inputWidth, inputHeight) =
            eighth.map { ($0.image.outputWidth, $0.image.outputHeight) } ?? (session.outputWidth, session.outputHeight)
        let resizer = StreamingResizer(
            window: geometry.window(inputWidth: inputWidth, inputHeight: inputHeight),
            kernel: options.kernel, channels: .independent, linearLight: options.linearLight && !keepsCMYK)
        let target = ResizingTarget(resizer: resizer)
        if let eighth {
            eighth.image.writeRows(into: target, colorSpace: eighth.colorSpace)
        } else {
            try readRows(
                reader, session: session, scale: denominator, into: target, limits: request.limits,
                allowsTruncatedData: false)
        }
        let image = RasterImage(
            validatedWidth: geometry.croppedWidth, height: geometry.croppedHeight,
            bytesPerRow: geometry.croppedWidth * 4,
            frames: [.init(pixels: resizer.finish())], alphaMode: .straight, loopCount: 1,
            orientation: metadata.orientation, iccProfile: metadata.iccProfile, format: .jpeg, hasAlpha: false)
        return ThumbnailFinisher.finish(
            image, geometry: geometry, options: options, colorModel: keepsCMYK ? cmykModel : .rgba)
    }
}

extension PNGDecoder {
    static func thumbnail(_ reader: ByteReader, _ request: ThumbnailRequest) throws -> RasterImage {
        let session = try PNGReadSession(reader, limits: request.limits)
        let header = try session.readHeader()
        try request.limits.check(width: header.width, height: header.height, format: .png)
        let options = try request.options(info(header))
        if header.interlaced {
            // Adam7 passes each cover the whole image: decode it, then resize.
            reader.seek(to: 0)
            return try decode(reader, options: DecodingOptions(limits: request.limits)).thumbnail(
                limits: request.limits, options: options)
        }
        // An eXIf after the image data is found only at the end; the box is fitted
        // to the orientation known from the header.
        let geometry = try ThumbnailGeometry(
            sourceWidth: header.width, sourceHeight: header.height, orientation: header.orientation ?? .up,
            options: options, limits: request.limits)
        let resizer = StreamingResizer(
            window: geometry.window(inputWidth: header.width, inputHeight: header.height), kernel: options.kernel,
            channels: header.hasAlpha ? .straightAlpha : .independent, linearLight: options.linearLight)
        let (orientation, _) = try readImage(
            reader, session: session, header: header, limits: request.limits,
            into: ResizingTarget(resizer: resizer, maxRows: 1), allowsTruncatedData: false)
        let image = RasterImage(
            validatedWidth: geometry.croppedWidth, height: geometry.croppedHeight,
            bytesPerRow: geometry.croppedWidth * 4,
            frames: [.init(pixels: resizer.finish())], alphaMode: .straight, loopCount: 1, orientation: orientation,
            iccProfile: header.iccProfile, format: .png, hasAlpha: header.hasAlpha)
        return ThumbnailFinisher.finish(image, geometry: geometry, options: options)
    }
}

extension TIFFDecoder {
    static func thumbnail(_ reader: ByteReader, _ request: ThumbnailRequest) throws -> RasterImage {
        let file = try TIFFFile(reader, limits: request.limits)
        let options = try request.options(try info(file, limits: request.limits))
        switch options.frames {
        case .all, .prefix:
            return try decode(reader, options: DecodingOptions(limits: request.limits, frames: options.frames))
                .thumbnail(limits: request.limits, options: options)
        case .index(let n):
            let count = try file.pageCount(limits: request.limits)
            guard n >= 0, n < count else {
                throw ImageDecodingError(.frameOutOfRange(index: n, count: count), format: .tiff)
            }
            try file.select(page: n)
        case .first:
            break
        }
        let page = try file.page()
        try request.limits.check(width: page.width, height: page.height, format: .tiff)
        guard page.color != nil else {
            return try file.decodePage(options: DecodingOptions(limits: request.limits)).thumbnail(
                limits: request.limits, options: options)
        }
        let geometry = try ThumbnailGeometry(
            sourceWidth: page.width, sourceHeight: page.height, orientation: page.orientation, options: options,
            limits: request.limits)
        let associated = page.alpha?.associated == true
        let resizer = StreamingResizer(
            window: geometry.window(inputWidth: page.width, inputHeight: page.height), kernel: options.kernel,
            channels: page.alpha != nil && !associated ? .straightAlpha : .independent,
            linearLight: options.linearLight)
        _ = try file.readRows(page, into: ResizingTarget(resizer: resizer, maxRows: 1), allowsTruncatedData: false)
        let image = RasterImage(
            validatedWidth: geometry.croppedWidth, height: geometry.croppedHeight,
            bytesPerRow: geometry.croppedWidth * 4,
            frames: [.init(pixels: resizer.finish())], alphaMode: associated ? .premultiplied : .straight,
            loopCount: 1, orientation: page.orientation, iccProfile: page.iccProfile, format: .tiff,
            hasAlpha: page.alpha != nil)
        return ThumbnailFinisher.finish(image, geometry: geometry, options: options)
    }
}

extension BMPDecoder {
    static func thumbnail(_ reader: ByteReader, _ request: ThumbnailRequest) throws -> RasterImage {
        var header = try BMPHeader(reader)
        try request.limits.check(width: header.width, height: header.height, format: .bmp)
        let options = try request.options(header.info)
        header.dropAlphaIfUnused(reader)
        if header.compression == .rle8 || header.compression == .rle4 {
            return try decode(reader, options: DecodingOptions(limits: request.limits)).thumbnail(
                limits: request.limits, options: options)
        }
        let geometry = try ThumbnailGeometry(
            sourceWidth: header.width, sourceHeight: header.height, orientation: .up, options: options,
            limits: request.limits)
        let resizer = StreamingResizer(
            window: geometry.window(inputWidth: header.width, inputHeight: header.height), kernel: options.kernel,
            channels: header.hasAlphaChannel ? .straightAlpha : .independent, linearLight: options.linearLight)
        _ = try readRows(
            header, reader, into: ResizingTarget(resizer: resizer, maxRows: 1), allowsTruncatedData: false)
        let image = RasterImage(
            validatedWidth: geometry.croppedWidth, height: geometry.croppedHeight,
            bytesPerRow: geometry.croppedWidth * 4,
            frames: [.init(pixels: resizer.finish())], alphaMode: .straight, loopCount: 1, orientation: .up,
            iccProfile: header.iccProfile, format: .bmp, hasAlpha: header.hasAlphaChannel)
        return ThumbnailFinisher.finish(image, geometry: geometry, options: options)
    }
}

extension WebPDecoder {
    static func thumbnail(_ reader: ByteReader, _ request: ThumbnailRequest) throws -> RasterImage {
        try reader.withContiguousBytes { bytes in
            let features = try WebPContainer.features(bytes)
            let (width, height) = (Int(features.width), Int(features.height))
            try request.limits.check(width: width, height: height, format: .webp)
            let container = try WebPContainer(bytes, limits: request.limits)
            let options = try request.options(info(features, container))
            if features.has_animation != 0 {
                return try decode(reader, options: DecodingOptions(limits: request.limits, frames: options.frames))
                    .thumbnail(limits: request.limits, options: options)
            }
            try checkStillWorkingMemory(features, limits: request.limits)
            let geometry = try ThumbnailGeometry(
                sourceWidth: width, sourceHeight: height, orientation: container.orientation, options: options,
                limits: request.limits)
            // libwebp scales while decoding: to the final size when speed matters most,
            // otherwise by a whole factor leaving at least 2x for the kernel.
            let (decodeWidth, decodeHeight): (Int, Int)
            if options.shrinkOnLoad == .fastest && geometry.scaledWidth <= width && geometry.scaledHeight <= height {
                (decodeWidth, decodeHeight) = (geometry.scaledWidth, geometry.scaledHeight)
            } else {
                let factor = ShrinkFactor.choose(
                    width: width, height: height, target: geometry, mode: .quality, choices: Array((2...64).reversed()))
                (decodeWidth, decodeHeight) = ((width + factor - 1) / factor, (height + factor - 1) / factor)
            }
            let pixels = try PixelBuffer.make(count: decodeWidth * decodeHeight * 4) { base in
                try decodeStill(
                    bytes, into: base, width: decodeWidth, height: decodeHeight, bytesPerRow: decodeWidth * 4)
            }
            let decoded = RasterImage(
                validatedWidth: decodeWidth, height: decodeHeight, bytesPerRow: decodeWidth * 4,
                frames: [.init(pixels: pixels)], alphaMode: .straight, loopCount: 1, orientation: container.orientation,
                iccProfile: container.iccProfile, format: .webp, hasAlpha: features.has_alpha != 0)
            let scaled = decoded.resized(
                window: geometry.window(inputWidth: decodeWidth, inputHeight: decodeHeight), kernel: options.kernel,
                linearLight: options.linearLight)
            return ThumbnailFinisher.finish(scaled, geometry: geometry, options: options)
        }
    }
}

/// How much a decoder shrinks while loading, as ``ThumbnailOptions/ShrinkOnLoad`` allows.
enum ShrinkFactor {
    /// The largest of `choices` (largest first) that leaves the image at least the
    /// target size (`.fastest`) or twice it (`.quality`) on both sides; 1 when none does.
    static func choose(
        width: Int, height: Int, target: ThumbnailGeometry, mode: ThumbnailOptions.ShrinkOnLoad, choices: [Int]
    ) -> Int {
        let margin = mode == .quality ? 2 : 1
        for factor in choices {
            let scaledWidth = (width + factor - 1) / factor
            let scaledHeight = (height + factor - 1) / factor
            if scaledWidth >= target.scaledWidth * margin && scaledHeight >= target.scaledHeight * margin {
                return factor
            }
        }
        return 1
    }
}
