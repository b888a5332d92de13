// Every call the package makes into the C library (files, names, threads, the terminal,
// malloc's settings, libm) is in this target, behind small Swift functions; no other
// target imports Glibc. System calls go through `System.call`, NIO's way: errno read at
// once, EINTR retried, a failure thrown as a typed `SystemError`.
import Glibc
import Synchronization

/// A system call that failed: which, on what, and its `errno`.
package struct SystemError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The call (`open`, `pread`, ...).
    package let call: String
    /// The file it was about, when there was one.
    package let path: String?
    /// The `errno` value.
    package let code: Int32

    package init(_ call: String, path: String? = nil, code: Int32) {
        self.call = call
        self.path = path
        self.code = code
    }

    /// The "call" of a file opened for reading that is not a regular file (a folder, a device).
    package static let notRegularFile = "S_ISREG"

    /// "PATH: the C library's text" (or the call's name in place of a path).
    package var description: String {
        if call == SystemError.notRegularFile { return "\(path ?? call): not a regular file" }
        return "\(path ?? call): \(System.describe(errno: code))"
    }
}

package enum System {
    /// `body`'s result, retried while it fails with `EINTR`; any other failure (a
    /// negative result) is thrown with the errno read at once.
    @inlinable
    package static func call<T: FixedWidthInteger>(
        _ name: String, path: String? = nil, _ body: () -> T
    ) throws(SystemError) -> T {
        while true {
            let result = body()
            if result >= 0 { return result }
            let code = errno
            if code != EINTR { throw SystemError(name, path: path, code: code) }
        }
    }

    /// Closes `descriptor`, checked. EINTR is not retried: Linux has released the
    /// descriptor by then, and it may already be someone else's.
    package static func close(_ descriptor: Int32) throws(SystemError) {
        guard Glibc.close(descriptor) != 0 else { return }
        let code = errno
        if code != EINTR { throw SystemError("close", code: code) }
    }

    /// The C library's text for an errno value.
    package static func describe(errno code: Int32) -> String {
        String(cString: strerror(code))
    }

    /// Writes all of `bytes` to `descriptor` (retrying short and interrupted writes).
    package static func write(_ bytes: [UInt8], to descriptor: Int32) throws(SystemError) {
        var written = 0
        while written < bytes.count {
            let result = bytes.withUnsafeBytes { buffer in
                Result { () throws(SystemError) in
                    try call("write") { Glibc.write(descriptor, buffer.baseAddress! + written, buffer.count - written) }
                }
            }
            written += try result.get()
        }
    }

    /// Whether `descriptor` is a terminal.
    package static func isTerminal(_ descriptor: Int32) -> Bool { isatty(descriptor) == 1 }

    /// Ends the process with `code` (buffers flushed, as `exit(3)`).
    package static func exit(_ code: Int32) -> Never { Glibc.exit(code) }

    /// Raises the soft limit on open descriptors to the hard one (Debian's default soft
    /// limit, 1024, is the hard limit of a `select` loop, not of a server): the limits
    /// before and now.
    package static func raiseDescriptorLimit() -> (before: Int, now: Int) {
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return (1024, 1024) }
        let before = Int(clamping: limit.rlim_cur)
        // An unlimited hard limit is not a count setrlimit takes for RLIMIT_NOFILE.
        let wanted = limit.rlim_max == rlim_t.max ? max(limit.rlim_cur, 1 << 20) : limit.rlim_max
        guard wanted > limit.rlim_cur else { return (before, before) }
        var raised = limit
        raised.rlim_cur = wanted
        guard setrlimit(resource, &raised) == 0 else { return (before, before) }
        return (before, Int(clamping: wanted))
    }

    /// Cores online, as the C library reports them (a cgroup may give fewer).
    package static let processorsOnline: Int = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))

    /// `sin` from libm.
    @inlinable package static func sine(_ x: Double) -> Double { sin(x) }
    /// `pow` from libm.
    @inlinable package static func power(_ x: Double, _ y: Double) -> Double { pow(x, y) }
    /// `exp` from libm.
    @inlinable package static func exponential(_ x: Double) -> Double { exp(x) }

    /// glibc's `malloc_trim(0)`: the free memory of every arena, at their tops and in
    /// whole free pages inside them, returned to the kernel. False where the C library
    /// is not glibc, or nothing could be returned.
    @discardableResult
    package static func trimMalloc() -> Bool {
        #if os(Linux) && canImport(Glibc)
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return false }
        let trim = unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
        return trim(0) == 1
        #else
        return false
        #endif
    }

    /// Sets one of glibc's malloc parameters (`mallopt`; <malloc.h> is not in Swift's
    /// Glibc module, so it is looked up by name): whether it took. False where the C
    /// library is not glibc.
    package static func setMallocOption(_ parameter: Int32, _ value: Int32) -> Bool {
        #if os(Linux) && canImport(Glibc)
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") else { return false }
        let mallopt = unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)
        return mallopt(parameter, value) == 1
        #else
        return false
        #endif
    }

    /// Allocates and frees a block of 256 KiB in the calling thread's malloc arena.
    /// glibc gives the free top of an arena other than the main one back to the kernel
    /// only when a block of 64 KiB or more of that arena is freed and the top exceeds
    /// the trim threshold (`malloc_trim` does not shrink those tops): with the
    /// threshold lowered, this returns the top of the arena the calling thread uses.
    /// Through `dlsym`'s pointers, so that the compiler cannot remove the pair.
    package static func cycleArenaBlock() {
        #if os(Linux) && canImport(Glibc)
        guard let allocate = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc"),
            let release = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "free")
        else { return }
        let malloc = unsafeBitCast(allocate, to: (@convention(c) (Int) -> UnsafeMutableRawPointer?).self)
        let free = unsafeBitCast(release, to: (@convention(c) (UnsafeMutableRawPointer?) -> Void).self)
        free(malloc(256 << 10))
        #endif
    }

    /// The 4 bytes of a dotted IPv4 address (`inet_pton`), or `nil`.
    package static func ipv4(_ text: String) -> [UInt8]? {
        var address = in_addr()
        guard inet_pton(AF_INET, text, &address) == 1 else { return nil }
        return withUnsafeBytes(of: address.s_addr) { Array($0) }
    }

    /// The 16 bytes of an IPv6 address in its text forms (`inet_pton`), or `nil`.
    package static func ipv6(_ text: String) -> [UInt8]? {
        var address = in6_addr()
        guard inet_pton(AF_INET6, text, &address) == 1 else { return nil }
        return withUnsafeBytes(of: address) { Array($0) }
    }

    /// The standard text of a 16-byte IPv6 address (`inet_ntop`).
    package static func ipv6Text(_ bytes: [UInt8]) -> String? {
        var address = in6_addr()
        withUnsafeMutableBytes(of: &address) { $0.copyBytes(from: bytes.prefix(16)) }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count)) != nil else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Name resolution through the C library's `getaddrinfo`.
package enum Resolver {
    /// The numeric addresses `host` resolves to (IPv4 and IPv6, in the resolver's
    /// order, without repeats), or the C library's message when it resolves to none.
    /// An address literal gives itself. Blocks: call it off the event loops.
    package static func addresses(of host: String) -> Result<[String], ResolutionError> {
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

    package struct ResolutionError: Error, Sendable {
        package let message: String
    }
}

/// The scheduling priority of the calling thread, as a Unix nice value (-20, the
/// highest, to 19). On Linux (glibc) it belongs to each thread.
package enum ThreadNiceness {
    /// The calling thread's nice value.
    package static var current: Int {
        // -1 is both a valid value and the error return; the call cannot fail for the calling thread.
        Int(getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0))
    }

    /// Lowers the calling thread's priority to nice `value` (at most 19); a thread
    /// already at `value` or lower in priority is left as it is.
    package static func lowerCurrentThread(to value: Int) {
        let target = min(19, value)
        guard target > current else { return }
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, Int32(target))
    }
}

/// Faults in the pages of a large, fresh output buffer on another thread while the
/// decoder fills it from the top. The kernel zeroing tens of megabytes of new pages
/// costs as much as a third of a JPEG decode; done alongside, it leaves the critical
/// path (measured: 1.57x to 1.11x of djpeg's time for a 6000x4000 JPEG).
/// `MADV_POPULATE_WRITE` (Linux 5.14) maps pages without touching their contents, so
/// rows the decoder has already written stay as they are; on older kernels the call
/// fails and nothing happens. When every core already has a large decode, the helper
/// would only compete with them, so it is skipped.
package final class PageFaulter {
    private let range: UnsafeMutableRawBufferPointer
    private var thread = pthread_t()

    /// Buffers smaller than this come from the heap, mostly already mapped.
    package static let minimumBytes = 8 << 20
    private static let running = Atomic<Int>(0)

    private init(range: UnsafeMutableRawBufferPointer) {
        self.range = range
    }

    package static func start(_ buffer: UnsafeMutableRawBufferPointer) -> PageFaulter? {
        let page = 4096
        guard buffer.count >= minimumBytes, let base = buffer.baseAddress else { return nil }
        let start = (Int(bitPattern: base) + page - 1) & ~(page - 1)
        let end = (Int(bitPattern: base) + buffer.count) & ~(page - 1)
        guard end > start, let aligned = UnsafeMutableRawPointer(bitPattern: start) else { return nil }
        guard running.add(1, ordering: .relaxed).newValue <= System.processorsOnline else {
            running.subtract(1, ordering: .relaxed)
            return nil
        }
        let faulter = PageFaulter(range: UnsafeMutableRawBufferPointer(start: aligned, count: end - start))
        let context = Unmanaged.passRetained(faulter).toOpaque()
        let status = pthread_create(
            &faulter.thread, nil,
            { context in
                guard let context else { return nil }
                let faulter = Unmanaged<PageFaulter>.fromOpaque(context).takeRetainedValue()
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
    package func finish() {
        pthread_join(thread, nil)
        PageFaulter.running.subtract(1, ordering: .relaxed)
    }
}
