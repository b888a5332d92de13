import CHEIF
import ImageLoaderSupport

/// HEIF and HEIC through libheif (HEVC by libde265, AV1 by dav1d): the primary image
/// only (never a depth map, an alpha plane or a thumbnail item), grids as one image,
/// 8-bit RGBA with straight alpha, colour from the ICC profile or `nclx`
/// (``ColorSignal``).
///
/// The stored pixels come back with the `clap` crop applied and the `irot`/`imir`
/// transformations as the image's ``Orientation`` (read by ``HEIFBoxes``), the way
/// EXIF orientation is for a JPEG; an EXIF orientation inside the file is ignored, as
/// the HEIF specification requires. (A file whose transformations cannot be written
/// so, a crop after a rotation, is decoded upright by libheif, orientation ``up``.)
///
/// libheif 1.15 decodes still images; an image sequence (`msf1`) gives its primary
/// still image, when it has one. libheif decodes whole buffers, so a file source is
/// read into memory first (bounded by the input limit).
enum HEIFDecoder: FormatDecoder {
    static let format = ImageFormat.heif

    static func info(_ reader: ByteReader, limits: DecodingLimits) throws -> ImageInfo {
        try reader.withContiguousBytes { bytes in try HEIFFile(bytes, limits: limits).info }
    }

    static func decode(_ reader: ByteReader, options: DecodingOptions) throws -> RasterImage {
        try checkFrame(options.frames)
        return try reader.withContiguousBytes { bytes in
            let file = try HEIFFile(bytes, limits: options.limits)
            let region = file.region
            return try DecodedPlane.image(
                width: region.width, height: region.height, orientation: file.orientation,
                iccProfile: file.iccProfile, format: .heif, hasAlpha: file.hasAlpha
            ) { target in try file.write(into: target, limits: options.limits) }
        }
    }

    static func thumbnail(_ reader: ByteReader, _ request: ThumbnailRequest) throws -> RasterImage {
        try reader.withContiguousBytes { bytes in
            let file = try HEIFFile(bytes, limits: request.limits)
            let options = try request.options(file.info)
            try checkFrame(options.frames)
            if options.usesEmbeddedThumbnail,
                let embedded = try file.embeddedThumbnail(fitting: options, limits: request.limits)
            {
                return embedded
            }
            let region = file.region
            return try DecodedPlane.thumbnail(
                width: region.width, height: region.height, orientation: file.orientation,
                iccProfile: file.iccProfile, format: .heif, hasAlpha: file.hasAlpha, options: options,
                limits: request.limits
            ) { target in try file.write(into: target, limits: request.limits) }
        }
    }

    private static func checkFrame(_ frames: FrameSelection) throws {
        if case .index(let n) = frames, n != 0 {
            throw ImageDecodingError(.frameOutOfRange(index: n, count: 1), format: .heif)
        }
    }

    /// Throws the error a libheif result stands for.
    static func check(_ error: heif_error) throws {
        guard error.code != heif_error_Ok else { return }
        let message = "libheif: " + (error.message.map { String(cString: $0) } ?? "error \(error.code.rawValue)")
        switch error.code {
        case heif_error_Invalid_input:
            let truncated = error.subcode == heif_suberror_End_of_data
            throw ImageDecodingError(truncated ? .truncated : .corrupt, format: .heif, message: message)
        case heif_error_Unsupported_filetype, heif_error_Unsupported_feature, heif_error_Plugin_loading_error:
            throw ImageDecodingError(.unsupported, format: .heif, message: message)
        case heif_error_Memory_allocation_error:
            throw ImageDecodingError(.unsupported, format: .heif, message: message)
        default:
            throw ImageDecodingError(.corrupt, format: .heif, message: message)
        }
    }
}

/// An open HEIF file: libheif's context and primary image handle, and what the boxes
/// say about placement. Lives for one decode.
final class HEIFFile {
    private let context: Owned<OpaquePointer>
    private let primary: Owned<OpaquePointer>
    private var handle: OpaquePointer { primary.pointer }
    /// The boxes, describing the image decoded.
    let boxes: HEIFBoxes
    /// The size libheif gives the decoded image (stored, or upright when libheif transforms).
    let decodedWidth: Int
    let decodedHeight: Int
    let orientation: Orientation
    /// The clean aperture on the stored pixels, or `nil`.
    let crop: DecodedPlane.Rect?
    /// Whether libheif applies the transformations (the rare files ``HEIFBoxes`` cannot express).
    let libheifTransforms: Bool
    let hasAlpha: Bool
    let premultiplied: Bool
    let depth: Int
    let iccProfile: [UInt8]?

    /// The image's size as the decode returns it (cropped, not yet oriented).
    var region: DecodedPlane.Rect {
        crop ?? DecodedPlane.Rect(x: 0, y: 0, width: decodedWidth, height: decodedHeight)
    }

    /// The primary image's facts.
    var info: ImageInfo {
        ImageInfo(
            format: .heif, width: region.width, height: region.height, hasAlpha: hasAlpha, orientation: orientation,
            iccProfile: iccProfile)
    }

    init(_ bytes: UnsafeRawBufferPointer, limits: DecodingLimits) throws {
        if let failure = LazyLibraries.heifFailure {
            throw ImageDecodingError(.unsupported, format: .heif, message: failure)
        }
        let parsed = try HEIFBoxes(bytes, limits: limits, format: .heif)
        try HEIFFile.check(parsed, limits: limits, format: .heif)
        if parsed.isTruncated {
            throw ImageDecodingError(.truncated, format: .heif, message: "a box runs past the end")
        }
        guard let allocated = heif_context_alloc() else {
            throw ImageDecodingError(.unsupported, format: .heif, message: "libheif: cannot allocate a context")
        }
        let context = Owned(allocated) { heif_context_free($0) }
        self.context = context
        // Sides beyond what the pixel limit allows for a square are refused by libheif
        // itself too. A grid's tiles are decoded on as many threads as the caller's
        // ``ResizeParallelism`` allows (a loader's job running alone: every core; one of
        // several: its share), on the calling thread when that is one.
        heif_context_set_maximum_image_size_limit(
            allocated, Int32(clamping: min(limits.maxPixelsPerFrame, 1 << 20)))
        let threads = ResizeParallelism.cores
        heif_context_set_max_decoding_threads(allocated, threads > 1 ? Int32(clamping: threads) : 0)
        try HEIFDecoder.check(
            heif_context_read_from_memory_without_copy(allocated, bytes.baseAddress, bytes.count, nil))
        guard let (handle, item) = HEIFFile.primaryHandle(allocated) else {
            throw ImageDecodingError(.corrupt, format: .heif, message: "libheif: no primary image")
        }
        primary = Owned(handle) { heif_image_handle_release($0) }
        boxes = parsed.describing(item)
        if boxes.item != parsed.item { try HEIFFile.check(boxes, limits: limits, format: .heif) }
        let placement = boxes.orientationAndCrop
        libheifTransforms = placement == nil
        orientation = placement?.orientation ?? .up
        if libheifTransforms {
            decodedWidth = Int(heif_image_handle_get_width(handle))
            decodedHeight = Int(heif_image_handle_get_height(handle))
            crop = nil
        } else {
            decodedWidth = Int(heif_image_handle_get_ispe_width(handle))
            decodedHeight = Int(heif_image_handle_get_ispe_height(handle))
            crop = placement?.crop.map { DecodedPlane.Rect(x: $0.x, y: $0.y, width: $0.width, height: $0.height) }
        }
        try limits.check(width: decodedWidth, height: decodedHeight, format: .heif)
        hasAlpha = heif_image_handle_has_alpha_channel(handle) != 0
        premultiplied = hasAlpha && heif_image_handle_is_premultiplied_alpha(handle) != 0
        depth = max(8, min(16, Int(heif_image_handle_get_luma_bits_per_pixel(handle))))
        iccProfile = HEIFFile.colorProfile(handle)
    }

    /// The primary image: the one `pitm` names, unless that is another image's thumbnail
    /// (a file libheif 1.15 takes at its word), then the first image that is not one.
    private static func primaryHandle(_ context: OpaquePointer) -> (OpaquePointer, UInt32)? {
        var primary: heif_item_id = 0
        guard heif_context_get_primary_image_ID(context, &primary).code == heif_error_Ok else { return nil }
        let count = Int(heif_context_get_number_of_top_level_images(context))
        guard count > 0 else { return nil }
        var ids = [heif_item_id](repeating: 0, count: count)
        let listed = Int(heif_context_get_list_of_top_level_image_IDs(context, &ids, Int32(count)))
        let topLevel = ids.prefix(listed)
        let chosen = topLevel.contains(primary) ? primary : topLevel.first ?? primary
        var handle: OpaquePointer?
        guard heif_context_get_image_handle(context, chosen, &handle).code == heif_error_Ok, let handle else {
            return nil
        }
        return (handle, chosen)
    }

    /// The image's stored size against the pixel limit; a grid's tiles each cost a
    /// decode: their pixels count against the work limit, their number against the
    /// metadata limit (the boxes were counted already).
    static func check(_ boxes: HEIFBoxes, limits: DecodingLimits, format: ImageFormat) throws {
        // libheif 1.15 decodes such an image's own bitstream alone, without the pictures
        // it is predicted from, and returns the residual as if it were the picture
        // (Nokia's conformance file C044); libheif 1.23 refuses it, and so does this.
        if boxes.isPredicted {
            throw ImageDecodingError(
                .unsupported, format: format, message: "the image is coded predictively from other images (pred)")
        }
        if let stored = boxes.storedSize {
            try limits.check(width: stored.width, height: stored.height, format: format)
        }
        guard !boxes.tileItems.isEmpty else { return }
        try limits.checkMetadata(blocks: boxes.tileItems.count, format: format)
        if let tile = boxes.tileSize {
            try limits.check(width: tile.width, height: tile.height, format: format)
            try limits.checkTotal(
                pixels: Checked.multiply(boxes.tileItems.count, tile.width * tile.height), format: format)
        }
    }

    /// The ICC profile (`prof`, `rICC`), or one made from `nclx` code points.
    private static func colorProfile(_ handle: OpaquePointer) -> [UInt8]? {
        switch heif_image_handle_get_color_profile_type(handle) {
        case heif_color_profile_type_prof, heif_color_profile_type_rICC:
            let size = heif_image_handle_get_raw_color_profile_size(handle)
            guard size > 0, size <= 16 << 20 else { return nil }
            var bytes = [UInt8](repeating: 0, count: size)
            guard heif_image_handle_get_raw_color_profile(handle, &bytes).code == heif_error_Ok else { return nil }
            return bytes
        case heif_color_profile_type_nclx:
            var nclx: UnsafeMutablePointer<heif_color_profile_nclx>?
            // libheif 1.15 may allocate the profile and still report an error (code points
            // out of range): it is freed either way.
            let status = heif_image_handle_get_nclx_color_profile(handle, &nclx)
            defer { if let nclx { heif_nclx_color_profile_free(nclx) } }
            guard status.code == heif_error_Ok, let nclx else { return nil }
            return ColorSignal(
                primaries: Int(nclx.pointee.color_primaries.rawValue),
                transfer: Int(nclx.pointee.transfer_characteristics.rawValue)
            ).iccProfile
        default:
            return nil
        }
    }

    /// The image's rows, cropped, in `target` (made for ``region``'s size), from
    /// libheif's one decode. A decoded image of another size than the header said is
    /// `.corrupt`: the output was sized from the header, and every byte of it is written.
    func write(into target: any RowTarget, limits: DecodingLimits) throws {
        let expected = region
        try decode(handle, limits: limits, transforms: libheifTransforms) { plane in
            let rows = plane.region(crop)
            guard plane.width == decodedWidth, plane.height == decodedHeight, rows == expected else {
                throw ImageDecodingError(
                    .corrupt, format: .heif,
                    message:
                        "libheif decoded \(plane.width)x\(plane.height), the header says \(decodedWidth)x\(decodedHeight)"
                )
            }
            plane.write(rows, into: target)
        }
    }

    /// libheif's working memory, checked before it decodes: the coded planes (as the
    /// `hvcC` or `av1C` says they are subsampled; 4:4:4 when it does not say) and the
    /// interleaved RGB (RGBA with alpha) it converts them to. An opaque image comes as
    /// RGB, 3 bytes a pixel: an iPhone's 48-megapixel 4:2:0 photo needs 216 MB, within
    /// the default 256 MiB.
    private func decode<R>(
        _ handle: OpaquePointer, limits: DecodingLimits, transforms: Bool, _ body: (DecodedPlane) throws -> R
    ) throws -> R {
        let width = Int(heif_image_handle_get_width(handle))
        let height = Int(heif_image_handle_get_height(handle))
        try limits.check(width: width, height: height, format: .heif)
        let sampleBytes = depth > 8 ? 2 : 1
        let alpha = heif_image_handle_has_alpha_channel(handle) != 0
        let channels = alpha ? 4 : 3
        // Coded samples a pixel, in quarters: 4:0:0 4, 4:2:0 6, 4:2:2 8, 4:4:4 12 (and alpha 4).
        let codedQuarters = (boxes.chromaQuarters ?? 12) + (alpha ? 4 : 0)
        let perPixel = sampleBytes * (codedQuarters + channels * 4)
        // (In range: the pixels passed the limit.)
        try limits.checkWorking(
            bytes: Checked.multiply(width * height, perPixel).map { ($0 + 3) / 4 }, format: .heif,
            what: "libheif's planes and RGB")
        guard let options = heif_decoding_options_alloc() else {
            throw ImageDecodingError(.unsupported, format: .heif, message: "libheif: cannot allocate options")
        }
        defer { heif_decoding_options_free(options) }
        options.pointee.ignore_transformations = transforms ? 0 : 1
        let chroma =
            depth > 8
            ? (alpha ? heif_chroma_interleaved_RRGGBBAA_LE : heif_chroma_interleaved_RRGGBB_LE)
            : (alpha ? heif_chroma_interleaved_RGBA : heif_chroma_interleaved_RGB)
        var image: OpaquePointer?
        try HEIFDecoder.check(heif_decode_image(handle, &image, heif_colorspace_RGB, chroma, options))
        guard let image else { throw ImageDecodingError(.corrupt, format: .heif, message: "libheif: no image") }
        defer { heif_image_release(image) }
        var stride: Int32 = 0
        guard let base = heif_image_get_plane_readonly(image, heif_channel_interleaved, &stride) else {
            throw ImageDecodingError(.corrupt, format: .heif, message: "libheif: no interleaved plane")
        }
        let planeWidth = Int(heif_image_get_width(image, heif_channel_interleaved))
        let planeHeight = Int(heif_image_get_height(image, heif_channel_interleaved))
        guard planeWidth > 0, planeHeight > 0, Int(stride) >= planeWidth * channels * sampleBytes else {
            throw ImageDecodingError(.corrupt, format: .heif, message: "libheif: empty image")
        }
        let bits = depth > 8 ? Int(heif_image_get_bits_per_pixel_range(image, heif_channel_interleaved)) : 8
        return try body(
            DecodedPlane(
                base: UnsafeRawPointer(base), stride: Int(stride), width: planeWidth, height: planeHeight,
                storageBits: sampleBytes * 8, depth: sampleBytes == 1 ? 8 : max(9, min(16, bits > 0 ? bits : depth)),
                premultiplied: premultiplied && alpha, channels: channels))
    }

    /// The file's embedded thumbnail made into the thumbnail asked for, when there is
    /// one at least as large as the box (else `nil`: the main image is used).
    func embeddedThumbnail(fitting options: ThumbnailOptions, limits: DecodingLimits) throws -> RasterImage? {
        let count = Int(heif_image_handle_get_number_of_thumbnails(handle))
        guard count > 0 else { return nil }
        var id: heif_item_id = 0
        guard heif_image_handle_get_list_of_thumbnail_IDs(handle, &id, 1) == 1 else { return nil }
        var thumbnail: OpaquePointer?
        guard heif_image_handle_get_thumbnail(handle, id, &thumbnail).code == heif_error_Ok, let thumbnail else {
            return nil
        }
        defer { heif_image_handle_release(thumbnail) }
        // libheif transforms a thumbnail with its own properties: it comes back upright.
        let width = Int(heif_image_handle_get_width(thumbnail))
        let height = Int(heif_image_handle_get_height(thumbnail))
        // Used only when it holds at least the pixels the thumbnail shows (the main image's
        // scaled size, on its longer and its shorter side).
        let main = try ThumbnailGeometry(
            sourceWidth: region.width, sourceHeight: region.height, orientation: orientation, options: options,
            limits: limits)
        let needed = (max(main.scaledWidth, main.scaledHeight), min(main.scaledWidth, main.scaledHeight))
        guard max(width, height) >= needed.0, min(width, height) >= needed.1 else { return nil }
        return try decode(thumbnail, limits: limits, transforms: true) { plane in
            try plane.thumbnail(
                plane.region(nil), orientation: .up, iccProfile: iccProfile, format: .heif,
                hasAlpha: heif_image_handle_has_alpha_channel(thumbnail) != 0, options: options, limits: limits)
        }
    }
}
