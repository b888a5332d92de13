import Dispatch
import ImageLoaderSupport

extension RasterImage {
    /// This image resized to exactly `width` x `height` (every frame), filtered in
    /// premultiplied alpha: box pre-reduction by whole factors, then `kernel`.
    /// Large outputs are computed in bands of rows on every core.
    ///
    /// ```swift
    /// let half = image.resized(width: image.width / 2, height: image.height / 2)
    /// ```
    /// A size below 1 is taken as 1.
    public func resized(
        width: Int, height: Int, kernel: ResamplingKernel = .lanczos3, linearLight: Bool = false
    ) -> RasterImage {
        let (width, height) = (max(1, width), max(1, height))
        if width == self.width && height == self.height && bytesPerRow == width * 4 { return self }
        return resized(
            window: ResizeWindow(
                inputWidth: self.width, inputHeight: self.height, outputWidth: width, outputHeight: height),
            kernel: kernel, linearLight: linearLight)
    }

    /// The window's rectangle of a resize of this image: only that part is computed.
    func resized(window: ResizeWindow, kernel: ResamplingKernel, linearLight: Bool) -> RasterImage {
        if window.isIdentity && bytesPerRow == width * 4 { return self }
        let channels: RowChannels = alphaMode == .straight && hasAlpha ? .straightAlpha : .independent
        let frames = self.frames.map { frame in
            Frame(
                pixels: resize(
                    frame.pixels, window: window, kernel: kernel, channels: channels, linearLight: linearLight),
                duration: frame.duration)
        }
        return RasterImage(
            validatedWidth: window.width, height: window.height, bytesPerRow: window.width * 4, frames: frames,
            alphaMode: alphaMode, loopCount: loopCount, orientation: orientation, iccProfile: iccProfile,
            format: format, hasAlpha: hasAlpha)
    }

    /// Output pixels above which a resize is split across cores.
    static let parallelResizeThreshold = 512 * 512

    private func resize(
        _ pixels: [UInt8], window: ResizeWindow, kernel: ResamplingKernel, channels: RowChannels, linearLight: Bool
    ) -> [UInt8] {
        let (width, height) = (window.width, window.height)
        let cores = ResizeParallelism.cores
        let bands = width * height >= RasterImage.parallelResizeThreshold && cores > 1 ? min(cores * 2, height) : 1
        let rowsPerBand = (height + bands - 1) / bands
        let results = ConcurrentResults<[UInt8]>(count: bands)
        let stride = bytesPerRow
        DispatchQueue.concurrentPerform(iterations: bands) { band in
            let rows = (band * rowsPerBand)..<min(height, (band + 1) * rowsPerBand)
            let resizer = StreamingResizer(
                window: window, kernel: kernel, channels: channels, linearLight: linearLight, outputRows: rows)
            pixels.withUnsafeBufferPointer { source in
                for y in resizer.inputRows { resizer.consume(source.baseAddress! + y * stride, at: y) }
            }
            results.set(band, resizer.finish())
        }
        return results.values.flatMap { $0 }
    }
}

/// Results written by concurrent workers, one slot each, read once all are done.
final class ConcurrentResults<Value>: @unchecked Sendable {
    // Safe: the slots live in one buffer allocated up front, each worker writes only
    // its own slot through the pointer (no Array, so no shared copy-on-write check),
    // and `values` is read after DispatchQueue.concurrentPerform returns, which
    // orders every write before it.
    private let slots: UnsafeMutableBufferPointer<Value?>

    init(count: Int) {
        slots = .allocate(capacity: count)
        slots.initialize(repeating: nil)
    }

    deinit {
        slots.deinitialize()
        slots.deallocate()
    }

    func set(_ index: Int, _ value: Value) { slots[index] = value }

    /// Every slot's value; a slot never set (a worker that stopped early) is left out.
    var values: [Value] { slots.compactMap { $0 } }
}

/// How many cores one resize (or one HEIF grid's tiles, which libheif decodes on as
/// many threads, or one large baseline JPEG's strips between restart markers) may
/// spread across. A caller that already runs many at once on its own
/// threads (the loader's worker pool) gives each its share, so the pool does not
/// oversubscribe the machine; the loader gives a job that starts alone every core.
///
/// ```swift
/// let small = ResizeParallelism.withCores(1) { image.resized(width: 256, height: 256) }
/// ```
public enum ResizeParallelism {
    @TaskLocal static var limit: Int?

    /// The cores a resize started now may use.
    public static var cores: Int { max(1, min(limit ?? System.processorsOnline, System.processorsOnline)) }

    /// Runs `body` (synchronous work on this thread) with resizes limited to `cores`.
    public static func withCores<T>(_ cores: Int, _ body: () throws -> T) rethrows -> T {
        try $limit.withValue(max(1, cores), operation: body)
    }
}
