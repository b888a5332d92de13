import CGIF
import ImageLoaderSupport

/// GIF through giflib's record-level API, so every size is checked before anything
/// is allocated. Frames are composited onto the canvas as browsers show them:
/// disposal none, background (cleared to transparent) and previous; transparency;
/// interlacing; local colour tables; frames that overrun the canvas are clipped.
enum GIFDecoder: FormatDecoder {
    static let format = ImageFormat.gif

    static func info(_ reader: ByteReader, limits: DecodingLimits) throws -> ImageInfo {
        let file = try GIFFile(reader, limits: limits)
        var frames = 0
        var loopCount = 1
        var transparent = false
        var coversCanvas = true
        while true {
            switch try file.nextRecord() {
            case .image(let descriptor):
                frames += 1
                if frames > limits.maxFrames {
                    throw ImageDecodingError(.tooManyFrames(limit: limits.maxFrames), format: .gif)
                }
                if frames == 1 { coversCanvas = descriptor.covers(width: file.width, height: file.height) }
                try file.skipImageData()
            case .graphicsControl(let control):
                transparent = transparent || control.transparentIndex != nil
            case .loopCount(let count):
                loopCount = count
            case .end:
                return ImageInfo(
                    format: .gif, width: file.width, height: file.height, frameCount: frames,
                    hasAlpha: transparent || !coversCanvas, loopCount: loopCount)
            }
        }
    }

    static func decode(_ reader: ByteReader, options: DecodingOptions) throws -> RasterImage {
        let file = try GIFFile(reader, limits: options.limits)
        let (width, height) = (file.width, file.height)
        let limits = options.limits
        try limits.check(width: width, height: height, format: .gif)
        let frameBytes = width * height * 4
        var canvas = GIFCanvas(width: width, height: height)
        var frames: [RasterImage.Frame] = []
        var frameIndex = 0
        var loopCount = 1
        var control = GIFFile.GraphicsControl()
        var hasAlpha = false
        let lastNeeded = options.frames.lastNeededIndex
        // Pixels decoded so far, each frame counted by its own rectangle, clipped or not.
        var decodedPixels = 0

        decoding: while true {
            let record: GIFFile.Record
            do {
                record = try file.nextRecord()
            } catch let error as ImageDecodingError
                where options.allowsTruncatedData && error.reason == .truncated && !frames.isEmpty
            {
                break decoding
            }
            switch record {
            case .graphicsControl(let next):
                control = next
            case .loopCount(let count):
                loopCount = count
            case .image(let descriptor):
                if frameIndex >= limits.maxFrames {
                    throw ImageDecodingError(.tooManyFrames(limit: limits.maxFrames), format: .gif)
                }
                if descriptor.width > 0 && descriptor.height > 0 {
                    // Decoding work follows the frame's own size, clipped or not.
                    try limits.check(width: descriptor.width, height: descriptor.height, format: .gif)
                    decodedPixels = Checked.saturatingAdd(decodedPixels, descriptor.width * descriptor.height)
                    try limits.checkTotal(pixels: decodedPixels, format: .gif)
                }
                if options.frames.returns(frameIndex) {
                    try limits.check(frames: frames.count + 1, frameBytes: frameBytes, format: .gif)
                }
                if frameIndex == 0 && !descriptor.covers(width: width, height: height) { hasAlpha = true }
                if control.transparentIndex != nil || control.disposal == DISPOSE_BACKGROUND { hasAlpha = true }
                canvas.prepare(for: descriptor, disposal: control.disposal)
                do {
                    try file.readImage(descriptor, transparentIndex: control.transparentIndex, into: &canvas)
                } catch let error as ImageDecodingError where options.allowsTruncatedData && error.reason == .truncated
                {
                    // Rows that did not arrive keep what was under them (transparent, on the first frame).
                    frames.append(.init(pixels: canvas.pixels, duration: control.delay))
                    hasAlpha = true
                    break decoding
                }
                if options.frames.returns(frameIndex) {
                    frames.append(.init(pixels: canvas.pixels, duration: control.delay))
                }
                frameIndex += 1
                control = GIFFile.GraphicsControl()
                if let lastNeeded, frameIndex > lastNeeded { break decoding }
            case .end:
                break decoding
            }
        }
        if frames.isEmpty {
            if case .index(let n) = options.frames, frameIndex > 0 {
                throw ImageDecodingError(.frameOutOfRange(index: n, count: frameIndex), format: .gif)
            }
            throw ImageDecodingError(.corrupt, format: .gif, message: "no image in the file")
        }
        return RasterImage(
            validatedWidth: width, height: height, bytesPerRow: width * 4, frames: frames, alphaMode: .straight,
            loopCount: loopCount, orientation: .up, iccProfile: nil, format: .gif, hasAlpha: hasAlpha)
    }
}

/// The canvas an animation is drawn on, with the disposal of the previous frame
/// still to apply before the next one is drawn.
struct GIFCanvas {
    let width: Int
    let height: Int
    private(set) var pixels: [UInt8]
    /// What the last frame asked to be done with its area once it has been shown.
    private var pendingDisposal: (disposal: Int32, rect: GIFFile.Rect, saved: [UInt8]?)?

    init(width: Int, height: Int) {
        self.width = width
        self.height = height
        pixels = [UInt8](repeating: 0, count: width * height * 4)
    }

    /// Applies the previous frame's disposal, then remembers this frame's, saving
    /// the area it will cover when its disposal is "restore previous".
    mutating func prepare(for descriptor: GIFFile.Rect, disposal: Int32) {
        if let pending = pendingDisposal {
            let area = pending.rect.clipped(width: width, height: height)
            if pending.disposal == DISPOSE_BACKGROUND {
                fill(area, with: nil)
            } else if pending.disposal == DISPOSE_PREVIOUS, let saved = pending.saved {
                fill(area, with: saved)
            }
        }
        let area = descriptor.clipped(width: width, height: height)
        pendingDisposal = (disposal, descriptor, disposal == DISPOSE_PREVIOUS ? copy(area) : nil)
    }

    private func copy(_ area: GIFFile.Rect) -> [UInt8] {
        var saved: [UInt8] = []
        saved.reserveCapacity(area.width * area.height * 4)
        for y in area.top..<area.top + area.height {
            let start = (y * width + area.left) * 4
            saved.append(contentsOf: pixels[start..<start + area.width * 4])
        }
        return saved
    }

    /// Clears `area` to transparent, or puts back pixels saved by ``copy(_:)``.
    private mutating func fill(_ area: GIFFile.Rect, with saved: [UInt8]?) {
        let rowBytes = area.width * 4
        guard rowBytes > 0 else { return }
        pixels.withUnsafeMutableBufferPointer { canvas in
            for row in 0..<area.height {
                let destination = canvas.baseAddress! + ((area.top + row) * width + area.left) * 4
                if let saved {
                    saved.withUnsafeBufferPointer {
                        destination.update(from: $0.baseAddress! + row * rowBytes, count: rowBytes)
                    }
                } else {
                    destination.update(repeating: 0, count: rowBytes)
                }
            }
        }
    }

    /// Draws one row of palette indices at canvas row `y` from column `left`,
    /// skipping the transparent index and anything outside the canvas.
    mutating func draw(
        row indices: UnsafeBufferPointer<UInt8>, y: Int, left: Int, palette: UnsafeBufferPointer<UInt8>,
        transparentIndex: Int?
    ) {
        guard y >= 0, y < height else { return }
        let start = max(0, -left)
        let end = min(indices.count, width - left)
        guard start < end else { return }
        let paletteCount = palette.count / 3
        let transparent = transparentIndex ?? -1
        pixels.withUnsafeMutableBufferPointer { canvas in
            var p = canvas.baseAddress! + (y * width + left + start) * 4
            for x in start..<end {
                let index = Int(indices[x])
                if index != transparent {
                    if index < paletteCount {
                        p[0] = palette[index * 3]
                        p[1] = palette[index * 3 + 1]
                        p[2] = palette[index * 3 + 2]
                    } else {
                        // An index past the colour table: black, as browsers show it.
                        p[0] = 0
                        p[1] = 0
                        p[2] = 0
                    }
                    p[3] = 255
                }
                p += 4
            }
        }
    }
}

/// A giflib decoding handle read record by record.
final class GIFFile {
    struct Rect {
        var left: Int
        var top: Int
        var width: Int
        var height: Int

        func covers(width canvasWidth: Int, height canvasHeight: Int) -> Bool {
            left <= 0 && top <= 0 && left + width >= canvasWidth && top + height >= canvasHeight
        }

        /// The part of the rectangle inside a canvas of this size (possibly empty).
        func clipped(width canvasWidth: Int, height canvasHeight: Int) -> Rect {
            let x0 = min(max(left, 0), canvasWidth)
            let y0 = min(max(top, 0), canvasHeight)
            let x1 = min(max(left + width, x0), canvasWidth)
            let y1 = min(max(top + height, y0), canvasHeight)
            return Rect(left: x0, top: y0, width: x1 - x0, height: y1 - y0)
        }
    }

    struct GraphicsControl {
        var disposal: Int32 = DISPOSAL_UNSPECIFIED
        var delay: Duration = .zero
        var transparentIndex: Int?
    }

    enum Record {
        case image(Rect)
        case graphicsControl(GraphicsControl)
        case loopCount(Int)
        case end
    }

    private let gif: UnsafeMutablePointer<GifFileType>
    private let reader: ByteReader
    private let limits: DecodingLimits
    let width: Int
    let height: Int
    /// Extension blocks read so far, and images: every image may have one (its graphics
    /// control) without counting against ``DecodingLimits/maxMetadataBlocks``.
    private var extensions = 0
    private var images = 0

    init(_ reader: ByteReader, limits: DecodingLimits) throws {
        self.reader = reader
        self.limits = limits
        var error: Int32 = 0
        let input: InputFunc = { gif, buffer, count in
            Int32(ByteReader.from(gif!.pointee.UserData).read(into: buffer!, count: Int(count)))
        }
        guard let gif = DGifOpen(reader.context, input, &error) else {
            throw GIFFile.failure(code: error, reader: reader)
        }
        self.gif = gif
        width = Int(gif.pointee.SWidth)
        height = Int(gif.pointee.SHeight)
    }

    deinit {
        var error: Int32 = 0
        DGifCloseFile(gif, &error)
    }

    private static func failure(code: Int32, reader: ByteReader) -> ImageDecodingError {
        let message = GifErrorString(code).map { String(cString: $0) } ?? "error \(code)"
        let truncated = reader.reachedEnd || code == D_GIF_ERR_READ_FAILED || code == D_GIF_ERR_EOF_TOO_SOON
        return ImageDecodingError(truncated ? .truncated : .corrupt, format: .gif, message: "giflib: \(message)")
    }

    private func check(_ status: Int32) throws {
        if status == GIF_ERROR { throw GIFFile.failure(code: gif.pointee.Error, reader: reader) }
    }

    /// The next record that matters; other extensions are read and dropped.
    func nextRecord() throws -> Record {
        while true {
            var type = UNDEFINED_RECORD_TYPE
            try check(DGifGetRecordType(gif, &type))
            switch type {
            case IMAGE_DESC_RECORD_TYPE:
                images += 1
                try check(DGifGetImageDesc(gif))
                let image = gif.pointee.Image
                return .image(
                    Rect(left: Int(image.Left), top: Int(image.Top), width: Int(image.Width), height: Int(image.Height))
                )
            case EXTENSION_RECORD_TYPE:
                extensions += 1
                try limits.checkMetadata(blocks: extensions - min(extensions, images + 1), format: .gif)
                if let record = try readExtension() { return record }
            case TERMINATE_RECORD_TYPE:
                return .end
            default:
                throw ImageDecodingError(.corrupt, format: .gif, message: "giflib: unknown record")
            }
        }
    }

    private func readExtension() throws -> Record? {
        var code: Int32 = 0
        var block: UnsafeMutablePointer<GifByteType>? = nil
        try check(DGifGetExtension(gif, &code, &block))
        var record: Record?
        if code == GRAPHICS_EXT_FUNC_CODE, let block, block[0] >= 4 {
            var gcb = GraphicsControlBlock()
            if DGifExtensionToGCB(Int(block[0]), block + 1, &gcb) == GIF_OK {
                record = .graphicsControl(
                    GraphicsControl(
                        disposal: gcb.DisposalMode, delay: .milliseconds(Int(gcb.DelayTime) * 10),
                        transparentIndex: gcb.TransparentColor == NO_TRANSPARENT_COLOR ? nil : Int(gcb.TransparentColor)
                    ))
            }
        }
        let isNetscape =
            code == APPLICATION_EXT_FUNC_CODE
            && block.map { block in
                block[0] == 11 && Array(UnsafeBufferPointer(start: block + 1, count: 11)) == Array("NETSCAPE2.0".utf8)
            } ?? false
        guard block != nil else { return record }
        if isNetscape {
            // The NETSCAPE2.0 looping sub-block: 1, then the count (little-endian).
            try check(DGifGetExtensionNext(gif, &block))
            if let block, block[0] >= 3, block[1] == 1 {
                record = .loopCount(Int(block[2]) | Int(block[3]) << 8)
            }
            if block == nil { return record }
        }
        // The rest is not needed: skipped in place, not handed over a sub-block at a time.
        try skipSubBlocks()
        return record
    }

    /// Moves past the data sub-blocks that follow (giflib reads nothing ahead, so the
    /// input is where it expects the next record afterwards).
    private func skipSubBlocks() throws {
        guard reader.skipSubBlocks() else {
            throw ImageDecodingError(.truncated, format: .gif, message: "data ends inside a block")
        }
    }

    /// Skips the compressed pixels of the image just announced, without decoding them.
    func skipImageData() throws {
        try skipSubBlocks()
    }

    /// Decodes the image just announced and draws it onto `canvas`.
    func readImage(_ rect: Rect, transparentIndex: Int?, into canvas: inout GIFCanvas) throws {
        let image = gif.pointee.Image
        guard let colorMap = image.ColorMap ?? gif.pointee.SColorMap, let colors = colorMap.pointee.Colors else {
            throw ImageDecodingError(.corrupt, format: .gif, message: "no colour table")
        }
        let colorCount = Int(max(0, colorMap.pointee.ColorCount))
        // GifColorType is three bytes: R, G, B.
        let palette = UnsafeRawPointer(colors).assumingMemoryBound(to: UInt8.self)
        let paletteBuffer = UnsafeBufferPointer(start: palette, count: colorCount * 3)
        guard rect.width > 0, rect.height > 0 else {
            try skipImageData()
            return
        }
        var line = [UInt8](repeating: 0, count: rect.width)
        let rows: [Int] =
            image.Interlace
            ? [(0, 8), (4, 8), (2, 4), (1, 2)].flatMap { start, step in
                Array(stride(from: start, to: rect.height, by: step))
            }
            : Array(0..<rect.height)
        for row in rows {
            try line.withUnsafeMutableBufferPointer { line in
                try check(DGifGetLine(gif, line.baseAddress!, Int32(line.count)))
            }
            line.withUnsafeBufferPointer { line in
                canvas.draw(
                    row: line, y: rect.top + row, left: rect.left, palette: paletteBuffer,
                    transparentIndex: transparentIndex)
            }
        }
    }
}
