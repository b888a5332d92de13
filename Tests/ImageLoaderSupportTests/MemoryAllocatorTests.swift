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
            contentsOfFile: FixturePaths.root + "/../Sources/ImageLoader/ImageLoader.docc/UsingInAServer.md",
            encoding: .utf8)
        let line = try #require(article.split(separator: "\n").first { $0.contains("GLIBC_TUNABLES=") })
        #expect(line.contains("glibc.malloc.mmap_threshold=\(MemoryAllocator.largestArenaBlock)"))
        #expect(line.contains("glibc.malloc.trim_threshold=\(MemoryAllocator.keptFreeMemory)"))
        #expect(line.contains("glibc.malloc.arena_max="))
        // What the environment then sets is what keepImageBuffers would have set, so it stands.
        let value = String(line.drop { $0 != "=" }.dropFirst())
        #expect(!MemoryAllocator.keepImageBuffers(environment: ["GLIBC_TUNABLES": value]))
    }
}
