import ImageLoaderSupport

// RasterImage's uses of the C library that are not an image codec's go through
// ImageLoaderSupport (`System`, `FileSystem`, `PageFaulter`); the file calls below add
// RasterImage's errors.

/// Files read by the decoders, with RasterImage's errors.
enum Platform {
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
}
