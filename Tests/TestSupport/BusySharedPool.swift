import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Holds every thread of NIO's shared blocking pool (`NIOThreadPool.singleton`) while
/// `body` runs, as lookups stuck on a name server that never answers would: work that
/// still needs that pool cannot finish until `body` has returned.
///
/// ```swift
/// let reply = try await BusySharedPool.whileBusy { await service.answer(...) }
/// ```
public enum BusySharedPool {
    public struct NeverFilled: Error, CustomStringConvertible {
        public let description = "the shared pool's threads were not all taken within 120 s"
    }

    public static func whileBusy<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        let threads = NIOSingletons.blockingPoolThreadCountSuggestion
        let entered = NIOLockedValueBox(0)
        let gate = DispatchSemaphore(value: 0)
        let holders = (0..<threads).map { _ in
            Task {
                try await NIOThreadPool.singleton.runIfActive {
                    entered.withLockedValue { $0 += 1 }
                    gate.wait()
                }
            }
        }
        let release = {
            for _ in 0..<threads { gate.signal() }
        }
        do {
            // (Other tests may hold the pool's threads for a while.)
            let deadline = Date().addingTimeInterval(120)
            while entered.withLockedValue({ $0 }) < threads {
                guard Date() < deadline else { throw NeverFilled() }
                try await Task.sleep(for: .milliseconds(5))
            }
            let result = try await body()
            release()
            for holder in holders { try await holder.value }
            return result
        } catch {
            release()
            throw error
        }
    }
}
