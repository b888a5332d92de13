import RasterImage

// The loader's calls into the C library (stat, open, fstat, rename, fsync...) are
// made through Glibc, imported here once for the target; DiskCache's file handling
// and FileIdentity below use it.
#if canImport(Glibc)
import Glibc
#endif

/// What identifies a version of a file: its size and modification time.
enum FileIdentity {
    static func tag(of path: String) throws -> String {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw ImageDecodingError(.unreadable, message: "\(path): \(String(cString: strerror(errno)))")
        }
        return "\"\(info.st_size)-\(info.st_mtim.tv_sec)-\(info.st_mtim.tv_nsec)\""
    }
}
