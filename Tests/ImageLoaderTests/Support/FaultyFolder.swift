import Foundation
import ImageLoaderSupport

@testable import ImageLoader

/// The disk cache's folder as a test wants it: the real file system, with writes that
/// fail as a full or read-only disk would, and actions run once at a rescan's steps
/// (the entries folder just listed; an entry missing from that listing looked at again).
final class FaultyFolder: CacheFolderAccess {
    private let local = LocalFolder()
    /// Asked before every file written; an errno it returns fails the write (ENOSPC, EROFS).
    let writeFault = Lock<(@Sendable (String) -> Int32?)?>(nil)
    /// Runs once, after the next listing of the entries folder.
    let afterListing = Lock<(@Sendable () -> Void)?>(nil)
    /// Runs once, when an entry that the listing `afterListing` followed did not have is
    /// looked at again (the rescan that listed it counting what it missed).
    let onUnlistedStatus = Lock<(@Sendable () -> Void)?>(nil)
    /// The listing `afterListing` followed, and whether its action is running (a write
    /// in it may run a rescan of its own, whose calls are not the listing rescan's).
    private let acted = Lock<(listing: Set<String>, running: Bool)?>(nil)

    func list(_ directory: String) -> [String] {
        let names = local.list(directory)
        guard directory.hasSuffix("/entries"), let action = FaultyFolder.take(afterListing) else { return names }
        acted.withLock { $0 = (Set(names), true) }
        action()
        acted.withLock { $0?.running = false }
        return names
    }

    func status(_ path: String) -> FileStatus? {
        let status = local.status(path)
        let parts = path.split(separator: "/")
        if parts.dropLast().last == "entries", let name = parts.last,
            acted.withLock({ $0.map { !$0.running && !$0.listing.contains(String(name)) } ?? false })
        {
            FaultyFolder.take(onUnlistedStatus)?()
        }
        return status
    }

    func exists(_ path: String) -> Bool { local.exists(path) }

    func read(_ path: String, maxBytes: Int) -> [UInt8]? { local.read(path, maxBytes: maxBytes) }

    func write(_ bytes: [UInt8], to path: String, through temporary: String) throws(SystemError) {
        if let fault = writeFault.withLock({ $0 }), let code = fault(path) {
            throw SystemError("open", path: temporary, code: code)
        }
        try local.write(bytes, to: path, through: temporary)
    }

    func remove(_ path: String) { local.remove(path) }

    /// The action held in `action`, emptying it, so it runs once.
    private static func take(_ action: Lock<(@Sendable () -> Void)?>) -> (@Sendable () -> Void)? {
        action.withLock { action in
            defer { action = nil }
            return action
        }
    }
}
