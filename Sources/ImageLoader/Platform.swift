import Foundation
import RasterImage

// Every call the loader makes into the C library (stat, open, read, write, rename,
// unlink, strerror, getaddrinfo, getpriority, setpriority, mallopt) is in this file, behind small
// Swift functions; the rest of the target uses these.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A file's size and modification time, as `stat` reports them.
package struct FileStatus: Sendable, Equatable {
    package var size: Int
    package var modifiedSeconds: Int
    package var modifiedNanoseconds: Int

    /// The modification time in seconds since 1970, with its fraction.
    package var modified: Double { Double(modifiedSeconds) + Double(modifiedNanoseconds) / 1e9 }

    /// What identifies this version of the file: its size and modification time.
    package var version: String { "\(size)-\(modifiedSeconds)-\(modifiedNanoseconds)" }
}

package enum FileSystem {
    /// The status of `path` (following a link), or `nil` when it cannot be read.
    package static func status(_ path: String) -> FileStatus? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return FileStatus(info)
    }

    /// Whether anything (a link included, not followed) is at `path`.
    static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    static func remove(_ path: String) {
        unlink(path)
    }

    /// The bytes of a regular file no larger than `maxBytes`, or `nil`: a symbolic
    /// link, a device, a folder, a larger file, or one that changes while it is read.
    package static func readRegularFile(_ path: String, maxBytes: Int) -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG,
            let size = Checked.int(info.st_size), size <= maxBytes
        else { return nil }
        var bytes = [UInt8](repeating: 0, count: size)
        var done = 0
        while done < size {
            let n = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + done, size - done) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return nil }  // shorter than it said: changed while read
            done += n
        }
        return bytes
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
    /// the cache's own files; never an existing file), then
    /// renames it over `path`: readers see the old file or the new one, never part of one.
    package static func writeAtomically(
        _ bytes: [UInt8], to path: String, through temporary: String, permissions: mode_t = 0o600
    ) throws(DiskCacheError) {
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, permissions)
        guard descriptor >= 0 else { throw DiskCacheError(path: temporary, errno: errno) }
        var written = 0
        let result = bytes.withUnsafeBytes { buffer -> Int32 in
            while written < buffer.count {
                let n = write(descriptor, buffer.baseAddress! + written, buffer.count - written)
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                written += n
            }
            return 0
        }
        close(descriptor)
        guard result == 0 else {
            unlink(temporary)
            throw DiskCacheError(path: temporary, errno: result)
        }
        guard rename(temporary, path) == 0 else {
            let code = errno
            unlink(temporary)
            throw DiskCacheError(path: path, errno: code)
        }
    }

    /// The C library's text for an errno value.
    static func describe(errno code: Int32) -> String {
        String(cString: strerror(code))
    }
}

extension FileStatus {
    init(_ info: stat) {
        self.init(
            size: Int(info.st_size), modifiedSeconds: Int(info.st_mtim.tv_sec),
            modifiedNanoseconds: Int(info.st_mtim.tv_nsec))
    }
}

/// What identifies a version of a file: its size and modification time.
enum FileIdentity {
    static func tag(of path: String) throws -> String {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw ImageDecodingError(.unreadable, message: "\(path): \(FileSystem.describe(errno: errno))")
        }
        return "\"\(FileStatus(info).version)\""
    }
}

/// Name resolution through the C library's `getaddrinfo`.
enum Resolver {
    /// The numeric addresses `host` resolves to (IPv4 and IPv6, in the resolver's
    /// order, without repeats), or the C library's message when it resolves to none.
    /// An address literal gives itself. Blocks: call it off the event loops.
    static func addresses(of host: String) -> Result<[String], ResolutionError> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, nil, &hints, &list)
        guard status == 0, let list else {
            return .failure(ResolutionError(message: String(cString: gai_strerror(status))))
        }
        defer { freeaddrinfo(list) }
        var found: [String] = []
        var node: UnsafeMutablePointer<addrinfo>? = list
        while let entry = node {
            var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            if let address = entry.pointee.ai_addr,
                getnameinfo(address, entry.pointee.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST)
                    == 0
            {
                let numeric = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if !found.contains(numeric) { found.append(numeric) }
            }
            node = entry.pointee.ai_next
        }
        return found.isEmpty ? .failure(ResolutionError(message: "no address")) : .success(found)
    }

    struct ResolutionError: Error {
        let message: String
    }
}

/// The scheduling priority of the calling thread, as a Unix nice value (-20, the
/// highest, to 19). On Linux (glibc) it belongs to each thread; elsewhere to the whole
/// process, so there it is left alone.
package enum ThreadNiceness {
    /// The calling thread's nice value.
    package static var current: Int {
        #if os(Linux) && canImport(Glibc)
        // -1 is both a valid value and the error return; the call cannot fail for the calling thread.
        return Int(getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0))
        #else
        return 0
        #endif
    }

    /// Lowers the calling thread's priority to nice `value` (at most 19); a thread
    /// already at `value` or lower in priority is left as it is.
    static func lowerCurrentThread(to value: Int) {
        #if os(Linux) && canImport(Glibc)
        let target = min(19, value)
        guard target > current else { return }
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, Int32(target))
        #endif
    }
}

/// glibc's `malloc`, set for a process that decodes images one after another.
///
/// By default glibc hands blocks of more than 128 KiB (raised as large blocks are
/// freed, up to 32 MiB) straight from the kernel, and gives free memory back to the
/// kernel once more than twice that is free at the top of an arena. A thumbnail
/// service allocates and frees blocks of a few hundred kilobytes to tens of megabytes
/// for every image (sources, rows, results), so the same memory goes back to the
/// kernel and is faulted in again, zeroed, for every request: about 370 page faults a
/// request for the 2000x1500 JPEGs of the service benchmark.
///
/// ``keepImageBuffers(environment:)`` sets, from the start, what glibc's own rule
/// settles on after it has seen a 32 MiB block freed: blocks up to 32 MiB come from
/// the arenas, and an arena returns memory once 64 MiB of it is free. Freed image
/// buffers are then reused in place. The process keeps up to that much free memory
/// per arena instead of returning it, so its resident memory stays near its peak, and
/// the peak grows a little (in the service benchmark, JPEG at 16 connections: 64-68 MiB
/// instead of 60). `imageloader serve` calls it at start-up.
///
/// It also caps the number of arenas at the processor count (at least 2; glibc's
/// default is eight times the processor count). Each arena keeps the free memory of its
/// own peak, and glibc gives each thread an arena of its own while the cap allows: in a
/// service whose threads take turns with the work, every arena reaches the peak of the
/// requests that happened to run on its threads, so resident memory kept rising, by
/// steps at each burst of traffic, long after the live memory had stopped growing (in
/// the service's soak, malloc's own figures: 30, 29 and 29 MB in use at 3, 5 and 10
/// minutes, while 8 arenas held 46, 64 and 68 MB). With fewer arenas they reach their
/// peaks sooner and hold less. An arena per processor costs no measurable throughput,
/// since no more threads than processors run at once: in the service benchmark on 2
/// processors (JPEG, 3 interleaved rounds), 2 arenas served 89.8 and 97.7 requests/s at
/// 2 and 16 connections against glibc's default 82.3 and 92.9, with a peak RSS of 46.8
/// MiB against 51.7.
///
/// ```swift
/// // First thing in a service's main, before any image is loaded:
/// MemoryAllocator.keepImageBuffers()
/// ```
public enum MemoryAllocator {
    /// The largest block served from the arenas: glibc's own cap (half its 64 MiB arena heap).
    public static let largestArenaBlock = 32 << 20
    /// How much free memory an arena keeps before it returns some to the system.
    public static let keptFreeMemory = 64 << 20
    /// The most arenas: one for each processor this process may run on (at least 2).
    public static var arenaLimit: Int { max(2, ProcessInfo.processInfo.activeProcessorCount) }

    /// Applies the settings above, unless the environment already sets either threshold
    /// (`GLIBC_TUNABLES` naming `glibc.malloc.mmap_threshold` or
    /// `glibc.malloc.trim_threshold`, or `MALLOC_MMAP_THRESHOLD_` or
    /// `MALLOC_TRIM_THRESHOLD_`): an operator's choice stands. The arena cap is applied
    /// with them unless the environment sets one (`MALLOC_ARENA_MAX` or
    /// `glibc.malloc.arena_max`). Call it before the process has started threads that
    /// allocate: glibc fixes its arena cap once it has made 8 arenas.
    ///
    /// - Returns: Whether the thresholds were applied: false when the environment sets
    ///   them, or where the C library is not glibc.
    @discardableResult
    public static func keepImageBuffers(environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        guard !setsThresholds(environment) else { return false }
        #if os(Linux) && canImport(Glibc)
        // <malloc.h> is not in Swift's Glibc module: `mallopt` is looked up by name, and
        // its parameters are the numbers malloc.h defines (M_TRIM_THRESHOLD -1,
        // M_MMAP_THRESHOLD -3, M_ARENA_MAX -8), fixed in glibc's ABI. Each call returns 1
        // on success.
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") else { return false }
        let mallopt = unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)
        let mapped = mallopt(-3, Int32(largestArenaBlock))
        let trimmed = mallopt(-1, Int32(keptFreeMemory))
        if !setsArenaLimit(environment) { _ = mallopt(-8, Int32(clamping: arenaLimit)) }
        return mapped == 1 && trimmed == 1
        #else
        return false
        #endif
    }

    /// Whether `environment` sets glibc's mapping or trimming threshold itself.
    static func setsThresholds(_ environment: [String: String]) -> Bool {
        sets(environment, ["MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"], ["mmap_threshold", "trim_threshold"])
    }

    /// Whether `environment` caps glibc's arenas itself.
    static func setsArenaLimit(_ environment: [String: String]) -> Bool {
        sets(environment, ["MALLOC_ARENA_MAX"], ["arena_max"])
    }

    /// Whether `environment` sets one of glibc's malloc settings, by its own variable or
    /// as a `glibc.malloc.NAME=` tunable.
    private static func sets(_ environment: [String: String], _ variables: [String], _ tunables: [String]) -> Bool {
        if variables.contains(where: { environment[$0] != nil }) { return true }
        let named = (environment["GLIBC_TUNABLES"] ?? "").split(separator: ":")
        return named.contains { setting in tunables.contains { setting.hasPrefix("glibc.malloc.\($0)=") } }
    }
}
