import Foundation
import TestSupport
import Testing

@testable import ImageLoaderSupport

#if canImport(Glibc)
import Glibc
#endif

@Suite("The malloc settings for image services")
struct MemoryAllocatorTests {
    @Test("an operator's own thresholds stand; other tunables do not count")
    func operatorsChoiceStands() {
        let sets: [[String: String]] = [
            ["GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1048576"],
            ["GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.malloc.mmap_threshold=65536"],
            ["MALLOC_TRIM_THRESHOLD_": "131072"],
            ["MALLOC_MMAP_THRESHOLD_": "131072"],
        ]
        for environment in sets {
            #expect(MemoryAllocator.setsThresholds(environment), "\(environment)")
            #expect(!MemoryAllocator.keepImageBuffers(environment: environment), "\(environment)")
        }
        let others: [[String: String]] = [
            [:], ["GLIBC_TUNABLES": "glibc.malloc.arena_max=2"], ["GLIBC_TUNABLES": "glibc.malloc.mmap_max=0"],
            ["MALLOC_ARENA_MAX": "2"],
        ]
        for environment in others { #expect(!MemoryAllocator.setsThresholds(environment), "\(environment)") }
    }

    @Test("an operator's own arena cap stands")
    func operatorsArenaCapStands() {
        let sets: [[String: String]] = [
            ["MALLOC_ARENA_MAX": "2"], ["GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1:glibc.malloc.arena_max=8"],
        ]
        for environment in sets { #expect(MemoryAllocator.setsArenaLimit(environment), "\(environment)") }
        let others: [[String: String]] = [
            [:], ["GLIBC_TUNABLES": "glibc.malloc.arena_test=2"], ["MALLOC_TRIM_THRESHOLD_": "131072"],
        ]
        for environment in others { #expect(!MemoryAllocator.setsArenaLimit(environment), "\(environment)") }
        #expect(MemoryAllocator.arenaLimit >= 2)
        #expect(MemoryAllocator.arenaLimit == max(2, ProcessInfo.processInfo.activeProcessorCount))
    }

    #if os(Linux) && canImport(Glibc)
    /// Whether a sanitizer's allocator stands in for glibc's (`scripts/sanitize.sh`): it
    /// takes no `mallopt` settings and keeps freed blocks its own way.
    static let glibcAllocator =
        dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__asan_init") == nil
        && dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__tsan_init") == nil

    @Test(
        "once applied, freed buffers of up to 32 MiB are reused in place instead of mapped afresh",
        .enabled(if: glibcAllocator, "a sanitizer's allocator stands in for glibc's"))
    func freedBuffersAreReused() {
        #expect(MemoryAllocator.keepImageBuffers(environment: [:]))
        // Buffers of 10, 11, ... 25 MiB, one after another, each freed before the next (as
        // a service's per-image buffers are). By default glibc maps each from the
        // kernel, since each is larger than the last one freed, and unmaps it on free:
        // every page of every buffer is a fault. Kept in the arena, a buffer reuses the
        // last one's pages and faults only the 1 MiB it adds.
        let step = 1 << 20
        let pages = step / 4096
        func faults() -> Int {
            var usage = rusage()
            // RUSAGE_THREAD (1 on Linux) needs _GNU_SOURCE, which Swift's Glibc module lacks.
            getrusage(__rusage_who_t(1), &usage)
            return usage.ru_minflt
        }
        var fewest = Int.max
        // Sixteen rounds: tests running beside this one (decodes of tens of megabytes)
        // share its arena and may take its free top in a round; one round left alone
        // shows the reuse (four rounds were once all disturbed on a loaded machine).
        for round in 0..<16 {
            let size = (10 + round) * step
            let before = faults()
            guard let block = malloc(size) else {
                Issue.record("malloc failed")
                return
            }
            memset(block, Int32(round), size)
            free(block)
            // Another test's thread sharing this arena may take its free top between
            // rounds: the fewest faults of a round counts.
            if round > 0 { fewest = min(fewest, faults() - before) }
        }
        // At most the added 1 MiB (256 pages) and some slack; mapped afresh, at least 2,560.
        #expect(fewest < pages * 2, "\(fewest) faults")
    }
    #endif

    @Test("the GLIBC_TUNABLES the server article gives are the thresholds serve applies")
    func documentedTunables() throws {
        let article = try String(
            contentsOfFile: RepositoryPaths.root.appendingPathComponent(
                "Sources/ImageLoader/ImageLoader.docc/UsingInAServer.md"
            ).path,
            encoding: .utf8)
        let line = try #require(article.split(separator: "\n").first { $0.contains("GLIBC_TUNABLES=") })
        #expect(line.contains("glibc.malloc.mmap_threshold=\(MemoryAllocator.largestArenaBlock)"))
        #expect(line.contains("glibc.malloc.trim_threshold=\(MemoryAllocator.keptFreeMemory)"))
        #expect(line.contains("glibc.malloc.arena_max="))
        // What the environment then sets is what keepImageBuffers would have set, so it stands.
        let value = String(line.drop { $0 != "=" }.dropFirst())
        #expect(!MemoryAllocator.keepImageBuffers(environment: ["GLIBC_TUNABLES": value]))
    }

    @Test(
        "the control group's memory limit: v2's memory.max, v1's limit, none for max or a limit past the machine's memory"
    )
    func controlGroupLimit() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("cgroup-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/memory", withIntermediateDirectories: true)
        #expect(MemoryAllocator.controlGroupLimit(root: root) == nil)
        try "536870912\n".write(toFile: root + "/memory/memory.limit_in_bytes", atomically: true, encoding: .utf8)
        #expect(MemoryAllocator.controlGroupLimit(root: root) == 512 << 20)
        try "max\n".write(toFile: root + "/memory.max", atomically: true, encoding: .utf8)
        #expect(MemoryAllocator.controlGroupLimit(root: root) == nil)
        try "1073741824\n".write(toFile: root + "/memory.max", atomically: true, encoding: .utf8)
        #expect(MemoryAllocator.controlGroupLimit(root: root) == 1 << 30)
        try "9223372036854771712\n".write(toFile: root + "/memory.max", atomically: true, encoding: .utf8)
        #expect(MemoryAllocator.controlGroupLimit(root: root) == nil)
    }

    @Test("workers and the result cache fit the memory limit: each worker holds the largest source and its pixels")
    func budget() {
        let unlimited = MemoryBudget(limit: nil, cores: 8, maxSourceBytes: 64 << 20, maxSourcePixels: 50_000_000)
        #expect(unlimited.workers == 8 && unlimited.resultCacheBytes == MemoryBudget.defaultResultCache)
        // 50 MP sources: 267 MB a worker. 512 MiB holds one, 2 GiB seven (of eight cores), 16 GiB all eight.
        let small = MemoryBudget(limit: 512 << 20, cores: 8, maxSourceBytes: 64 << 20, maxSourcePixels: 50_000_000)
        #expect(small.workers == 1 && small.resultCacheBytes == 64 << 20)
        let medium = MemoryBudget(limit: 2 << 30, cores: 8, maxSourceBytes: 64 << 20, maxSourcePixels: 50_000_000)
        #expect(medium.workers == (2048 - 96 - 128) * (1 << 20) / (64 << 20 + 200_000_000))
        #expect(medium.workers == 7 && medium.resultCacheBytes == 128 << 20)
        let large = MemoryBudget(limit: 16 << 30, cores: 8, maxSourceBytes: 64 << 20, maxSourcePixels: 50_000_000)
        #expect(large.workers == 8)
        // Below the reserve, and with limits that overflow: still one worker.
        #expect(MemoryBudget(limit: 16 << 20, cores: 4, maxSourceBytes: 1, maxSourcePixels: 1).workers == 1)
        #expect(MemoryBudget(limit: 1 << 30, cores: 4, maxSourceBytes: .max, maxSourcePixels: .max).workers == 1)
    }
}
