import ImageLoaderSupport
import TestSupport
import Testing

@Suite("Priority handles")
struct PriorityHandleTests {
    @Test("a run's rank is the highest of its members', through two levels, as members come, change and go")
    func tree() {
        let run = PriorityHandle(rank: 0)
        let load = PriorityHandle(rank: 1)
        let other = PriorityHandle(rank: 2)
        let seen = Lock<[Int]>([])
        _ = run.observe(Identity.next()) { _, rank in seen.withLock { $0.append(rank) } }
        run.add(1, load)
        run.add(2, other)
        #expect(run.rank == 2)
        load.ownRank = 4
        #expect(run.rank == 4)
        run.remove(1)
        #expect(run.rank == 2)
        // A member that left no longer counts.
        load.ownRank = 4 + 1
        #expect(run.rank == 2)
        #expect(seen.withLock { $0 } == [1, 2, 4, 2])
    }
}
