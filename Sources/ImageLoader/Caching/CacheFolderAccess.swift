import Foundation
import ImageLoaderSupport

/// The file-system calls the disk cache makes inside its folder, in one seam: the
/// cache goes through ``LocalFolder``, the file system as it is; the tests go through
/// one that fails writes as a full or read-only disk would, or writes entries between
/// the steps of a rescan, without the cache knowing it is tested.
protocol CacheFolderAccess: Sendable {
    /// The names in `directory`; empty when it cannot be read.
    func list(_ directory: String) -> [String]
    /// The status of `path` (following a link), or `nil` when it cannot be read.
    func status(_ path: String) -> FileStatus?
    /// Whether anything (a link included, not followed) is at `path`.
    func exists(_ path: String) -> Bool
    /// The bytes of a regular file no larger than `maxBytes`, or `nil`.
    func read(_ path: String, maxBytes: Int) -> [UInt8]?
    /// Writes `bytes` to `temporary` (a new file, 0600), then renames it over `path`.
    func write(_ bytes: [UInt8], to path: String, through temporary: String) throws(SystemError)
    /// Removes the file at `path`, if there is one.
    func remove(_ path: String)
}

/// The file system as it is.
struct LocalFolder: CacheFolderAccess {
    func list(_ directory: String) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
    }

    func status(_ path: String) -> FileStatus? { FileSystem.status(path) }

    func exists(_ path: String) -> Bool { FileSystem.exists(path) }

    func read(_ path: String, maxBytes: Int) -> [UInt8]? { FileSystem.readRegularFile(path, maxBytes: maxBytes) }

    func write(_ bytes: [UInt8], to path: String, through temporary: String) throws(SystemError) {
        try FileSystem.writeAtomically(bytes, to: path, through: temporary)
    }

    func remove(_ path: String) { FileSystem.remove(path) }
}
