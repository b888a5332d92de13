/// Why bytes could not be decoded: the reason, the format when it was known, and
/// the C library's own message when it gave one.
///
/// ```swift
/// do {
///     _ = try ImageDecoder().decode(.bytes(bytes))
/// } catch let error {
///     if case .truncated = error.reason { ... }
///     print(error)        // one line: "PNG data is truncated (libpng: unexpected end of data)"
/// }
/// ```
public struct ImageDecodingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    public enum Reason: Sendable, Hashable {
        /// There were no bytes.
        case empty
        /// The bytes do not start with the signature of a supported format.
        case unrecognizedFormat
        /// The input is larger than ``DecodingLimits/maxInputBytes``.
        case inputTooLarge(bytes: Int, limit: Int)
        /// A frame (or an animation's canvas) has more pixels than
        /// ``DecodingLimits/maxPixelsPerFrame``, or a dimension that is zero or negative.
        case tooManyPixels(width: Int, height: Int, limit: Int)
        /// An animation has more frames than ``DecodingLimits/maxFrames``.
        case tooManyFrames(limit: Int)
        /// A progressive JPEG has more scans than ``DecodingLimits/maxProgressiveScans``.
        case tooManyScans(limit: Int)
        /// All frames together would take more than ``DecodingLimits/maxTotalBytes``.
        case tooManyBytes(bytes: Int, limit: Int)
        /// The decoder would need more than ``DecodingLimits/maxWorkingBytes`` of its own
        /// memory (coefficients, row, strip or tile buffers, canvases).
        case tooMuchWorkingMemory(bytes: Int, limit: Int)
        /// Decoding every frame would touch more than ``DecodingLimits/maxTotalPixels`` pixels.
        case tooMuchWork(pixels: Int, limit: Int)
        /// More metadata blocks (GIF extensions, WebP chunks) than
        /// ``DecodingLimits/maxMetadataBlocks``, besides one per frame.
        case tooManyMetadataBlocks(limit: Int)
        /// A thumbnail box with a side that is not in `1...ThumbnailOptions.maxSide`,
        /// or more pixels than ``DecodingLimits/maxPixelsPerFrame``.
        case invalidThumbnailSize(width: Int, height: Int)
        /// A crop rectangle that is empty or reaches outside the image.
        case invalidCrop(x: Int, y: Int, width: Int, height: Int)
        /// The data ends before the image does.
        case truncated
        /// The data breaks the format's rules.
        case corrupt
        /// Valid, but uses a feature this library does not decode.
        case unsupported
        /// A frame (or TIFF page) was asked for that the image does not have.
        case frameOutOfRange(index: Int, count: Int)
        /// The file could not be opened or read.
        case unreadable
    }

    /// Why the decode failed.
    public let reason: Reason
    /// The format, when the signature was recognised.
    public let format: ImageFormat?
    /// Details: the C library's message, or what exactly was wrong.
    public let message: String?

    /// An error (a custom ``ImageDecoding`` throws these).
    public init(_ reason: Reason, format: ImageFormat? = nil, message: String? = nil) {
        self.reason = reason
        self.format = format
        self.message = message
    }

    /// One line, suitable for a log or a command's error output.
    public var description: String {
        let name = format.map(\.displayName) ?? "image"
        let text: String
        switch reason {
        case .empty: text = "no image data (0 bytes)"
        case .unrecognizedFormat:
            text = "not a supported image format (\(ImageFormat.list(ImageFormat.allCases.map(\.displayName))))"
        case .inputTooLarge(let bytes, let limit): text = "input of \(bytes) bytes exceeds the limit of \(limit) bytes"
        case .tooManyPixels(let width, let height, let limit):
            text =
                width <= 0 || height <= 0
                ? "\(name) has an invalid size \(width)x\(height)"
                : "\(name) is \(width)x\(height), more than the limit of \(limit) pixels"
        case .tooManyFrames(let limit): text = "\(name) has more than \(limit) frames"
        case .tooManyScans(let limit): text = "\(name) has more than \(limit) progressive scans"
        case .tooManyBytes(let bytes, let limit):
            text = "\(name) frames need \(bytes) bytes decoded, more than the limit of \(limit)"
        case .tooMuchWorkingMemory(let bytes, let limit):
            text = "\(name) needs \(bytes) bytes of working memory to decode, more than the limit of \(limit)"
        case .tooMuchWork(let pixels, let limit):
            text = "\(name) frames hold \(pixels) pixels to decode, more than the limit of \(limit)"
        case .tooManyMetadataBlocks(let limit): text = "\(name) has more than \(limit) metadata blocks"
        case .invalidThumbnailSize(let width, let height):
            let sides = 1...ThumbnailOptions.maxSide
            text =
                sides.contains(width) && sides.contains(height)
                ? "a thumbnail of \(width)x\(height) has more pixels than the decoding limits allow"
                : "a thumbnail of \(width)x\(height) is not possible (each side 1...\(ThumbnailOptions.maxSide))"
        case .invalidCrop(let x, let y, let width, let height):
            text = "a \(width)x\(height) crop at (\(x), \(y)) does not lie inside the image"
        case .truncated: text = "\(name) data is truncated"
        case .corrupt: text = "\(name) data is corrupt"
        case .unsupported: text = "\(name) uses an unsupported feature"
        case .frameOutOfRange(let index, let count): text = "\(name) has no frame \(index) (it has \(count))"
        case .unreadable: text = "cannot read the input"
        }
        guard let message, !message.isEmpty else { return text }
        return "\(text) (\(message.replacingNewlines()))"
    }
}

extension String {
    /// The text on one line: newlines become spaces.
    func replacingNewlines() -> String {
        String(map { $0.isNewline ? " " : $0 })
    }
}
