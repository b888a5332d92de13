import ArgumentParser
import Foundation
import ImageLoader

/// `imageloader cache`: each verb removes exactly what its name says, takes only the
/// options it honours (any other is a usage error, not ignored), and with `--dry-run`
/// lists what it would remove instead.
struct CacheCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cache",
        abstract: "Look at or clean the disk cache.",
        discussion: """
            stats and list look; verify, prune and remove-all remove, each exactly what its name says, \
            and with --dry-run list what they would remove instead.
            """,
        subcommands: [
            Stats.self, List.self, Verify.self, Prune.self, RemoveAll.self, Renamed.Clear.self, Renamed.Purge.self,
        ]
    )

    /// The cache's folder, common to every verb.
    struct Folder: ParsableArguments {
        @Option(help: "The disk cache's folder (default: $XDG_CACHE_HOME/imageloader or ~/.cache/imageloader).")
        var cacheDir: String?

        func open() throws -> DiskCache {
            let directory = cacheDir ?? DiskCache.defaultDirectory()
            do {
                return try DiskCache(directory: directory)
            } catch {
                throw CommandFailure("cannot open the cache in \(directory): \(Terminal.describe(error))")
            }
        }
    }

    /// An age and the date it is compared with, for the verbs that select by age.
    struct Age: ParsableArguments {
        @Option(help: "An age such as 90s, 30m, 12h, 7d or 2w.")
        var olderThan: String

        @Option(help: "Which date counts: modified (last written) or created (first stored).")
        var by: DiskCache.DateKind = .modified

        var seconds: TimeInterval {
            get throws { try Age.parse(olderThan) }
        }

        func validate() throws { _ = try seconds }

        /// `text` in seconds, or a usage error that says how to write an age.
        static func parse(_ text: String) throws -> TimeInterval {
            guard let seconds = seconds(text) else {
                throw ValidationError("cannot read the age \(text): give a number and s, m, h, d or w, as 7d")
            }
            return seconds
        }

        /// "90", "90s", "30m", "12h", "7d", "2w" in seconds.
        static func seconds(_ text: String) -> TimeInterval? {
            let units: [Character: TimeInterval] = ["s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800]
            guard let last = text.last else { return nil }
            if let unit = units[last], let value = Double(text.dropLast()), value >= 0, value.isFinite {
                return value * unit
            }
            return Double(text).flatMap { $0 >= 0 && $0.isFinite ? $0 : nil }
        }
    }

    /// Prints the entries a verb would remove, and their count and bytes.
    static func printDryRun(_ entries: [DiskCache.EntryDescription], verb: String) {
        for entry in entries { print(line(entry)) }
        let bytes = entries.reduce(0) { $0 + $1.bytes }
        print("\(verb) would remove \(entries.count) \(entries.count == 1 ? "entry" : "entries") (\(bytes) bytes)")
    }

    /// One entry in a line: its date, kind, size and URL.
    static func line(_ entry: DiskCache.EntryDescription) -> String {
        let date = ISO8601DateFormatter().string(from: entry.modified)
        let kind = entry.isFailure ? "failure " : "response"
        return
            "\(date)  \(kind)  \(String(entry.bytes).leftPadded(to: 9))  \(entry.url ?? "(unreadable: \(entry.file))")"
    }

    static func removed(_ count: Int) -> String { "removed \(count) \(count == 1 ? "entry" : "entries")" }

    struct Stats: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the number of entries and bytes, and the damaged entries found since the folder was made.")

        @OptionGroup var folder: Folder

        func run() throws {
            let cache = try folder.open()
            let stats = cache.statistics
            Terminal.printJSON([
                "directory": .string(cache.directory), "entries": .int(stats.entries),
                "failures": .int(stats.failures), "bytes": .int(stats.bytes), "maxBytes": .int(stats.maxBytes),
                "corruptEntriesRemoved": .int(stats.corruptEntriesRemoved),
            ])
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the entries (last written, kind, bytes, URL), oldest first; removes nothing.")

        @OptionGroup var folder: Folder

        @Option(help: "Only entries older than this age, such as 7d (what prune would remove).")
        var olderThan: String?

        @Option(help: "With --older-than: which date counts, modified or created.")
        var by: DiskCache.DateKind = .modified

        func validate() throws {
            if let olderThan { _ = try Age.parse(olderThan) }
        }

        func run() throws {
            let entries = try folder.open().entries(olderThan: olderThan.flatMap(Age.seconds), by: by)
            for entry in entries { print(CacheCommand.line(entry)) }
        }
    }

    struct Verify: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Read every entry, check its checksums, and remove the damaged ones.")

        @OptionGroup var folder: Folder

        @Flag(help: "List the damaged entries instead of removing them.")
        var dryRun = false

        func run() throws {
            let cache = try folder.open()
            if dryRun {
                let damaged = cache.damagedEntries()
                for file in damaged { print("damaged: \(file)") }
                print("verify would remove \(damaged.count) \(damaged.count == 1 ? "entry" : "entries")")
                return
            }
            let (checked, removed) = cache.verifyAll()
            Terminal.printJSON(["checked": .int(checked), "removed": .int(removed)])
        }
    }

    struct Prune: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove the entries older than an age (by last written, or first stored), and only those.")

        @OptionGroup var folder: Folder
        @OptionGroup var age: Age

        @Flag(help: "List what would be removed instead of removing it.")
        var dryRun = false

        func run() throws {
            let cache = try folder.open()
            let seconds = try age.seconds
            if dryRun {
                CacheCommand.printDryRun(cache.entries(olderThan: seconds, by: age.by), verb: "prune")
                return
            }
            let count = cache.removeEntries(olderThan: seconds, by: age.by)
            print("\(CacheCommand.removed(count)) \(age.by.rawValue) more than \(age.olderThan) ago")
        }
    }

    struct RemoveAll: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "remove-all", abstract: "Remove every entry and remembered failure.")

        @OptionGroup var folder: Folder

        @Flag(help: "List what would be removed instead of removing it.")
        var dryRun = false

        func run() throws {
            let cache = try folder.open()
            if dryRun {
                CacheCommand.printDryRun(cache.entries(), verb: "remove-all")
                return
            }
            let count = cache.statistics.entries + cache.statistics.failures
            cache.removeAll()
            print(CacheCommand.removed(count))
        }
    }

    /// The verbs prune and remove-all replace: they remove nothing and say what to use instead
    /// (`purge --older-than 7d` removed everything, ignoring the age).
    enum Renamed {
        struct Clear: ParsableCommand {
            static let configuration = CommandConfiguration(shouldDisplay: false)
            @Argument(parsing: .allUnrecognized) var rest: [String] = []
            func validate() throws {
                throw ValidationError("clear is now prune: imageloader cache prune --older-than 7d [--by created]")
            }
        }

        struct Purge: ParsableCommand {
            static let configuration = CommandConfiguration(shouldDisplay: false)
            @Argument(parsing: .allUnrecognized) var rest: [String] = []
            func validate() throws {
                throw ValidationError(
                    "purge is now remove-all (it removes every entry); to remove old entries only: "
                        + "imageloader cache prune --older-than 7d")
            }
        }
    }
}

extension DiskCache.DateKind: ExpressibleByArgument {}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
