import ImageLoaderSupport

/// BMP in Swift (no C library needed, and none can overrun a buffer here): 1, 4, 8,
/// 16, 24 and 32 bits a pixel; BI_RGB, BI_BITFIELDS, BI_ALPHABITFIELDS, RLE8 and
/// RLE4; bottom-up and top-down; OS/2 and Windows headers up to V5 with alpha masks
/// and embedded ICC profiles.
enum BMPDecoder: FormatDecoder {
    static let format = ImageFormat.bmp

    /// DIB header sizes that exist: OS/2 1.x and 2.x, Windows 3 and V2 to V5.
    static let knownHeaderSizes: Set<UInt32> = [12, 16, 40, 52, 56, 64, 108, 124]

    static func info(_ reader: ByteReader, limits: DecodingLimits) throws -> ImageInfo {
        try BMPHeader(reader).info
    }

    static func decode(_ reader: ByteReader, options: DecodingOptions) throws -> RasterImage {
        if case .index(let n) = options.frames, n != 0 {
            throw ImageDecodingError(.frameOutOfRange(index: n, count: 1), format: .bmp)
        }
        var header = try BMPHeader(reader)
        try options.limits.check(width: header.width, height: header.height, format: .bmp)
        header.dropAlphaIfUnused(reader)
        let bytesPerRow = header.width * 4
        var hasAlpha = header.hasAlphaChannel
        let pixels: [UInt8]
        if header.compression == .rle8 || header.compression == .rle4 {
            var skipped = false
            pixels = try BMPRunLengthDecoder(header: header, reader: reader).decode(
                allowsTruncatedData: options.allowsTruncatedData, skippedPixels: &skipped)
            hasAlpha = skipped
        } else {
            // Uncompressed rows have a known size: data too short to hold them is truncated,
            // found before the output is allocated (a 62-byte header may claim 400 MB).
            let end = Checked.multiply(header.storedRowBytes, header.height).flatMap {
                Checked.add(header.pixelOffset, $0)
            }
            if !options.allowsTruncatedData, end.map({ reader.size < $0 }) ?? true {
                throw ImageDecodingError(
                    .truncated, format: .bmp,
                    message: "\(reader.size) bytes cannot hold \(header.height) rows of \(header.storedRowBytes) bytes")
            }
            var truncated = false
            pixels = try PixelBuffer.make(count: bytesPerRow * header.height) { base in
                truncated = try readRows(
                    header, reader, into: ImageBufferTarget(base, bytesPerRow: bytesPerRow),
                    allowsTruncatedData: options.allowsTruncatedData)
            }
            hasAlpha = hasAlpha || truncated
        }
        return image(header, pixels: pixels, hasAlpha: hasAlpha)
    }

    private static func image(_ header: BMPHeader, pixels: [UInt8], hasAlpha: Bool) -> RasterImage {
        RasterImage(
            validatedWidth: header.width, height: header.height, bytesPerRow: header.width * 4,
            frames: [.init(pixels: pixels)], alphaMode: .straight, loopCount: 1, orientation: .up,
            iccProfile: header.iccProfile, format: .bmp, hasAlpha: hasAlpha)
    }

    /// Uncompressed and bit-field rows, written top to bottom into `target`, each read
    /// from where the file stores it. Returns whether data was missing (allowed only
    /// with `allowsTruncatedData`; missing rows are then transparent).
    static func readRows(
        _ header: BMPHeader, _ reader: ByteReader, into target: RowTarget, allowsTruncatedData: Bool
    ) throws -> Bool {
        let stride = header.storedRowBytes
        let row = UnsafeMutablePointer<UInt8>.allocate(capacity: stride)
        defer { row.deallocate() }
        let converter = BMPRowConverter(header: header)
        var truncated = false
        for y in 0..<header.height {
            let stored = header.topDown ? y : header.height - 1 - y
            let got = reader.read(at: header.pixelOffset + stored * stride, into: row, count: stride)
            if got < stride {
                guard allowsTruncatedData else {
                    throw ImageDecodingError(
                        .truncated, format: .bmp, message: "pixel data ends at stored row \(stored)")
                }
                target.fillMissing(y, count: 1)
                truncated = true
                continue
            }
            _ = converter.convert(row, into: target.rows(y, count: 1))
            target.commit(y, count: 1)
        }
        return truncated
    }
}

enum BMPCompression: UInt32 {
    case rgb = 0
    case rle8 = 1
    case rle4 = 2
    case bitfields = 3
    case jpeg = 4
    case png = 5
    case alphaBitfields = 6
}

/// A BMP's headers, validated: every size and offset is checked against the input.
struct BMPHeader {
    var width: Int
    var height: Int
    var topDown: Bool
    var bitsPerPixel: Int
    var compression: BMPCompression
    var pixelOffset: Int
    /// BGRX, 4 bytes an entry whatever the header stored.
    var palette: [UInt8]
    var masks: (red: UInt32, green: UInt32, blue: UInt32, alpha: UInt32)
    var iccProfile: [UInt8]?

    var storedRowBytes: Int { (width * bitsPerPixel + 31) / 32 * 4 }
    var hasAlphaChannel: Bool { bitsPerPixel >= 16 && masks.alpha != 0 }

    /// The header's facts (before an unused alpha mask is dropped).
    var info: ImageInfo {
        // Run-length data can skip pixels, which then stay transparent.
        let runLength = compression == .rle8 || compression == .rle4
        return ImageInfo(
            format: .bmp, width: width, height: height, hasAlpha: hasAlphaChannel || runLength,
            iccProfile: iccProfile)
    }

    /// Drops an alpha mask whose values are 0 in every pixel: the writer did not use
    /// the channel, and the picture is shown opaque, as browsers do, rather than not at
    /// all. Reads every row, so call it after the size has passed the limits.
    mutating func dropAlphaIfUnused(_ reader: ByteReader) {
        guard hasAlphaChannel, storedRowBytes > 0 else { return }
        let converter = BMPRowConverter(header: self)
        let row = UnsafeMutablePointer<UInt8>.allocate(capacity: storedRowBytes)
        let output = UnsafeMutablePointer<UInt8>.allocate(capacity: width * 4)
        defer {
            row.deallocate()
            output.deallocate()
        }
        for stored in 0..<height {
            let got = reader.read(at: pixelOffset + stored * storedRowBytes, into: row, count: storedRowBytes)
            guard got == storedRowBytes else { return }  // the decode reports the missing data
            if converter.convert(row, into: output) != 0 { return }
        }
        masks.alpha = 0
    }

    init(_ reader: ByteReader) throws {
        let head = reader.bytes(at: 0, count: 14 + 124 + 16)
        let bytes = BinaryCursor(head, littleEndian: true)
        func fail(_ reason: ImageDecodingError.Reason = .corrupt, _ message: String) -> ImageDecodingError {
            ImageDecodingError(reason, format: .bmp, message: message)
        }
        guard let offset = bytes.uint32(at: 10), let headerSize = bytes.uint32(at: 14),
            BMPDecoder.knownHeaderSizes.contains(headerSize)
        else { throw fail(.truncated, "incomplete headers") }
        guard head.count >= 14 + Int(headerSize) else { throw fail(.truncated, "incomplete headers") }
        pixelOffset = Int(offset)

        var paletteEntryBytes = 4
        var colorsUsed = 0
        if headerSize == 12 {
            guard let w = bytes.uint16(at: 18), let h = bytes.uint16(at: 20), let bits = bytes.uint16(at: 24) else {
                throw fail(.truncated, "incomplete headers")
            }
            width = Int(w)
            height = Int(h)
            topDown = false
            bitsPerPixel = Int(bits)
            compression = .rgb
            paletteEntryBytes = 3
        } else {
            guard let w = bytes.int32(at: 18), let h = bytes.int32(at: 22), let bits = bytes.uint16(at: 28) else {
                throw fail(.truncated, "incomplete headers")
            }
            width = Int(w)
            let rawHeight = Int(h)  // Int32.min's magnitude fits in an Int
            topDown = rawHeight < 0
            height = abs(rawHeight)
            bitsPerPixel = Int(bits)
            let rawCompression = headerSize >= 20 ? bytes.uint32(at: 30) ?? 0 : 0
            guard let known = BMPCompression(rawValue: rawCompression) else {
                throw fail(.unsupported, "compression \(rawCompression)")
            }
            compression = known
            colorsUsed = headerSize >= 36 ? Int(bytes.uint32(at: 46) ?? 0) : 0
        }
        guard width > 0, height > 0 else {
            throw ImageDecodingError(.tooManyPixels(width: width, height: height, limit: 0), format: .bmp)
        }
        guard [1, 4, 8, 16, 24, 32].contains(bitsPerPixel) else {
            throw fail(.unsupported, "\(bitsPerPixel) bits a pixel")
        }
        switch compression {
        case .jpeg, .png: throw fail(.unsupported, "embedded JPEG or PNG")
        case .rle8 where bitsPerPixel != 8, .rle4 where bitsPerPixel != 4:
            throw fail(.corrupt, "run-length compression with \(bitsPerPixel) bits a pixel")
        case .bitfields, .alphaBitfields:
            guard bitsPerPixel == 16 || bitsPerPixel == 32 else {
                throw fail(.corrupt, "bit fields with \(bitsPerPixel) bits a pixel")
            }
        default: break
        }
        if compression == .rle8 || compression == .rle4 {
            guard !topDown else { throw fail(.corrupt, "top-down run-length data") }
        }

        // Masks: in the header from V2 on, otherwise right after a 40-byte header.
        masks = (0, 0, 0, 0)
        if compression == .bitfields || compression == .alphaBitfields {
            let maskOffset = 14 + 40
            guard let r = bytes.uint32(at: maskOffset), let g = bytes.uint32(at: maskOffset + 4),
                let b = bytes.uint32(at: maskOffset + 8)
            else { throw fail(.truncated, "incomplete bit masks") }
            let hasAlphaMask = headerSize >= 56 || compression == .alphaBitfields
            masks = (r, g, b, hasAlphaMask ? bytes.uint32(at: maskOffset + 12) ?? 0 : 0)
        } else if bitsPerPixel == 16 {
            masks = (0x7C00, 0x03E0, 0x001F, 0)
        } else if bitsPerPixel >= 24 {
            masks = (0x00FF_0000, 0x0000_FF00, 0x0000_00FF, 0)
        }

        // The palette follows the header (and the masks, when a 40-byte header has them).
        palette = []
        if bitsPerPixel <= 8 {
            var paletteStart = 14 + Int(headerSize)
            if headerSize == 40 && (compression == .bitfields || compression == .alphaBitfields) { paletteStart += 12 }
            let maximum = 1 << bitsPerPixel
            let wanted = colorsUsed == 0 || colorsUsed > maximum ? maximum : colorsUsed
            // Never read the palette past the pixels or the file.
            let room = max(0, min(pixelOffset, reader.size) - paletteStart) / paletteEntryBytes
            let count = min(wanted, room)
            let stored = reader.bytes(at: paletteStart, count: count * paletteEntryBytes)
            palette = [UInt8](repeating: 0, count: maximum * 4)
            for i in 0..<count {
                palette[i * 4] = stored[i * paletteEntryBytes]
                palette[i * 4 + 1] = stored[i * paletteEntryBytes + 1]
                palette[i * 4 + 2] = stored[i * paletteEntryBytes + 2]
            }
        }

        // V5: an embedded profile, its offset counted from the start of the DIB header.
        if headerSize == 124, bytes.uint32(at: 14 + 56) == 0x4D42_4544,  // 'MBED'
            let profileOffset = bytes.uint32(at: 14 + 112), let profileSize = bytes.uint32(at: 14 + 116),
            profileSize > 0, profileSize <= 4 << 20
        {
            let profile = reader.bytes(at: 14 + Int(profileOffset), count: Int(profileSize))
            iccProfile = profile.count == Int(profileSize) ? profile : nil
        }
    }
}

/// Turns one stored row into RGBA.
struct BMPRowConverter {
    /// One channel of a bit-field pixel, widened to 8 bits by repeating its high bits
    /// (5 bits `abcde` become `abcdeabc`), as browsers and ImageMagick do.
    struct Channel {
        let mask: UInt32
        let shift: UInt32
        let bits: Int
        /// 8-bit values for every channel value, when the channel has 8 bits or fewer.
        let widened: [UInt8]

        init(_ mask: UInt32) {
            self.mask = mask
            shift = mask == 0 ? 0 : UInt32(mask.trailingZeroBitCount)
            bits = mask == 0 ? 0 : (32 - (mask >> shift).leadingZeroBitCount)
            let bits = self.bits
            widened =
                bits == 0 || bits > 8
                ? []
                : (0..<(1 << bits)).map { value in
                    var result = 0
                    var filled = 0
                    while filled < 8 {
                        result = result << bits | value
                        filled += bits
                    }
                    return UInt8(truncatingIfNeeded: result >> (filled - 8))
                }
        }

        var isPresent: Bool { bits > 0 }

        @inline(__always)
        func value(_ pixel: UInt32) -> UInt8 {
            let v = (pixel & mask) >> shift
            if bits > 8 { return UInt8(truncatingIfNeeded: v >> UInt32(bits - 8)) }
            return bits == 0 ? 0 : widened[Int(v)]
        }
    }

    let header: BMPHeader
    let red: Channel
    let green: Channel
    let blue: Channel
    let alpha: Channel

    init(header: BMPHeader) {
        self.header = header
        red = Channel(header.masks.red)
        green = Channel(header.masks.green)
        blue = Channel(header.masks.blue)
        alpha = Channel(header.masks.alpha)
    }

    /// Converts a row; returns the OR of its alpha values (0 when there is no alpha channel).
    func convert(_ row: UnsafePointer<UInt8>, into output: UnsafeMutablePointer<UInt8>) -> UInt8 {
        let width = header.width
        var out = output
        var alphaSeen: UInt8 = 0
        switch header.bitsPerPixel {
        case 1, 4, 8:
            let bits = header.bitsPerPixel
            let mask = (1 << bits) - 1
            header.palette.withUnsafeBufferPointer { palette in
                for x in 0..<width {
                    let bit = x * bits
                    let index = (Int(row[bit >> 3]) >> (8 - bits - (bit & 7))) & mask
                    out[0] = palette[index * 4 + 2]
                    out[1] = palette[index * 4 + 1]
                    out[2] = palette[index * 4]
                    out[3] = 255
                    out += 4
                }
            }
        case 24:
            var p = row
            for _ in 0..<width {
                out[0] = p[2]
                out[1] = p[1]
                out[2] = p[0]
                out[3] = 255
                out += 4
                p += 3
            }
        default:
            let bytes = header.bitsPerPixel / 8
            let hasAlpha = alpha.isPresent
            var p = row
            for _ in 0..<width {
                let pixel =
                    bytes == 2
                    ? UInt32(p[0]) | UInt32(p[1]) << 8
                    : UInt32(p[0]) | UInt32(p[1]) << 8 | UInt32(p[2]) << 16 | UInt32(p[3]) << 24
                out[0] = red.value(pixel)
                out[1] = green.value(pixel)
                out[2] = blue.value(pixel)
                let a = hasAlpha ? alpha.value(pixel) : 255
                out[3] = a
                alphaSeen |= a
                out += 4
                p += bytes
            }
        }
        return alphaSeen
    }
}

/// RLE8 and RLE4: runs and literal stretches of palette indices, with end-of-line,
/// end-of-bitmap and delta escapes. Pixels the data skips stay transparent.
struct BMPRunLengthDecoder {
    let header: BMPHeader
    let reader: ByteReader

    func decode(allowsTruncatedData: Bool, skippedPixels: inout Bool) throws -> [UInt8] {
        let (width, height) = (header.width, header.height)
        let available = max(0, reader.size - header.pixelOffset)
        let data = reader.bytes(at: header.pixelOffset, count: available)
        var pixels = [UInt8](repeating: 0, count: width * height * 4)
        var written = [Bool](repeating: false, count: width * height)
        let four = header.compression == .rle4
        var x = 0
        var row = 0  // stored row, counted from the bottom
        var i = 0
        var finished = false

        func put(_ index: Int) {
            guard x < width, row < height else { return }
            let y = height - 1 - row
            let o = (y * width + x) * 4
            let p = index * 4
            pixels[o] = header.palette[p + 2]
            pixels[o + 1] = header.palette[p + 1]
            pixels[o + 2] = header.palette[p]
            pixels[o + 3] = 255
            written[y * width + x] = true
            x += 1
        }

        decoding: while i + 1 < data.count {
            let count = Int(data[i])
            let value = Int(data[i + 1])
            i += 2
            if count > 0 {
                for n in 0..<count { put(four ? (n % 2 == 0 ? value >> 4 : value & 0x0F) : value) }
                continue
            }
            switch value {
            case 0:  // end of line
                x = 0
                row += 1
            case 1:  // end of bitmap
                finished = true
                break decoding
            case 2:  // delta
                guard i + 1 < data.count else { break decoding }
                x += Int(data[i])
                row += Int(data[i + 1])
                i += 2
            default:  // a literal stretch of `value` indices, padded to 16 bits
                let bytes = four ? (value + 1) / 2 : value
                guard i + bytes <= data.count else { break decoding }
                for n in 0..<value {
                    put(
                        four ? (n % 2 == 0 ? Int(data[i + n / 2]) >> 4 : Int(data[i + n / 2]) & 0x0F) : Int(data[i + n])
                    )
                }
                i += (bytes + 1) & ~1
            }
            if row >= height {
                finished = true
                break
            }
        }
        if !finished && !allowsTruncatedData {
            throw ImageDecodingError(
                .truncated, format: .bmp, message: "run-length data ends before the end of the bitmap")
        }
        skippedPixels = written.contains(false)
        return pixels
    }
}
