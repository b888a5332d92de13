import ArgumentParser
import Foundation
import ImageLoader

struct CacheCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cache",
        abstract: "Look at or clean the disk cache.",
        discussion: """
            stats prints the number of entries and bytes, and how many damaged entries (whose \
            checksums no longer matched) were found and removed since the folder was made. verify \
            reads every entry, checks its checksums and removes those that are damaged. clear \
            removes entries older than --older-than (by modification or creation date). purge \
            removes everything.
            """
    )

    enum Action: String, ExpressibleByArgument, CaseIterable {
        case stats
        case verify
        case clear
        case purge
    }

    enum DateKind: String, ExpressibleByArgument, CaseIterable {
        case modified
        case created
    }

    @Argument(help: "stats, verify, clear or purge.")
    var action: Action

    @Option(help: "The disk cache's folder (default: $XDG_CACHE_HOME/imageloader or ~/.cache/imageloader).")
    var cacheDir: String?

    @Option(help: "With clear: an age such as 90s, 30m, 12h, 7d or 2w.")
    var olderThan: String?

    @Option(help: "With clear: which date counts, modified or created.")
    var by: DateKind = .modified

    func validate() throws {
        if action == .clear {
            guard let olderThan else { throw ValidationError("clear needs --older-than") }
            guard CacheCommand.seconds(olderThan) != nil else {
                throw ValidationError("cannot read the age \(olderThan)")
            }
        }
    }

    /// "90", "90s", "30m", "12h", "7d", "2w" in seconds.
    static func seconds(_ text: String) -> TimeInterval? {
        let units: [Character: TimeInterval] = ["s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800]
        guard let last = text.last else { return nil }
        if let unit = units[last], let value = Double(text.dropLast()), value >= 0 { return value * unit }
        return Double(text).flatMap { $0 >= 0 ? $0 : nil }
    }

    func run() throws {
        let cache: DiskCache
        do {
            cache = try DiskCache(directory: cacheDir ?? DiskCache.defaultDirectory())
        } catch {
            throw CommandFailure("cannot open the cache: \(error)")
        }
        switch action {
        case .stats:
            let stats = cache.statistics
            Terminal.printJSON([
                "directory": .string(cache.directory), "entries": .int(stats.entries),
                "failures": .int(stats.failures), "bytes": .int(stats.bytes), "maxBytes": .int(stats.maxBytes),
                "corruptEntriesRemoved": .int(stats.corruptEntriesRemoved),
            ])
        case .verify:
            let (checked, removed) = cache.verifyAll()
            Terminal.printJSON(["checked": .int(checked), "removed": .int(removed)])
        case .clear:
            let removed = cache.removeEntries(
                olderThan: CacheCommand.seconds(olderThan!)!, by: by == .modified ? .modified : .created)
            print("removed \(removed) entries \(by.rawValue) more than \(olderThan!) ago")
        case .purge:
            let count = cache.statistics.entries + cache.statistics.failures
            cache.removeAll()
            print("removed \(count) entries")
        }
    }
}
