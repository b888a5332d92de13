import Dispatch

#if canImport(Glibc)
import Glibc
#endif

extension RasterImage {
    /// This image resized to exactly `width` x `height` (every frame), filtered in
    /// premultiplied alpha: box pre-reduction by whole factors, then `kernel`.
    /// Large outputs are computed in bands of rows on every core.
    ///
    /// ```swift
    /// let half = image.resized(width: image.width / 2, height: image.height / 2)
    /// ```
    public func resized(
        width: Int, height: Int, kernel: ResamplingKernel = .lanczos3, linearLight: Bool = false
    ) -> RasterImage {
        precondition(width > 0 && height > 0, "a resize needs a positive size")
        if width == self.width && height == self.height && bytesPerRow == width * 4 { return self }
        let channels: RowChannels = alphaMode == .straight && hasAlpha ? .straightAlpha : .independent
        let frames = self.frames.map { frame in
            Frame(
                pixels: resize(
                    frame.pixels, width: width, height: height, kernel: kernel, channels: channels,
                    linearLight: linearLight),
                duration: frame.duration)
        }
        return RasterImage(
            validatedWidth: width, height: height, bytesPerRow: width * 4, frames: frames, alphaMode: alphaMode,
            loopCount: loopCount, orientation: orientation, iccProfile: iccProfile, format: format, hasAlpha: hasAlpha)
    }

    /// Output pixels above which a resize is split across cores.
    static let parallelResizeThreshold = 512 * 512

    private func resize(
        _ pixels: [UInt8], width: Int, height: Int, kernel: ResamplingKernel, channels: RowChannels, linearLight: Bool
    ) -> [UInt8] {
        let cores = ProcessorCount.online
        let bands = width * height >= RasterImage.parallelResizeThreshold ? min(cores * 2, height) : 1
        let rowsPerBand = (height + bands - 1) / bands
        let results = ConcurrentResults<[UInt8]>(count: bands)
        let stride = bytesPerRow
        DispatchQueue.concurrentPerform(iterations: bands) { band in
            let rows = (band * rowsPerBand)..<min(height, (band + 1) * rowsPerBand)
            let resizer = StreamingResizer(
                inputWidth: self.width, inputHeight: self.height, outputWidth: width, outputHeight: height,
                kernel: kernel, channels: channels, linearLight: linearLight, outputRows: rows)
            pixels.withUnsafeBufferPointer { source in
                for y in resizer.inputRows { resizer.consume(source.baseAddress! + y * stride) }
            }
            results.set(band, resizer.finish())
        }
        return results.values.flatMap { $0 }
    }
}

/// Results written by concurrent workers, one slot each, read once all are done.
final class ConcurrentResults<Value>: @unchecked Sendable {
    // Safe: each worker writes only its own slot, and `values` is read after
    // DispatchQueue.concurrentPerform returns, which orders every write before it.
    private var slots: [Value?]

    init(count: Int) { slots = Array(repeating: nil, count: count) }

    func set(_ index: Int, _ value: Value) { slots[index] = value }

    var values: [Value] { slots.map { $0! } }
}

enum ProcessorCount {
    /// Cores online, as the C library reports them (a cgroup may give fewer).
    static let online: Int = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
}
