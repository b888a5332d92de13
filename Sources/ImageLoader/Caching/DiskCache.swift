import Crypto
import Foundation
import ImageLoaderSupport
import Logging
import RasterImage

/// A cache of HTTP responses on disk that survives restarts.
///
/// Every key (the URL with its query) has one file, named by the SHA-256 of the key,
/// holding the body and its metadata together (status, headers, validators, Vary and
/// the request headers it names, request and response times), each with its CRC32C.
/// A file is written to a temporary name and renamed into place, so no reader ever
/// sees half an entry, even after `kill -9`. Every read checks both checksums before
/// the bytes leave the cache: an entry whose bytes changed after it was written (a
/// zeroed page after a power loss, another program writing into the folder, bit rot)
/// is removed and reported as absent, so the load asks the origin again; each one is
/// counted (``Statistics/corruptEntriesRemoved``, kept in the folder across restarts)
/// and logged once as a warning. Last access is kept in the cache's own index (not the file
/// system's atime) and drives least-recently-used eviction past ``maxBytes``.
///
/// ```swift
/// let cache = try DiskCache()                              // ~/.cache/imageloader
/// try cache.removeEntries(olderThan: DiskCache.oneWeek, by: .modified)
/// try cache.remove(url: "https://example.com/cat.jpg")
/// print(cache.statistics)
/// ```
public final class DiskCache: Sendable {
    /// Which date a clean-up compares.
    public enum DateKind: String, Sendable, Codable {
        /// When the entry was last written (stored, or updated by a revalidation).
        case modified
        /// When the entry was first stored.
        case created
    }

    /// A day in seconds, for ``removeEntries(olderThan:by:)``.
    public static let oneDay: TimeInterval = 86_400
    /// A week in seconds, for ``removeEntries(olderThan:by:)``.
    public static let oneWeek: TimeInterval = 7 * 86_400

    /// How full the cache is.
    public struct Statistics: Sendable, Hashable, CustomStringConvertible {
        /// Stored responses.
        public let entries: Int
        /// Remembered failures.
        public let failures: Int
        /// Bytes on disk, both kinds of files.
        public let bytes: Int
        /// The size limit.
        public let maxBytes: Int
        /// Entries found damaged (a checksum that no longer matches, a file cut short or
        /// overwritten) and removed, since the folder was created, by every process
        /// that used it. (Processes that find damage at the same moment may count one
        /// less between them.)
        public let corruptEntriesRemoved: Int

        /// One line: entries, failures, bytes and the limit.
        public var description: String {
            "\(entries) entries, \(failures) remembered failures, \(bytes) of \(maxBytes) bytes"
                + (corruptEntriesRemoved > 0 ? ", \(corruptEntriesRemoved) damaged entries removed" : "")
        }
    }

    struct IndexEntry: Codable, Sendable {
        var size: Int
        var lastAccess: Double
        var created: Double
        var modified: Double
    }

    struct State {
        var index: [String: IndexEntry] = [:]
        var totalBytes = 0
        /// Entries written or removed since the index was last written.
        var changesSinceFlush = 0
        /// Whether anything in the index (an access time included) differs from what was last written.
        var isDirty = false
        var lastFlush = Date.distantPast
        /// Bytes stored since the folder was last read again (another process may share it), and when.
        var bytesSinceRescan = 0
        var lastRescan = Date.distantPast
        /// The entries folder's modification time after this process's last write:
        /// when it differs, someone else wrote.
        var folderStamp: FileStatus?
    }

    /// Every file-system call inside the folder goes through it.
    let folder: any CacheFolderAccess
    /// Told of every damaged entry removed (the loader counts them in its statistics).
    let corruptionObserver = Lock<(@Sendable () -> Void)?>(nil)
    private let logger: Logger
    /// Held while the counters file is read and written again.
    private let countersFile = Lock(())

    /// The folder: `entries/`, `tmp/` and the access index.
    public let directory: String
    /// Past this many bytes of entries, the least recently used are removed.
    public let maxBytes: Int
    let clock: @Sendable () -> Date
    let state: Lock<State>

    var entriesDirectory: String { directory + "/entries" }
    var temporaryDirectory: String { directory + "/tmp" }
    var indexPath: String { directory + "/index.json" }
    private var countersPath: String { directory + "/counters.json" }

    /// `$XDG_CACHE_HOME/imageloader`, else `~/.cache/imageloader`, as the XDG base
    /// directory specification asks.
    public static func defaultDirectory() -> String {
        let environment = ProcessInfo.processInfo.environment
        if let xdg = environment["XDG_CACHE_HOME"], xdg.hasPrefix("/") { return xdg + "/imageloader" }
        let home = environment["HOME"] ?? FileManager.default.homeDirectoryForCurrentUser.path
        return home + "/.cache/imageloader"
    }

    /// Opens (creating it if needed) the cache in `directory`, reading its index and
    /// the entries on disk. Damaged entries are reported to `logger`.
    public convenience init(
        directory: String = DiskCache.defaultDirectory(), maxBytes: Int = 512 << 20,
        clock: @escaping @Sendable () -> Date = { Date() }, logger: Logger = Logger(label: "imageloader.disk-cache")
    ) throws {
        try self.init(directory: directory, maxBytes: maxBytes, clock: clock, logger: logger, folder: LocalFolder())
    }

    /// The cache, making its file-system calls inside the folder through `folder`.
    init(
        directory: String, maxBytes: Int = 512 << 20, clock: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "imageloader.disk-cache"), folder: any CacheFolderAccess
    ) throws {
        self.folder = folder
        self.directory = directory
        self.maxBytes = maxBytes
        self.clock = clock
        self.logger = logger
        state = Lock(State())
        // Only this user reads the cache: folders 0700, files 0600.
        for folder in [directory, directory + "/entries", directory + "/tmp"] {
            try FileManager.default.createDirectory(
                atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        let loaded = loadIndex()
        state.withLock { $0 = loaded }
        removeStaleTemporaryFiles()
    }

    // MARK: Keys

    /// The file name for a key: the hex SHA-256 of the key's UTF-8.
    static func hash(of key: String) -> String {
        Hex.lowercase(SHA256.hash(data: Array(key.utf8)))
    }

    private func path(_ hash: String, _ kind: FileKind) -> String { entriesDirectory + "/" + hash + kind.suffix }

    enum FileKind: CaseIterable {
        case response
        case failure

        var suffix: String { self == .response ? ".response" : ".failure" }
        var entryKind: EntryFile.Kind { self == .response ? .response : .failure }
    }

    // MARK: Responses

    /// The stored response and body for `key`, or `nil`. An entry that cannot be read
    /// whole, whose checksums do not match (``EntryFile``), or that belongs to another
    /// key is removed and reported as absent; an entry in the format before checksums is
    /// removed the same way (the next load stores it again), without counting as damage.
    func response(for key: String) -> (response: StoredResponse, body: [UInt8])? {
        let hash = DiskCache.hash(of: key)
        guard let bytes = readFile(path(hash, .response)) else {
            // Something is there that cannot be an entry (a link, a device, a giant): remove it.
            if folder.exists(path(hash, .response)) { remove(hash: hash, kind: .response) }
            return nil
        }
        guard
            let (metadata, body) = checked(
                EntryFile.decode(bytes, kind: .response), hash: hash, kind: .response, key: key),
            let response = try? JSONDecoder().decode(StoredResponse.self, from: Data(metadata)), response.url == key
        else {
            remove(hash: hash, kind: .response)
            return nil
        }
        touch(hash)
        return (response, body)
    }

    /// The parts of a decoded file; a damaged one is counted and logged (the caller removes it).
    private func checked(_ decoded: EntryFile.Decoded, hash: String, kind: FileKind, key: String) -> (
        [UInt8], [UInt8]
    )? {
        switch decoded {
        case .valid(let metadata, let body): return (metadata, body)
        case .earlierFormat: return nil
        case .damaged(let why):
            reportDamage(key: key, file: hash + kind.suffix, why: why)
            return nil
        }
    }

    /// Counts a damaged entry (in the folder's counters and for the observer) and logs it.
    func reportDamage(key: String, file: String, why: String) {
        logger.warning(
            "damaged disk-cache entry removed", metadata: ["key": "\(key)", "file": "\(file)", "reason": "\(why)"])
        countersFile.withLock { _ in
            // Read, add, write under the lock: this process's reports do not race each other.
            var counters = savedCounters()
            counters.corruptEntriesRemoved = Checked.saturatingAdd(counters.corruptEntriesRemoved, 1)
            if let data = try? JSONEncoder().encode(counters) { try? write([UInt8](data), to: countersPath) }
        }
        corruptionObserver.withLock { $0 }?()
    }

    /// Reads every entry and remembered failure, checking them as a load would, and
    /// removes those that are damaged or unreadable. Returns how many were checked and
    /// how many removed. (`imageloader cache verify`.)
    ///
    /// ```swift
    /// let (checked, removed) = cache.verifyAll()
    /// ```
    @discardableResult
    public func verifyAll() -> (checked: Int, removed: Int) {
        let (checked, damaged) = check(removing: true)
        return (checked, damaged.count)
    }

    /// The file names (in the `entries` folder) of the entries ``verifyAll()`` would
    /// remove: read and checked the same way, but nothing is removed, counted or logged.
    /// (`imageloader cache verify --dry-run`.)
    public func damagedEntries() -> [String] {
        check(removing: false).damaged
    }

    /// Reads every entry as a load would: how many there are, and the files of those
    /// damaged or unreadable (removed, counted and logged when `removing`).
    private func check(removing: Bool) -> (checked: Int, damaged: [String]) {
        let names = state.withLock { Array($0.index.keys) }.sorted()
        var damaged: [String] = []
        for name in names {
            let kind: FileKind = name.hasSuffix(FileKind.failure.suffix) ? .failure : .response
            let hash = kind == .failure ? String(name.dropLast(FileKind.failure.suffix.count)) : name
            let file = path(hash, kind)
            let whole = readFile(file).map { bytes -> Bool in
                let decoded = EntryFile.decode(bytes, kind: kind.entryKind)
                if removing, case .damaged(let why) = decoded {
                    reportDamage(key: hash, file: hash + kind.suffix, why: why)
                }
                if case .valid = decoded { return true }
                return false
            }
            if whole != true {
                damaged.append(hash + kind.suffix)
                if removing { remove(hash: hash, kind: kind) }
            }
        }
        if removing { flush() }
        return (names.count, damaged)
    }

    /// Stores (or replaces) the entry for the response's URL, then evicts past the limit.
    func store(_ response: StoredResponse, body: [UInt8]) throws {
        let hash = DiskCache.hash(of: response.url)
        let bytes = try EntryFile.encode(response, body: body)
        let created = state.withLock { $0.index[hash]?.created }
        let othersWrote = folderChangedByOthers()
        try write(bytes, to: path(hash, .response))
        record(hash, size: bytes.count, kind: .response, keepingCreated: created)
        let (now, stamp) = (clock(), folderStamp())
        let rescan = state.withLock { state -> Bool in
            state.bytesSinceRescan += bytes.count
            // Read before the lock: a stat is a system call, and every lookup takes this lock.
            state.folderStamp = stamp
            // Reading the folder costs a stat a file: when others wrote, at most once a
            // second; otherwise after a sixteenth of the limit written, so that processes
            // writing at once overshoot `maxBytes` by a sixteenth each at most.
            let others = othersWrote && now.timeIntervalSince(state.lastRescan) >= 1
            return others || state.bytesSinceRescan >= max(1, maxBytes / 16)
        }
        if rescan { rescanFolder() }
        evictIfNeeded()
    }

    /// Replaces the stored response's metadata, keeping its body (after a 304).
    func update(_ response: StoredResponse) throws {
        let hash = DiskCache.hash(of: response.url)
        guard let (_, body) = self.response(for: response.url) else { return }
        let created = state.withLock { $0.index[hash]?.created }
        let bytes = try EntryFile.encode(response, body: body)
        try write(bytes, to: path(hash, .response))
        record(hash, size: bytes.count, kind: .response, keepingCreated: created)
    }

    /// The stored response for a URL (its metadata, without the body), or `nil`.
    public func storedResponse(for url: String) -> StoredResponse? {
        response(for: url)?.response
    }

    // MARK: Remembered failures

    func failure(for key: String) -> FailureRecord? {
        let hash = DiskCache.hash(of: key)
        guard hasFailure(hash: hash), let bytes = readFile(path(hash, .failure)) else {
            return nil
        }
        guard
            let (metadata, _) = checked(EntryFile.decode(bytes, kind: .failure), hash: hash, kind: .failure, key: key),
            let record = try? JSONDecoder().decode(FailureRecord.self, from: Data(metadata)), record.url == key
        else {
            remove(hash: hash, kind: .failure)
            return nil
        }
        return record
    }

    /// Whether a failure is recorded for `key`, from the index alone (no file read):
    /// loads ask this first, since almost none has one.
    func hasFailure(for key: String) -> Bool {
        hasFailure(hash: DiskCache.hash(of: key))
    }

    private func hasFailure(hash: String) -> Bool {
        state.withLock { $0.index[hash + FileKind.failure.suffix] != nil }
    }

    func store(_ failure: FailureRecord) throws {
        let hash = DiskCache.hash(of: failure.url)
        let data = EntryFile.encode(metadata: [UInt8](try JSONEncoder().encode(failure)), body: [], kind: .failure)
        try write(data, to: path(hash, .failure))
        record(hash + FileKind.failure.suffix, size: data.count, kind: .failure, keepingCreated: nil)
    }

    func removeFailure(for key: String) {
        remove(hash: DiskCache.hash(of: key), kind: .failure)
    }

    // MARK: Clean-up

    /// Removes the entry (and any remembered failure) of one URL.
    public func remove(url: String) {
        let hash = DiskCache.hash(of: url)
        for kind in FileKind.allCases { remove(hash: hash, kind: kind) }
    }

    /// Removes every entry whose date (`by`) is older than `age` seconds. Returns how many.
    /// ``entries(olderThan:by:)`` lists the same entries without removing them.
    @discardableResult
    public func removeEntries(olderThan age: TimeInterval, by kind: DateKind) -> Int {
        let victims = names(olderThan: age, by: kind)
        for name in victims { removeFile(named: name) }
        flush()
        return victims.count
    }

    /// One entry of the cache, as ``entries(olderThan:by:)`` lists it.
    public struct EntryDescription: Sendable, Hashable {
        /// The URL (the cache key) the entry is for; `nil` when its file cannot be read
        /// or is damaged (``verifyAll()`` removes such entries).
        public let url: String?
        /// Whether the entry is a remembered failure rather than a stored response.
        public let isFailure: Bool
        /// Bytes on disk.
        public let bytes: Int
        /// When the entry was first stored.
        public let created: Date
        /// When the entry was last written.
        public let modified: Date
        /// When the entry was last used.
        public let lastAccess: Date
        /// The entry's file name in the cache's `entries` folder.
        public let file: String
    }

    /// The entries (stored responses and remembered failures), oldest first by `kind`;
    /// with `age`, only those whose date is more than `age` seconds ago: exactly what
    /// ``removeEntries(olderThan:by:)`` would remove. Reads each entry's metadata, not its body.
    ///
    /// ```swift
    /// for entry in cache.entries(olderThan: DiskCache.oneWeek, by: .modified) {
    ///     print(entry.url ?? entry.file, entry.bytes)
    /// }
    /// ```
    public func entries(olderThan age: TimeInterval? = nil, by kind: DateKind = .modified) -> [EntryDescription] {
        let chosen = age.map { Set(names(olderThan: $0, by: kind)) }
        let index = state.withLock { $0.index }
        return index.filter { chosen?.contains($0.key) ?? true }.map { name, entry in
            let failure = name.hasSuffix(FileKind.failure.suffix)
            let path = file(named: name)
            return EntryDescription(
                url: EntryFile.key(ofFileAt: path, kind: failure ? .failure : .response), isFailure: failure,
                bytes: entry.size, created: Date(timeIntervalSince1970: entry.created),
                modified: Date(timeIntervalSince1970: entry.modified),
                lastAccess: Date(timeIntervalSince1970: entry.lastAccess),
                file: String(path.dropFirst(entriesDirectory.count + 1)))
        }.sorted {
            kind == .modified
                ? ($0.modified, $0.file) < ($1.modified, $1.file) : ($0.created, $0.file) < ($1.created, $1.file)
        }
    }

    /// The index names of the entries whose date (`kind`) is more than `age` seconds ago.
    private func names(olderThan age: TimeInterval, by kind: DateKind) -> [String] {
        let cutoff = clock().timeIntervalSince1970 - age
        return state.withLock { state in
            state.index.filter { (kind == .modified ? $0.value.modified : $0.value.created) < cutoff }.map(\.key)
        }
    }

    /// Removes everything.
    public func removeAll() {
        let names = state.withLock { Array($0.index.keys) }
        for name in names { removeFile(named: name) }
        // Anything else in the folder too, a folder left there included.
        for name in folder.list(entriesDirectory) {
            try? FileManager.default.removeItem(atPath: entriesDirectory + "/" + name)
        }
        state.withLock { $0 = State() }
        flush()
    }

    /// What the cache holds now.
    public var statistics: Statistics {
        let corrupt = savedCounters().corruptEntriesRemoved
        return state.withLock { state in
            let failures = state.index.keys.filter { $0.hasSuffix(FileKind.failure.suffix) }.count
            return Statistics(
                entries: state.index.count - failures, failures: failures, bytes: state.totalBytes, maxBytes: maxBytes,
                corruptEntriesRemoved: corrupt)
        }
    }

    /// What the folder has counted across processes and restarts.
    private struct Counters: Codable {
        var corruptEntriesRemoved = 0
    }

    private func savedCounters() -> Counters {
        guard let bytes = folder.read(countersPath, maxBytes: 4096),
            let counters = try? JSONDecoder().decode(Counters.self, from: Data(bytes))
        else { return Counters() }
        return Counters(corruptEntriesRemoved: max(0, counters.corruptEntriesRemoved))
    }

    /// Writes the access index now if anything in it changed since it was last
    /// written (it is otherwise written after 64 entries are written or removed, or
    /// when a change comes 10 seconds after the last write).
    public func flush() {
        let snapshot = state.withLock { state -> [String: IndexEntry]? in
            guard state.isDirty else { return nil }
            state.changesSinceFlush = 0
            state.isDirty = false
            state.lastFlush = clock()
            return state.index
        }
        guard let snapshot, let data = try? JSONEncoder().encode(snapshot) else { return }
        try? write([UInt8](data), to: indexPath)
    }

    // MARK: Internals

    /// Index keys are file names without the `.response` suffix (so a response's key is
    /// its hash) and with `.failure` for failure records.
    private func indexName(_ hash: String, _ kind: FileKind) -> String {
        kind == .response ? hash : hash + FileKind.failure.suffix
    }

    /// The file of the entry with index name `name`.
    func file(named name: String) -> String {
        entriesDirectory + "/" + (name.hasSuffix(FileKind.failure.suffix) ? name : name + FileKind.response.suffix)
    }

    private func removeFile(named name: String) {
        folder.remove(file(named: name))
        let stamp = folderStamp()
        state.withLock { state in
            if let entry = state.index.removeValue(forKey: name) {
                state.totalBytes -= entry.size
                state.isDirty = true
            }
            state.folderStamp = stamp
        }
    }

    private func remove(hash: String, kind: FileKind) {
        removeFile(named: indexName(hash, kind))
    }

    /// `name` is the index name: the hash for a response, the hash and `.failure` for a failure.
    private func record(_ name: String, size: Int, kind: FileKind, keepingCreated created: Double?) {
        let now = clock().timeIntervalSince1970
        let needsFlush = state.withLock { state -> Bool in
            if let old = state.index[name] { state.totalBytes -= old.size }
            state.index[name] = IndexEntry(size: size, lastAccess: now, created: created ?? now, modified: now)
            state.totalBytes += size
            return noteChange(&state)
        }
        if needsFlush { flush() }
    }

    private func touch(_ hash: String) {
        let now = clock().timeIntervalSince1970
        let needsFlush = state.withLock { state -> Bool in
            guard state.index[hash] != nil else { return false }
            state.index[hash]?.lastAccess = now
            // An access time alone is not worth writing the whole index for (a hit-heavy
            // process rewrote it every 64 hits): it goes with the next write, or alone
            // once the last write is 10 seconds old.
            state.isDirty = true
            return clock().timeIntervalSince(state.lastFlush) > 10
        }
        if needsFlush { flush() }
    }

    /// An entry was written: the index is written after 64 of them, or 10 seconds after its last write.
    private func noteChange(_ state: inout State) -> Bool {
        state.changesSinceFlush += 1
        state.isDirty = true
        return state.changesSinceFlush >= 64 || clock().timeIntervalSince(state.lastFlush) > 10
    }

    /// Removes the least recently used entries until the cache is at 90% of its limit.
    private func evictIfNeeded() {
        let victims = state.withLock { state -> [String] in
            guard state.totalBytes > maxBytes else { return [] }
            var bytes = state.totalBytes
            var names: [String] = []
            for (name, entry) in state.index.sorted(by: { $0.value.lastAccess < $1.value.lastAccess }) {
                if bytes <= maxBytes * 9 / 10 { break }
                bytes -= entry.size
                names.append(name)
            }
            return names
        }
        for name in victims { removeFile(named: name) }
        if !victims.isEmpty { flush() }
    }

    /// The bytes of a regular file of the cache, or `nil`: a symbolic link, a device, a
    /// folder, or a file larger than the whole cache may hold (someone else's, or
    /// damage) is not read, so a bad entry cannot make a load read without end.
    func readFile(_ path: String) -> [UInt8]? {
        folder.read(path, maxBytes: max(maxBytes, 1 << 20))
    }

    /// Writes to a temporary file in the cache, then renames it over `path`: readers
    /// see the old file or the new one, never part of one.
    private func write(_ bytes: [UInt8], to path: String) throws {
        do {
            try folder.write(
                bytes, to: path, through: temporaryDirectory + "/" + FileSystem.temporaryName())
        } catch {
            throw DiskCacheError(path: error.path ?? path, errno: error.code)
        }
    }

    /// Temporary files left by a process that died mid-write.
    func removeStaleTemporaryFiles() {
        let cutoff = clock().timeIntervalSince1970 - 3_600
        for file in folder.list(temporaryDirectory) {
            let path = temporaryDirectory + "/" + file
            if let status = folder.status(path), Double(status.modifiedSeconds) < cutoff { folder.remove(path) }
        }
    }
}
