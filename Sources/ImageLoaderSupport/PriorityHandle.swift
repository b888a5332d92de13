/// A priority that can change while its work waits: a load's own (the highest of its
/// callers'), or a shared run's, the highest of the handles that wait on it. Ranks are
/// plain integers, higher first (the loader's `LoadPriority` raw values).
///
/// A handle tells its observers (a scheduler's queue, the handle of a run it waits on)
/// of each change, so none of them has to read every handle when it picks: changes
/// carry a version, and an observer keeps only the newest it has seen, whatever order
/// they arrive in.
///
/// Locks: an observer takes the handle's lock inside its own only to start or stop
/// observing (a scheduler, then a run's handle, then a load's: always down the tree);
/// a handle tells its observers with no lock held.
package final class PriorityHandle: Sendable {
    /// Receives the handle's new rank with its version.
    package typealias Observer = @Sendable (_ version: UInt64, _ rank: Int) -> Void

    private struct Member {
        let handle: PriorityHandle
        let token: UInt64
        var version: UInt64
        var rank: Int
    }

    private struct State {
        var own: Int
        var members: [UInt64: Member] = [:]
        var observers: [UInt64: Observer] = [:]
        var version: UInt64 = 0
        var rank: Int

        /// Recomputes the rank; whom to tell, when it changed.
        mutating func update() -> (UInt64, Int, [Observer])? {
            let new = members.values.reduce(own) { max($0, $1.rank) }
            guard new != rank else { return nil }
            rank = new
            version += 1
            return (version, rank, Array(observers.values))
        }
    }

    private let state: Lock<State>

    /// A handle at `rank`, with no members.
    package init(rank: Int) { state = Lock(State(own: rank, rank: rank)) }

    /// The highest of its own rank and its members'.
    package var rank: Int { state.withLock { $0.rank } }

    /// Its own rank, before its members count.
    package var ownRank: Int {
        get { state.withLock { $0.own } }
        set {
            tell(
                state.withLock {
                    $0.own = newValue
                    return $0.update()
                })
        }
    }

    /// Makes `member`'s rank count until ``remove(_:)`` with the same `id`.
    package func add(_ id: UInt64, _ member: PriorityHandle) {
        let change = state.withLock { state -> (UInt64, Int, [Observer])? in
            guard state.members[id] == nil else { return nil }
            let token = Identity.next()
            // Under this lock, so a change of the member's is applied after this entry exists.
            let (version, rank) = member.observe(token) { [weak self] version, rank in
                self?.memberChanged(id, token: token, version: version, rank: rank)
            }
            state.members[id] = Member(handle: member, token: token, version: version, rank: rank)
            return state.update()
        }
        tell(change)
    }

    /// Stops counting the member added as `id`.
    package func remove(_ id: UInt64) {
        let change = state.withLock { state -> (UInt64, Int, [Observer])? in
            guard let member = state.members.removeValue(forKey: id) else { return nil }
            member.handle.stopObserving(member.token)
            return state.update()
        }
        tell(change)
    }

    /// Stops counting every member at once, telling no one: for a run that has ended,
    /// whose rank nothing reads any more.
    package func removeAllMembers() {
        let members = state.withLock { state -> [UInt64: Member] in
            defer { state.members = [:] }
            return state.members
        }
        for member in members.values { member.handle.stopObserving(member.token) }
    }

    /// Calls `observer` with every later change, until ``stopObserving(_:)`` with
    /// `token`; returns the rank now and its version.
    package func observe(_ token: UInt64, _ observer: @escaping Observer) -> (version: UInt64, rank: Int) {
        state.withLock { state in
            state.observers[token] = observer
            return (state.version, state.rank)
        }
    }

    /// Stops calling the observer registered with `token`.
    package func stopObserving(_ token: UInt64) {
        state.withLock { _ = $0.observers.removeValue(forKey: token) }
    }

    private func memberChanged(_ id: UInt64, token: UInt64, version: UInt64, rank: Int) {
        let change = state.withLock { state -> (UInt64, Int, [Observer])? in
            guard var member = state.members[id], member.token == token, version > member.version else { return nil }
            member.version = version
            member.rank = rank
            state.members[id] = member
            return state.update()
        }
        tell(change)
    }

    private func tell(_ change: (UInt64, Int, [Observer])?) {
        guard let (version, rank, observers) = change else { return }
        for observer in observers { observer(version, rank) }
    }
}
