import Glibc

/// A file's size and modification time, as `stat` reports them.
package struct FileStatus: Sendable, Equatable {
    package var size: Int
    package var modifiedSeconds: Int
    package var modifiedNanoseconds: Int

    /// The modification time in seconds since 1970, with its fraction.
    package var modified: Double { Double(modifiedSeconds) + Double(modifiedNanoseconds) / 1e9 }

    /// What identifies this version of the file: its size and modification time.
    package var version: String { "\(size)-\(modifiedSeconds)-\(modifiedNanoseconds)" }

    init(_ info: stat) {
        size = Int(info.st_size)
        modifiedSeconds = Int(info.st_mtim.tv_sec)
        modifiedNanoseconds = Int(info.st_mtim.tv_nsec)
    }
}

/// The files the package reads and writes: caches, sources, results. Every call goes
/// through ``System/call(_:path:_:)``.
package enum FileSystem {
    /// The status of `path` (following a link).
    package static func checkedStatus(_ path: String) throws(SystemError) -> FileStatus {
        var info = stat()
        _ = try System.call("stat", path: path) { stat(path, &info) }
        return FileStatus(info)
    }

    /// The status of `path` (following a link), or `nil` when it cannot be read.
    package static func status(_ path: String) -> FileStatus? {
        try? checkedStatus(path)
    }

    /// Whether anything (a link included, not followed) is at `path`.
    package static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// Removes the file at `path`, if there is one.
    package static func remove(_ path: String) {
        _ = unlink(path)
    }

    /// Opens a regular file for reading: its descriptor and size. A folder, a device or
    /// anything else not a regular file is ``SystemError/notRegularFile``'s `EINVAL`.
    package static func openRegularFile(_ path: String, followingLinks: Bool = true) throws(SystemError)
        -> (descriptor: Int32, size: Int)
    {
        let flags = O_RDONLY | O_CLOEXEC | (followingLinks ? 0 : O_NOFOLLOW)
        let descriptor = try System.call("open", path: path) { open(path, flags) }
        var info = stat()
        do throws(SystemError) {
            _ = try System.call("fstat", path: path) { fstat(descriptor, &info) }
            guard info.st_mode & S_IFMT == S_IFREG, info.st_size >= 0 else {
                throw SystemError(SystemError.notRegularFile, path: path, code: EINVAL)
            }
        } catch {
            try? System.close(descriptor)
            throw error
        }
        return (descriptor, Int(info.st_size))
    }

    /// Reads up to `count` bytes at `offset`: how many were read (fewer at the end of
    /// the file).
    package static func read(
        _ descriptor: Int32, into destination: UnsafeMutableRawPointer, count: Int, at offset: Int
    ) throws(SystemError) -> Int {
        var done = 0
        while done < count {
            let n = try System.call("pread") {
                pread(descriptor, destination + done, count - done, off_t(offset + done))
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Exactly `count` bytes at `offset`, or `nil` when the file ends first or cannot be read.
    package static func read(_ descriptor: Int32, count: Int, at offset: Int) -> [UInt8]? {
        guard count > 0 else { return count == 0 ? [] : nil }
        var bytes = [UInt8](repeating: 0, count: count)
        let done = bytes.withUnsafeMutableBytes { buffer -> Int? in
            guard let base = buffer.baseAddress else { return nil }
            return try? read(descriptor, into: base, count: count, at: offset)
        }
        return done == count ? bytes : nil
    }

    /// The bytes of a regular file no larger than `maxBytes`, or `nil`: a symbolic
    /// link, a device, a folder, a larger file, or one that changes while it is read.
    package static func readRegularFile(_ path: String, maxBytes: Int) -> [UInt8]? {
        guard let (descriptor, size) = try? openRegularFile(path, followingLinks: false) else { return nil }
        defer { try? System.close(descriptor) }
        guard size <= maxBytes else { return nil }
        // Shorter than it said: it changed while it was read.
        return read(descriptor, count: size, at: 0)
    }

    /// A file name no other writer picks: 128 random bits in hex, from the system's
    /// generator (getrandom, where Foundation's UUID opens /dev/urandom each time).
    package static func temporaryName() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<2).map { _ in
            let hex = String(generator.next() as UInt64, radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }.joined() + ".tmp"
    }

    /// Writes `bytes` to `temporary` (created with `permissions` less the umask, 0600 for
    /// the cache's own files; never an existing file), then renames it over `path`:
    /// readers see the old file or the new one, never part of one. The descriptor's
    /// close is checked (a write the file system defers can fail there).
    package static func writeAtomically(
        _ bytes: [UInt8], to path: String, through temporary: String, permissions: UInt32 = 0o600
    ) throws(SystemError) {
        let descriptor = try System.call("open", path: temporary) {
            open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode_t(permissions))
        }
        do throws(SystemError) {
            do {
                try System.write(bytes, to: descriptor)
            } catch {
                try? System.close(descriptor)
                throw SystemError(error.call, path: temporary, code: error.code)
            }
            do {
                try System.close(descriptor)
            } catch {
                throw SystemError(error.call, path: temporary, code: error.code)
            }
            _ = try System.call("rename", path: path) { rename(temporary, path) }
        } catch {
            remove(temporary)
            throw error
        }
    }
}
