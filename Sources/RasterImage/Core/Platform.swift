import Synchronization

// Every call RasterImage makes into the C library that is not an image codec's (pthreads,
// sysconf, madvise, open/fstat/pread/close, strerror, and the two libm functions) is in
// this file; the rest of the target calls these.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The C library's functions the rest of the target needs, as Swift functions.
enum Platform {
    /// `sin` from libm.
    static func sine(_ x: Double) -> Double { sin(x) }

    /// `pow` from libm.
    static func power(_ x: Double, _ y: Double) -> Double { pow(x, y) }

    /// `exp` from libm.
    static func exponential(_ x: Double) -> Double { exp(x) }

    /// Opens a regular file for reading: its descriptor and size. Throws
    /// ``ImageDecodingError/Reason/unreadable`` for anything else (a folder, a device).
    static func openRegularFile(_ path: String) throws(ImageDecodingError) -> (descriptor: Int32, size: Int) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw fileError(path, errno) }
        var status = stat()
        guard fstat(fd, &status) == 0 else {
            let code = errno
            _ = close(fd)
            throw fileError(path, code)
        }
        guard (status.st_mode & S_IFMT) == S_IFREG else {
            _ = close(fd)
            throw ImageDecodingError(.unreadable, message: "\(path): not a regular file")
        }
        return (fd, Int(status.st_size))
    }

    /// Reads up to `count` bytes at `offset` (retrying interrupted reads): how many
    /// were read (fewer at the end of the file) and the errno of a failed read, or 0.
    static func read(_ descriptor: Int32, into destination: UnsafeMutableRawPointer, count: Int, at offset: Int)
        -> (count: Int, errno: Int32)
    {
        var done = 0
        while done < count {
            let n = pread(descriptor, destination + done, count - done, off_t(offset + done))
            if n > 0 {
                done += n
            } else if n == 0 {
                break
            } else if errno != EINTR {
                return (done, errno)
            }
        }
        return (done, 0)
    }

    static func closeDescriptor(_ descriptor: Int32) {
        _ = close(descriptor)
    }

    /// The C library's text for an errno value.
    static func describe(errno code: Int32) -> String {
        String(cString: strerror(code))
    }

    private static func fileError(_ path: String, _ code: Int32) -> ImageDecodingError {
        ImageDecodingError(.unreadable, message: "\(path): \(describe(errno: code))")
    }
}

enum ProcessorCount {
    /// Cores online, as the C library reports them (a cgroup may give fewer).
    static let online: Int = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
}

/// Faults in the pages of a large, fresh output buffer on another thread while the
/// decoder fills it from the top. The kernel zeroing tens of megabytes of new pages
/// costs as much as a third of a JPEG decode; done alongside, it leaves the critical
/// path (measured: 1.57x to 1.11x of djpeg's time for a 6000x4000 JPEG).
/// `MADV_POPULATE_WRITE` (Linux 5.14) maps pages without touching their contents, so
/// rows the decoder has already written stay as they are; on older kernels the call
/// fails and nothing happens. When every core already has a large decode, the helper
/// would only compete with them, so it is skipped.
final class PageFaulter {
    private let range: UnsafeMutableRawBufferPointer
    private var thread = pthread_t()

    /// Buffers smaller than this come from the heap, mostly already mapped.
    static let minimumBytes = 8 << 20
    private static let running = Atomic<Int>(0)

    private init(range: UnsafeMutableRawBufferPointer) {
        self.range = range
    }

    static func start(_ buffer: UnsafeMutableRawBufferPointer) -> PageFaulter? {
        let page = 4096
        guard buffer.count >= minimumBytes, let base = buffer.baseAddress else { return nil }
        let start = (Int(bitPattern: base) + page - 1) & ~(page - 1)
        let end = (Int(bitPattern: base) + buffer.count) & ~(page - 1)
        guard end > start, let aligned = UnsafeMutableRawPointer(bitPattern: start) else { return nil }
        guard running.add(1, ordering: .relaxed).newValue <= ProcessorCount.online else {
            running.subtract(1, ordering: .relaxed)
            return nil
        }
        let faulter = PageFaulter(range: UnsafeMutableRawBufferPointer(start: aligned, count: end - start))
        let context = Unmanaged.passRetained(faulter).toOpaque()
        let status = pthread_create(
            &faulter.thread, nil,
            { context in
                let faulter = Unmanaged<PageFaulter>.fromOpaque(context!).takeRetainedValue()
                _ = madvise(faulter.range.baseAddress, faulter.range.count, 23 /* MADV_POPULATE_WRITE */)
                return nil
            }, context)
        guard status == 0 else {
            Unmanaged<PageFaulter>.fromOpaque(context).release()
            running.subtract(1, ordering: .relaxed)
            return nil
        }
        return faulter
    }

    /// Waits for the thread, so it never outlives the buffer.
    func finish() {
        pthread_join(thread, nil)
        PageFaulter.running.subtract(1, ordering: .relaxed)
    }
}
