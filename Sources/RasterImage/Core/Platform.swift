import ImageLoaderSupport

// RasterImage's uses of the C library that are not an image codec's go through
// ImageLoaderSupport (`System`, `FileSystem`, `PageFaulter`); these name them for the
// decoders, with RasterImage's errors.

/// The C library's functions the rest of the target needs, as Swift functions.
enum Platform {
    /// `sin` from libm.
    @inline(__always) static func sine(_ x: Double) -> Double { System.sine(x) }

    /// `pow` from libm.
    @inline(__always) static func power(_ x: Double, _ y: Double) -> Double { System.power(x, y) }

    /// `exp` from libm.
    @inline(__always) static func exponential(_ x: Double) -> Double { System.exponential(x) }

    /// Opens a regular file for reading: its descriptor and size. Throws
    /// ``ImageDecodingError/Reason/unreadable`` for anything else (a folder, a device).
    static func openRegularFile(_ path: String) throws(ImageDecodingError) -> (descriptor: Int32, size: Int) {
        do {
            return try FileSystem.openRegularFile(path)
        } catch {
            throw ImageDecodingError(.unreadable, message: error.description)
        }
    }

    /// Reads up to `count` bytes at `offset` (retrying interrupted reads): how many
    /// were read (fewer at the end of the file) and the errno of a failed read, or 0.
    static func read(_ descriptor: Int32, into destination: UnsafeMutableRawPointer, count: Int, at offset: Int)
        -> (count: Int, errno: Int32)
    {
        do {
            return (try FileSystem.read(descriptor, into: destination, count: count, at: offset), 0)
        } catch {
            return (0, error.code)
        }
    }

    static func closeDescriptor(_ descriptor: Int32) {
        // A read-only descriptor: a failed close loses nothing.
        try? System.close(descriptor)
    }

    /// The C library's text for an errno value.
    static func describe(errno code: Int32) -> String {
        System.describe(errno: code)
    }
}

enum ProcessorCount {
    /// Cores online, as the C library reports them (a cgroup may give fewer).
    static var online: Int { System.processorsOnline }
}
