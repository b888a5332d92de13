import Foundation

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
package enum MemoryAllocator {
    /// The largest block served from the arenas: glibc's own cap (half its 64 MiB arena heap).
    package static let largestArenaBlock = 32 << 20
    /// How much free memory an arena keeps before it returns some to the system.
    package static let keptFreeMemory = 64 << 20
    /// The most arenas: one for each processor this process may run on (at least 2).
    package static var arenaLimit: Int { max(2, ProcessInfo.processInfo.activeProcessorCount) }

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
    package static func keepImageBuffers(environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        guard !setsThresholds(environment) else { return false }
        // The parameters are the numbers malloc.h defines (M_TRIM_THRESHOLD -1,
        // M_MMAP_THRESHOLD -3, M_ARENA_MAX -8), fixed in glibc's ABI.
        let mapped = System.setMallocOption(-3, Int32(largestArenaBlock))
        let trimmed = System.setMallocOption(-1, Int32(keptFreeMemory))
        if !setsArenaLimit(environment) { _ = System.setMallocOption(-8, Int32(clamping: arenaLimit)) }
        keepsBuffers.withLock { $0 = trimmed }
        return mapped && trimmed
    }

    /// Whether ``keepImageBuffers(environment:)`` raised the trim threshold.
    private static let keepsBuffers = Lock(false)
    /// The trim threshold while free memory is being returned: glibc's own starting value.
    static let returningTrimThreshold = 128 << 10

    /// Returns the free memory malloc keeps to the system: what
    /// ``keepImageBuffers(environment:)`` keeps for the next images goes back once a
    /// burst is over, so resident memory falls back towards its idle level. Call it when
    /// no image is being processed: it walks every arena under its lock (a few
    /// milliseconds with hundreds of MiB free). `imageloader serve` does, every
    /// `--free-memory-interval` seconds while idle after work.
    ///
    /// glibc's `malloc_trim` returns the free pages inside every arena, but of the free
    /// memory at an arena's top (where a burst's buffers end up) only the main arena's.
    /// The others shrink only when one of their blocks of 64 KiB or more is freed while
    /// their top exceeds the trim threshold. So, when the threshold is the one
    /// ``keepImageBuffers(environment:)`` raised, it is lowered to glibc's starting
    /// 128 KiB while `onEveryThread` runs ``System/cycleArenaBlock()`` on the threads
    /// that hold the memory (each thread allocates from an arena of its own while
    /// there are fewer than ``arenaLimit``, then shares one), and raised again after.
    /// After the service's burst (Benchmarks/memory_after_burst.py) the arenas' tops
    /// held about 17 MiB that `malloc_trim` alone left resident.
    ///
    /// ```swift
    /// await MemoryAllocator.returnFreeMemory { cycle in await workers.runOnEveryThread(cycle) }
    /// ```
    @discardableResult
    package static func returnFreeMemory(
        onEveryThread: (@escaping @Sendable () -> Void) async -> Void = { _ in }
    ) async -> Bool {
        if keepsBuffers.withLock({ $0 }) {
            _ = System.setMallocOption(-1, Int32(returningTrimThreshold))
            System.cycleArenaBlock()
            await onEveryThread { System.cycleArenaBlock() }
            _ = System.setMallocOption(-1, Int32(keptFreeMemory))
        }
        return System.trimMalloc()
    }

    /// The memory limit of this process's control group (cgroup v2's `memory.max`, or
    /// v1's `memory.limit_in_bytes`), in bytes; nil when there is none, or it is above
    /// the machine's memory (v1's "no limit" is a huge number).
    package static func controlGroupLimit(root: String = "/sys/fs/cgroup") -> Int? {
        for path in [root + "/memory.max", root + "/memory/memory.limit_in_bytes"] {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { continue }
            guard let bytes = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)), bytes > 0 else { return nil }
            return bytes < Int(clamping: ProcessInfo.processInfo.physicalMemory) ? bytes : nil
        }
        return nil
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
