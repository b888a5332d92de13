import ImageLoaderSupport

/// A file-system failure of the disk cache.
public struct DiskCacheError: Error, Sendable, CustomStringConvertible {
    /// The file or folder that failed.
    public let path: String
    /// The `errno` value.
    public let code: Int32

    init(path: String, errno code: Int32) {
        self.path = path
        self.code = code
    }

    /// The path and the C library's text for the error.
    public var description: String { "\(path): \(System.describe(errno: code))" }
}
