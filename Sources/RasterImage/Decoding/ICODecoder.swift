/// Windows icons (ICO): a directory of images, each a PNG or a device-independent
/// bitmap (a BMP without its file header, twice as tall as the icon: the colour rows,
/// then a 1-bit mask where a set bit is transparent). A decode returns the largest
/// image (most pixels, then most bits a pixel, as browsers and Pillow choose); a
/// thumbnail decodes the smallest image that still covers the size it needs, so a
/// 16-pixel favicon comes from the 16x16 entry, not from the 256x256 one.
///
/// Every entry's offset and size are checked against the file; an entry's own header
/// must agree with the directory's size for it, as libvips' loader requires.
enum ICODecoder: FormatDecoder {
    static let format = ImageFormat.ico

    /// One directory entry: where its image is and what it claims.
    struct Entry {
        var width: Int
        var height: Int
        var bitsPerPixel: Int
        var offset: Int
        var size: Int
    }

    /// Whether the leading bytes are an icon directory: reserved 0, type 1, at least
    /// one entry, and the first entry's reserved byte 0 (ICO's signature is weak alone).
    static func sniff(_ b: [UInt8]) -> Bool {
        guard b.count >= 22, b[0] == 0, b[1] == 0, b[2] == 1, b[3] == 0 else { return false }
        let count = Int(b[4]) | Int(b[5]) << 8
        let offset = Int(b[18]) | Int(b[19]) << 8 | Int(b[20]) << 16 | Int(b[21]) << 24
        return count > 0 && b[9] == 0 && offset >= 6 + 16 * count
    }

    /// The directory, checked against the file's size and the metadata limit.
    static func entries(_ reader: ByteReader, limits: DecodingLimits) throws -> [Entry] {
        let head = reader.bytes(at: 0, count: 6)
        guard head.count == 6 else { throw ImageDecodingError(.truncated, format: .ico, message: "no directory") }
        let count = Int(head[4]) | Int(head[5]) << 8
        guard count > 0 else { throw ImageDecodingError(.corrupt, format: .ico, message: "no images") }
        try limits.checkMetadata(blocks: count, format: .ico)
        let directory = reader.bytes(at: 6, count: 16 * count)
        guard directory.count == 16 * count else {
            throw ImageDecodingError(.truncated, format: .ico, message: "the directory ends early")
        }
        let cursor = BinaryCursor(directory, littleEndian: true)
        var entries: [Entry] = []
        for index in 0..<count {
            let base = index * 16
            guard let bits = cursor.uint16(at: base + 6), let size = cursor.uint32(at: base + 8),
                let offset = cursor.uint32(at: base + 12)
            else { continue }
            let entry = Entry(
                width: directory[base] == 0 ? 256 : Int(directory[base]),
                height: directory[base + 1] == 0 ? 256 : Int(directory[base + 1]),
                bitsPerPixel: Int(bits), offset: Int(offset), size: Int(size))
            // An entry whose data lies outside the file, or inside the directory, is skipped.
            guard entry.size > 0, entry.offset >= 6 + 16 * count, entry.offset <= reader.size,
                entry.size <= reader.size - entry.offset
            else { continue }
            entries.append(entry)
        }
        guard !entries.isEmpty else {
            throw ImageDecodingError(.truncated, format: .ico, message: "no image lies within the file")
        }
        return entries
    }

    /// The largest entry: most pixels, then most bits a pixel.
    static func largest(_ entries: [Entry]) -> Entry {
        entries.max { ($0.width * $0.height, $0.bitsPerPixel) < ($1.width * $1.height, $1.bitsPerPixel) }!
    }

    static func info(_ reader: ByteReader, limits: DecodingLimits) throws -> ImageInfo {
        let entry = largest(try entries(reader, limits: limits))
        return ImageInfo(format: .ico, width: entry.width, height: entry.height, hasAlpha: true)
    }

    static func decode(_ reader: ByteReader, options: DecodingOptions) throws -> RasterImage {
        if case .index(let n) = options.frames, n != 0 {
            throw ImageDecodingError(.frameOutOfRange(index: n, count: 1), format: .ico)
        }
        return try decode(largest(try entries(reader, limits: options.limits)), reader, limits: options.limits)
    }

    static func thumbnail(_ reader: ByteReader, _ request: ThumbnailRequest) throws -> RasterImage {
        let all = try entries(reader, limits: request.limits)
        let biggest = largest(all)
        let options = try request.options(
            ImageInfo(format: .ico, width: biggest.width, height: biggest.height, hasAlpha: true))
        let geometry = try ThumbnailGeometry(
            sourceWidth: biggest.width, sourceHeight: biggest.height, orientation: .up, options: options,
            limits: request.limits)
        // The smallest entry of the largest's shape that covers the scaled size.
        let covering = all.filter {
            $0.width >= geometry.scaledWidth && $0.height >= geometry.scaledHeight
                && $0.width * biggest.height == $0.height * biggest.width
        }
        let chosen =
            covering.min {
                ($0.width * $0.height, -$0.bitsPerPixel) < ($1.width * $1.height, -$1.bitsPerPixel)
            } ?? biggest
        return try decode(chosen, reader, limits: request.limits).thumbnail(limits: request.limits, options: options)
    }

    /// One entry's image: its PNG decoded as PNG, its bitmap as a BMP with the mask applied.
    static func decode(_ entry: Entry, _ reader: ByteReader, limits: DecodingLimits) throws -> RasterImage {
        let data = reader.bytes(at: entry.offset, count: entry.size)
        let decoded: RasterImage
        if data.starts(with: [0x89, 0x50, 0x4E, 0x47]) {
            decoded = try data.withUnsafeBytes { bytes in
                try ByteReader.withMemory(bytes, limits: limits) { png in
                    // The entry's size is checked from the PNG's header, before any pixel.
                    let info = try PNGDecoder.info(png, limits: limits)
                    guard info.width == entry.width, info.height == entry.height else {
                        throw ImageDecodingError(
                            .corrupt, format: .ico,
                            message:
                                "an image is \(info.width)x\(info.height), its entry says \(entry.width)x\(entry.height)"
                        )
                    }
                    png.seek(to: 0)
                    return try PNGDecoder.decode(png, options: DecodingOptions(limits: limits))
                }
            }
        } else {
            decoded = try decodeBitmap(data, entry: entry, limits: limits)
        }
        guard decoded.width == entry.width, decoded.height == entry.height else {
            throw ImageDecodingError(
                .corrupt, format: .ico,
                message: "an image is \(decoded.width)x\(decoded.height), its entry says \(entry.width)x\(entry.height)"
            )
        }
        return RasterImage(
            validatedWidth: decoded.width, height: decoded.height, bytesPerRow: decoded.bytesPerRow,
            frames: [.init(pixels: decoded.pixels)], alphaMode: decoded.alphaMode, loopCount: 1, orientation: .up,
            iccProfile: decoded.iccProfile, format: .ico, hasAlpha: true)
    }

    /// A bitmap entry: the file header BMP needs put in front, the height halved (the
    /// stored height covers the mask too), then alpha from a 32-bit bitmap's fourth
    /// byte, or from the mask where the bitmap has no alpha of its own.
    private static func decodeBitmap(_ data: [UInt8], entry: Entry, limits: DecodingLimits) throws -> RasterImage {
        let cursor = BinaryCursor(data, littleEndian: true)
        guard let headerSize = cursor.uint32(at: 0), headerSize >= 40, headerSize <= 124,
            let width = cursor.int32(at: 4), let storedHeight = cursor.int32(at: 8), let bits = cursor.uint16(at: 14),
            let colorsUsed = cursor.uint32(at: 32)
        else { throw ImageDecodingError(.corrupt, format: .ico, message: "a bitmap entry has no header") }
        guard width > 0, storedHeight > 0, storedHeight % 2 == 0, colorsUsed <= 256 else {
            throw ImageDecodingError(.corrupt, format: .ico, message: "a bitmap entry's header is not an icon's")
        }
        let height = Int(storedHeight) / 2
        // Checked before any pixel is read: the work is the directory's size for it.
        guard Int(width) == entry.width, height == entry.height else {
            throw ImageDecodingError(
                .corrupt, format: .ico,
                message: "a bitmap is \(width)x\(height), its entry says \(entry.width)x\(entry.height)")
        }
        try limits.check(width: Int(width), height: height, format: .ico)
        let paletteEntries = bits <= 8 ? (colorsUsed == 0 ? 1 << Int(bits) : Int(colorsUsed)) : 0
        let pixelOffset = Int(headerSize) + 4 * paletteEntries
        var file: [UInt8] = [0x42, 0x4D]
        for value in [14 + data.count, 0, 14 + pixelOffset] { file.appendLittleEndian32(value) }
        // The bitmap's header with its height halved (bytes 8 to 12), then the rest as stored.
        file += data[..<8]
        file.appendLittleEndian32(height)
        file += data[12...]
        let bitmap = try file.withUnsafeBytes { bytes in
            try ByteReader.withMemory(bytes, limits: limits) { bmp in
                try BMPDecoder.decode(bmp, options: DecodingOptions(limits: limits))
            }
        }
        let storedRowBytes = (Int(width) * Int(bits) + 31) / 32 * 4
        let maskOffset = pixelOffset + storedRowBytes * height
        var pixels = bitmap.pixels
        let (w, h) = (Int(width), height)
        var hasOwnAlpha = false
        if bits == 32 {
            // The fourth byte is alpha in icons (BMP itself calls it unused).
            for y in 0..<h {
                let row = pixelOffset + (h - 1 - y) * storedRowBytes
                for x in 0..<w where row + x * 4 + 3 < data.count {
                    let alpha = data[row + x * 4 + 3]
                    pixels[(y * w + x) * 4 + 3] = alpha
                    if alpha != 0 { hasOwnAlpha = true }
                }
            }
        }
        if !hasOwnAlpha {
            // The AND mask: bit set = transparent; missing mask rows leave pixels opaque.
            let maskRowBytes = (w + 31) / 32 * 4
            for y in 0..<h {
                let row = maskOffset + (h - 1 - y) * maskRowBytes
                for x in 0..<w {
                    let at = row + x / 8
                    let transparent = at < data.count && data[at] & (0x80 >> UInt8(x % 8)) != 0
                    pixels[(y * w + x) * 4 + 3] = transparent ? 0 : 255
                }
            }
        }
        return RasterImage(
            validatedWidth: w, height: h, bytesPerRow: w * 4, frames: [.init(pixels: pixels)], alphaMode: .straight,
            loopCount: 1, orientation: .up, iccProfile: bitmap.iccProfile, format: .ico, hasAlpha: true)
    }
}
