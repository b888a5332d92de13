import ImageLoaderSupport
import TestSupport
import Testing

/// `SharedWork` on its own: the one type behind the pipeline's loads, the download and
/// decode stages and the service's processing. Its members are tasks that await a value
/// and synchronous subscribers (the loads' event streams), with the same bookkeeping.
@Suite("Shared work: members, events, cancellation, keep-running")
struct SharedWorkRunTests {
    typealias Work = SharedWork<String, Int, String, String>

    /// What one synchronous member heard.
    final class Heard: Sendable {
        private let state = Lock<(events: [String], ends: [Result<Work.Outcome, any Error>])>(([], []))

        var events: [String] { state.withLock { $0.events } }
        var ends: Int { state.withLock { $0.ends.count } }
        var outcome: Work.Outcome? { state.withLock { try? $0.ends.first?.get() } }

        func member(_ priority: PriorityHandle = PriorityHandle(rank: 0), product: String? = nil) -> Work.Member {
            Work.Member(
                priority: priority, product: product,
                onEvent: { event in self.state.withLock { $0.events.append(event) } },
                onEnd: { result in self.state.withLock { $0.ends.append(result) } })
        }
    }

    /// Work that waits for `gate`, then reports whether it was cancelled meanwhile.
    static func gated(_ gate: Gate, cancelled: Lock<Bool>, value: Int = 7) -> Work.Work {
        { _ in
            await gate.wait()
            cancelled.withLock { $0 = Task.isCancelled }
            try Task.checkCancellation()
            return value
        }
    }

    static func drain(_ work: Work) async {
        for task in work.runningTasks { await task.value }
    }

    @Test("a late member hears the kept events replayed (progress-like ones not), then the rest and the end")
    func replay() async throws {
        let work = Work { !$0.hasPrefix("progress") }
        let (first, late) = (Heard(), Heard())
        let (reported, finish) = (Gate(), Gate())
        #expect(
            work.join(1, key: "k", first.member(product: "a")) { run in
                run.report("started")
                run.report("progress 1")
                reported.open()
                await finish.wait()
                run.report("done")
                return 42
            } == .started)
        await reported.wait()
        #expect(
            work.join(2, key: "k", late.member(product: "b")) { _ in
                Issue.record("a second run started")
                return 0
            } == .joined)
        #expect(late.events == ["started"])
        finish.open()
        await Self.drain(work)
        #expect(first.events == ["started", "progress 1", "done"])
        #expect(late.events == ["started", "done"])
        let (a, b) = (try #require(first.outcome), try #require(late.outcome))
        #expect(a.value == 42 && b.value == 42 && a.run == b.run)
        #expect(a.isFirst && !b.isFirst)
        #expect(a.products == ["a", "b"] && b.products == ["a", "b"])
        #expect(work.counts == (started: 1, joined: 1))
    }

    @Test("the last member to leave cancels the run; a member who left hears nothing more; the next starts anew")
    func lastLeaves() async throws {
        let work = Work()
        let (one, two) = (Heard(), Heard())
        let (gate, cancelled) = (Gate(), Lock(false))
        work.join(1, key: "k", one.member(), work: Self.gated(gate, cancelled: cancelled))
        work.join(2, key: "k", two.member(), work: Self.gated(gate, cancelled: cancelled))
        work.leave(1, key: "k")
        #expect(work.runningTasks.count == 1)
        work.leave(2, key: "k")
        // Cancelled, but still waited for until its task returns.
        #expect(work.runningTasks.count == 1)
        let again = Heard()
        #expect(work.join(3, key: "k", again.member()) { _ in 8 } == .started)
        gate.open()
        await Self.drain(work)
        #expect(cancelled.withLock { $0 })
        #expect(one.ends == 0 && two.ends == 0)
        #expect(again.outcome?.value == 8)
        #expect(work.runningTasks.isEmpty)
    }

    @Test("a run kept running (by a member, or by the work itself) finishes after every member has left")
    func keepsRunning() async throws {
        for byWork in [false, true] {
            let work = Work()
            let (gate, cancelled, asked) = (Gate(), Lock(false), Gate())
            let finished = Lock(false)
            work.join(1, key: "k", Heard().member(), keepsRunning: !byWork) { run in
                if byWork { run.keepRunning() }
                asked.open()
                await gate.wait()
                cancelled.withLock { $0 = Task.isCancelled }
                finished.withLock { $0 = true }
                return 1
            }
            await asked.wait()
            work.leave(1, key: "k")
            gate.open()
            await Self.drain(work)
            #expect(finished.withLock { $0 })
            #expect(!cancelled.withLock { $0 }, "kept running by the work: \(byWork)")
        }
    }

    @Test("an unattended run keeps running when members come and go, and only it can be cancelled unattended")
    func unattended() async throws {
        let work = Work(floor: 3)
        let (gate, cancelled) = (Gate(), Lock(false))
        work.startUnattended(key: "prefetch", work: Self.gated(gate, cancelled: cancelled))
        let visitor = Heard()
        #expect(work.join(1, key: "prefetch", visitor.member(PriorityHandle(rank: 9))) { _ in 0 } == .joined)
        work.leave(1, key: "prefetch")
        #expect(work.runningTasks.count == 1)

        // A run a member started is not cancelled as unattended.
        let (other, otherGate, otherCancelled) = (Heard(), Gate(), Lock(false))
        work.join(2, key: "asked", other.member(), work: Self.gated(otherGate, cancelled: otherCancelled))
        work.cancelUnattended(key: "asked")
        work.cancelUnattended(key: "prefetch")
        gate.open()
        otherGate.open()
        await Self.drain(work)
        #expect(cancelled.withLock { $0 })
        #expect(!otherCancelled.withLock { $0 })
        #expect(other.outcome?.value == 7)
        #expect(visitor.ends == 0)
    }

    @Test("a run's rank is its members' highest, never below the floor; setRank moves the run and its members")
    func ranks() async throws {
        let work = Work(floor: 1)
        let (gate, rank) = (Gate(), Lock<PriorityHandle?>(nil))
        let (low, high) = (PriorityHandle(rank: 2), PriorityHandle(rank: 5))
        work.join(1, key: "k", Heard().member(low)) { run in
            rank.withLock { $0 = run.priority }
            await gate.wait()
            return 0
        }
        try await waitUntil("the work started") { rank.withLock { $0 != nil } }
        let handle = try #require(rank.withLock { $0 })
        #expect(handle.rank == 2)
        work.join(2, key: "k", Heard().member(high)) { _ in 0 }
        #expect(handle.rank == 5)
        work.setRank(0, key: "k")
        #expect(low.rank == 0 && high.rank == 0 && handle.rank == 0)
        work.leave(2, key: "k")
        work.setRank(4, key: "k")
        #expect(handle.rank == 4)
        gate.open()
        await Self.drain(work)
    }

    @Test("a waiting task gets the value, or CancellationError at once when cancelled; the last one cancels the run")
    func awaitingMembers() async throws {
        let work = Work()
        let (gate, cancelled) = (Gate(), Lock(false))
        let waiter = Task {
            try await work.value(
                for: "k", product: nil, priority: PriorityHandle(rank: 0), work: Self.gated(gate, cancelled: cancelled))
        }
        try await waitUntil("the waiter joined") { work.counts.started == 1 }
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        gate.open()
        await Self.drain(work)
        #expect(cancelled.withLock { $0 })

        let values = try await withThrowingTaskGroup(of: Int.self) { group in
            let open = Gate()
            for _ in 0..<3 {
                group.addTask {
                    try await work.value(for: "v", product: nil, priority: PriorityHandle(rank: 0)) { _ in
                        await open.wait()
                        return 5
                    }.value
                }
            }
            try await waitUntil("all three on one run") { work.counts.joined == 2 }
            open.open()
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(values == [5, 5, 5])
    }

    @Test("after shutdown, joining is refused, a waiting task gets ShutDown, and the running tasks are handed back")
    func shutdown() async throws {
        let work = Work()
        let (gate, cancelled) = (Gate(), Lock(false))
        let member = Heard()
        work.join(1, key: "k", member.member(), work: Self.gated(gate, cancelled: cancelled))
        let running = work.shutdown()
        #expect(running.count == 1)
        #expect(work.join(2, key: "other", Heard().member()) { _ in 0 } == .refused)
        await #expect(throws: Work.ShutDown.self) {
            try await work.value(for: "k", product: nil, priority: PriorityHandle(rank: 0)) { _ in 0 }
        }
        work.startUnattended(key: "late") { _ in
            Issue.record("started after shutdown")
            return 0
        }
        gate.open()
        for task in running { await task.value }
        #expect(member.outcome?.value == 7)
        #expect(work.runningTasks.isEmpty)
    }
}
