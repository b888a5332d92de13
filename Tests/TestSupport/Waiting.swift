import Foundation
import TestSupport
import Testing

/// Waits until `condition` holds, polling every 10 ms; records an issue after 120 s
/// (times ``testTimeScale``). For tests that must reach a state (a request in flight,
/// loads queued, a metric counted) before going on, where a fixed sleep would race a
/// busy machine: only a state never reached should get to the limit (the whole suite
/// shares two cores, and the sanitizers slow everything several times).
public func waitUntil(_ what: String, _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(120 * testTimeScale)
    while try await !condition() {
        guard ContinuousClock.now < deadline else {
            Issue.record("waited \(120 * testTimeScale) s for \(what)")
            return
        }
        try await Task.sleep(for: .milliseconds(10))
    }
}

/// The repository's folder, found once, from this file's path (Tests/TestSupport/):
/// every test that needs a file of the repository starts here.
public enum RepositoryPaths {
    /// The repository's root folder.
    public static let root: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
}

/// The repository's Fixtures folder.
public enum FixturePaths {
    /// `Fixtures/`, without a trailing slash.
    public static let root: String = RepositoryPaths.root.appendingPathComponent("Fixtures").path

    /// A file or folder under `Fixtures/`.
    public static func path(_ relative: String) -> String { root + "/" + relative }
}
