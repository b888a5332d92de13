import ImageLoaderSupport

/// How urgent a load is. Higher runs first when the loader is at its limits.
public enum LoadPriority: Int, Sendable, Hashable, Comparable, CaseIterable, Codable {
    /// Prefetches: only when nothing else waits.
    case veryLow = 0
    /// Below the default.
    case low = 1
    /// The default.
    case normal = 2
    /// Above the default (a row on screen).
    case high = 3
    /// First of all.
    case veryHigh = 4

    /// Whether `a` is less urgent than `b`.
    public static func < (a: LoadPriority, b: LoadPriority) -> Bool { a.rawValue < b.rawValue }
}

/// The order of waiting work of the same priority.
public enum QueueOrder: String, Sendable, Hashable, Codable {
    /// First come, first served: what a server wants.
    case fifo
    /// Newest first: what a scrolling list wants (the rows on screen now were asked for last).
    case lifo
}

extension PriorityHandle {
    /// A handle at `priority`.
    package convenience init(_ priority: LoadPriority) { self.init(rank: priority.rawValue) }
}

extension WorkScheduler.Order {
    package init(_ order: QueueOrder) {
        switch order {
        case .fifo: self = .fifo
        case .lifo: self = .lifo
        }
    }
}
