import Foundation
import ImageLoaderSupport

// The folder as other processes share it: the access index read and reconciled with the
// files present, and the folder read again when someone else wrote to it.
extension DiskCache {
    // MARK: Sharing the folder with other processes

    func folderStamp() -> FileStatus? {
        folder.status(entriesDirectory)
    }

    /// Whether the entries folder changed since this process last wrote to it.
    func folderChangedByOthers() -> Bool {
        let now = folderStamp()
        let last = state.withLock { $0.folderStamp }
        return now != last
    }

    /// Reads the folder again, so entries other processes wrote (or removed) count
    /// toward ``maxBytes``, and their fresh entries are not taken for old ones.
    func rescanFolder() {
        let saved = savedIndex()
        let onDisk = loadIndex(saved: saved)
        // Entries this process wrote while the folder was being listed are not in the
        // listing: their files are looked at again, so the index does not lose them (it
        // did, under concurrent writes: 28 of 10,000 entries in a benchmark). The others
        // missing from the listing were removed, by another process or this one.
        let unlisted = state.withLock { state in Set(state.index.keys.filter { onDisk.index[$0] == nil }) }
        let stillThere = unlisted.compactMap { name in folder.status(file(named: name)).map { (name, $0.size) } }
        let now = clock().timeIntervalSince1970
        state.withLock { state in
            // Files on disk are the truth of what exists; when an entry was last used is
            // the later of this process's record and the saved index's (another process's
            // hits); an entry new to this process that the saved index does not know yet
            // was written by another process since the last look: it counts as used now.
            var merged = onDisk.index
            for (name, entry) in merged {
                if var mine = state.index[name] {
                    mine.size = entry.size
                    if let theirs = saved[name] { mine.lastAccess = max(mine.lastAccess, theirs.lastAccess) }
                    merged[name] = mine
                } else if saved[name] == nil {
                    merged[name]?.lastAccess = now
                }
            }
            for (name, size) in stillThere {
                guard var mine = state.index[name], merged[name] == nil else { continue }
                mine.size = size
                merged[name] = mine
            }
            // Entries written since the unlisted ones were looked at are in neither: kept
            // (one of 10,000 was lost this way in a benchmark, in one run of three).
            for (name, mine) in state.index where merged[name] == nil && !unlisted.contains(name) {
                merged[name] = mine
            }
            state.index = merged
            state.totalBytes = merged.values.reduce(0) { Checked.saturatingAdd($0, $1.size) }
            state.bytesSinceRescan = 0
            state.lastRescan = clock()
            state.folderStamp = onDisk.folderStamp
        }
    }

    // MARK: The index

    /// Reads the access index, then reconciles it with the files present: entries written
    /// after the index was last saved are found by their file dates.
    func loadIndex(saved: [String: IndexEntry]? = nil) -> State {
        var state = State()
        state.index = saved ?? savedIndex()
        let files = folder.list(entriesDirectory)
        var present: [String: IndexEntry] = [:]
        for file in files {
            let name: String
            if file.hasSuffix(FileKind.response.suffix) {
                name = String(file.dropLast(FileKind.response.suffix.count))
            } else if file.hasSuffix(FileKind.failure.suffix) {
                name = file
            } else {
                continue
            }
            guard let status = folder.status(entriesDirectory + "/" + file) else { continue }
            let modified = status.modified
            var entry =
                state.index[name] ?? IndexEntry(size: 0, lastAccess: modified, created: modified, modified: modified)
            entry.size = status.size
            present[name] = entry
        }
        state.index = present
        state.totalBytes = present.values.reduce(0) { Checked.saturatingAdd($0, $1.size) }
        state.lastFlush = clock()
        state.folderStamp = folderStamp()
        return state
    }

    /// The access index as last written (by this process or another sharing the folder).
    func savedIndex() -> [String: IndexEntry] {
        guard let bytes = readFile(indexPath),
            let saved = try? JSONDecoder().decode([String: IndexEntry].self, from: Data(bytes))
        else { return [:] }
        return saved
    }
}
