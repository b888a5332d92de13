import ImageLoaderSupport

/// A credential (keys, a token) kept until it is about to expire, fetched again then:
/// callers that ask while it is fetched share that one fetch (``SharedWork``, as the
/// loader's downloads do), and the kept one is read under a lock, without a hop to
/// another executor, as every signed request asks for it.
final class KeptCredential<Value: Sendable>: Sendable {
    private let kept = Lock<Value?>(nil)
    private let fetches = SharedWork<Int, Value, Never, Never>()
    /// Whether a kept value may still be used (not expiring within the refresh margin).
    private let isUsable: @Sendable (Value) -> Bool

    init(isUsable: @escaping @Sendable (Value) -> Bool) {
        self.isUsable = isUsable
    }

    /// The kept value while it is usable, else the one `fetch` gets (joining a fetch
    /// under way). A failed fetch keeps nothing: the next caller tries again. A caller
    /// cancelled while it waits leaves; the fetch stops when no caller is left.
    func value(fetch: @escaping @Sendable () async throws -> Value) async throws -> Value {
        if let value = kept.withLock({ $0 }), isUsable(value) { return value }
        let outcome = try await fetches.value(for: 0, product: nil, priority: PriorityHandle(rank: 0)) { _ in
            if let value = self.kept.withLock({ $0 }), self.isUsable(value) { return value }
            let value = try await fetch()
            self.kept.withLock { $0 = value }
            return value
        }
        return outcome.value
    }
}
