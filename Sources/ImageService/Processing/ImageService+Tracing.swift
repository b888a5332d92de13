import Tracing

extension ImageService {
    /// `body` in a span named `name`, a child of the task's (the request's, or in work
    /// shared by several requests, the first one's), when the service traces requests
    /// (``Configuration/tracesRequests``); `body` alone, given `nil`, otherwise. A
    /// thrown error is recorded on the span.
    func traced<T>(_ name: String, _ body: ((any Span)?) async throws -> T) async rethrows -> T {
        guard configuration.tracesRequests else { return try await body(nil) }
        return try await withSpan(name, ofKind: .internal) { span in try await body(span) }
    }

    /// A span for work that ends later, elsewhere (a write in the background); `nil`
    /// when the service does not trace requests.
    func startedSpan(_ name: String) -> (any Span)? {
        configuration.tracesRequests ? startSpan(name, ofKind: .internal) : nil
    }

    /// The spans of work done on a worker's thread, where the task's context is not.
    var workerSpans: WorkerSpans {
        WorkerSpans(context: configuration.tracesRequests ? InstrumentationContext.current : nil)
    }
}

/// Spans for work on a worker's thread: children of the context the request's task had
/// when it handed the work over; none when it had none (tracing off).
struct WorkerSpans: Sendable {
    let context: InstrumentationContext?

    func run<T>(_ name: String, _ body: () throws -> T) rethrows -> T {
        guard let context else { return try body() }
        return try withSpan(name, context: context, ofKind: .internal) { _ in try body() }
    }
}
