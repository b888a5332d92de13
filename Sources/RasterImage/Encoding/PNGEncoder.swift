import CPNG

/// Why an image could not be encoded.
public struct ImageEncodingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Why the encode failed.
    public enum Reason: Sendable, Hashable {
        /// A parameter is out of its range (quality, compression level, ...).
        case invalidParameter
        /// The image cannot be stored in the format (too large, ...).
        case unsupportedImage
        /// The C library failed.
        case failed
    }

    /// Why the encode failed.
    public let reason: Reason
    /// The format being written.
    public let format: ImageFormat
    /// The library's message.
    public let message: String

    /// An error for `format`.
    public init(_ reason: Reason, format: ImageFormat, message: String) {
        self.reason = reason
        self.format = format
        self.message = message
    }

    /// Throws unless `image` has frame `frame`.
    static func checkFrame(_ frame: Int, of image: RasterImage, format: ImageFormat) throws(ImageEncodingError) {
        guard image.frames.indices.contains(frame) else {
            throw ImageEncodingError(.invalidParameter, format: format, message: "frame \(frame) does not exist")
        }
    }

    /// The format, the reason and the library's message.
    public var description: String {
        "cannot encode \(format.displayName): \(message.replacingNewlines())"
    }
}

/// Writes PNG: 8-bit RGBA, or RGB when the image is opaque.
///
/// Images of up to 32 MiB of image data are filtered with SIMD and compressed in one
/// piece: literals only under a Huffman code of their own (photographs), zlib's
/// run-length strategy, or libdeflate (drawings and text), whichever does best on a band
/// of the image. Larger ones stream through libpng and zlib, a row at a time.
///
/// ```swift
/// let png = try PNGEncoder(compressionLevel: 6).encode(image)
/// ```
public struct PNGEncoder: Sendable, Hashable {
    /// The compression level, 0 (stored) to 9 (smallest), as in zlib; 6 balances size and time.
    public var compressionLevel: Int
    /// Always write the alpha channel, even for an opaque image.
    public var alwaysIncludeAlpha: Bool
    /// Embed the image's ICC profile (iCCP) when it has one.
    public var includeICCProfile: Bool
    /// An EXIF block (a TIFF structure) written as an eXIf chunk; `nil` (the default): none.
    public var exif: [UInt8]?
    /// Write grey (colour type 0, or 4 with alpha) when every pixel of the frame is grey
    /// (red, green and blue equal), as a grey source's results are kept: a third of the
    /// data, the same look. Off by default.
    public var grayscale = false

    /// A PNG encoder: zlib level 0 to 9; alpha written only when the image has it unless
    /// `alwaysIncludeAlpha`; the ICC profile embedded unless `includeICCProfile` is false.
    public init(compressionLevel: Int = 6, alwaysIncludeAlpha: Bool = false, includeICCProfile: Bool = true) {
        self.compressionLevel = compressionLevel
        self.alwaysIncludeAlpha = alwaysIncludeAlpha
        self.includeICCProfile = includeICCProfile
    }

    /// Encodes frame `frame` of `image`; premultiplied images are converted to straight alpha first.
    public func encode(_ image: RasterImage, frame: Int = 0) throws(ImageEncodingError) -> [UInt8] {
        let png = try encodePixels(image, frame: frame)
        guard let exif, !exif.isEmpty, exif.count <= 1 << 24 else { return png }
        return PNGWriter.inserting(chunk: "eXIf", exif, into: png)
    }

    private func encodePixels(_ image: RasterImage, frame: Int) throws(ImageEncodingError) -> [UInt8] {
        guard (0...9).contains(compressionLevel) else {
            throw ImageEncodingError(
                .invalidParameter, format: .png, message: "compression level \(compressionLevel) is not in 0...9")
        }
        try ImageEncodingError.checkFrame(frame, of: image, format: .png)
        let straight = image.straightAlpha()
        let dropAlpha = !alwaysIncludeAlpha && !straight.hasAlpha
        let icc = includeICCProfile ? straight.iccProfile ?? [] : []
        let layout: PNGWriter.Layout =
            grayscale && straight.isGray(frame: frame)
            ? (dropAlpha ? .grey : .greyAlpha) : (dropAlpha ? .rgb : .rgba)
        let written = straight.frames[frame].pixels.withUnsafeBufferPointer {
            PNGWriter.write(
                pixels: $0, width: straight.width, height: straight.height, bytesPerRow: straight.bytesPerRow,
                layout: layout, level: compressionLevel, iccProfile: icc)
        }
        if let written { return written }
        var output = PNGOutput()
        var message = [CChar](repeating: 0, count: 200)
        let status = straight.frames[frame].pixels.withUnsafeBufferPointer { pixels in
            icc.withUnsafeBufferPointer { icc in
                withUnsafeMutablePointer(to: &output) { output in
                    cpng_write_rgba8(
                        { context, bytes, count in
                            let output = context!.assumingMemoryBound(to: PNGOutput.self)
                            output.pointee.bytes.append(contentsOf: UnsafeBufferPointer(start: bytes, count: count))
                            return 0
                        }, output, pixels.baseAddress, UInt32(straight.width), UInt32(straight.height),
                        straight.bytesPerRow, dropAlpha ? 1 : 0, Int32(compressionLevel), icc.baseAddress,
                        UInt32(icc.count), &message, message.count)
                }
            }
        }
        guard status == 0 else {
            throw ImageEncodingError(.failed, format: .png, message: "libpng: \(CString.decode(message))")
        }
        return output.bytes
    }
}

private struct PNGOutput {
    var bytes: [UInt8] = []
}
