import ArgumentParser
import Foundation
import ImageLoader
import RasterImage

struct LoadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "load",
        abstract: "Load an image through the caches, following HTTP's caching rules.",
        discussion: """
            Prints what happens: a cached image (from memory or disk), a request being sent, and the \
            request completing (networkToDisk, networkNotModified, network) or failing. With --json, \
            one JSON object per line per event. A background revalidation (stale-while-revalidate) is \
            waited for before exiting. Exits 0 when a usable image was obtained, 1 otherwise: a stale \
            image shown while it is revalidated counts only when HTTP's rules let it be used \
            (stale-while-revalidate, stale-if-error), not when the revalidation it needed failed.
            """
    )

    @Argument(help: "An http, https or file URL.")
    var url: String

    @Flag(help: "Print one JSON object per event.")
    var json = false

    @Flag(help: "Also print download progress (bytes received and expected).")
    var progress = false

    @OptionGroup var loader: LoaderArguments

    func run() async throws {
        guard let url = URL(string: url), url.scheme != nil else { throw CommandFailure("\(self.url): not a URL") }
        let obtained = try await loader.withLoader { loader -> Bool in
            var obtained = false
            var failure: ImageLoadingError?
            for await event in loader.events(for: url) {
                // A stale image that must be revalidated is printed, but obtains nothing
                // until the revalidation succeeds (as `image(for:)` decides).
                if let image = event.image, image.isUsable { obtained = true }
                if case .failed(let error) = event { failure = error }
                if case .progress = event, !progress { continue }
                print(json ? EventOutput.json(event) : EventOutput.text(event))
            }
            if !obtained, let failure { Terminal.error(failure.description) }
            return obtained
        }
        if !obtained { throw ExitCode.failure }
    }
}

/// How the command prints events.
enum EventOutput {
    static func json(_ event: ImageLoadEvent) -> String {
        switch event {
        case .cached(let loaded):
            return JSONValue.object([("event", .string("cached"))] + fields(loaded)).serialized
        case .sendingRequest(let hadCache):
            return JSONValue.object([("event", .string("sendingRequest")), ("hadCache", .bool(hadCache))]).serialized
        case .progress(let received, let expected):
            return JSONValue.object([
                ("event", .string("progress")), ("received", .int(received)),
                ("expected", expected.map(JSONValue.int) ?? .null),
            ]).serialized
        case .completed(let loaded):
            return JSONValue.object([("event", .string("completed"))] + fields(loaded)).serialized
        case .failed(let error):
            return JSONValue.object([
                ("event", .string("failed")), ("error", .string(error.description)),
                ("status", error.status.map(JSONValue.int) ?? .null),
            ]).serialized
        }
    }

    private static func fields(_ loaded: LoadedImage) -> [(String, JSONValue)] {
        [
            ("source", .string(loaded.source.rawValue)), ("stale", .bool(loaded.isStale)),
            ("freshness", .string(loaded.freshness.rawValue)),
            ("format", loaded.image.format.map { .string($0.rawValue) } ?? .null),
            ("width", .int(loaded.image.width)), ("height", .int(loaded.image.height)),
            ("frames", .int(loaded.image.frames.count)),
        ]
    }

    static func text(_ event: ImageLoadEvent) -> String {
        switch event {
        case .cached(let loaded):
            "cached from \(loaded.source.rawValue)\(loaded.isStale ? " (\(loaded.freshness.rawValue))" : ""): \(loaded.image)"
        case .sendingRequest(let hadCache): hadCache ? "revalidating the cached image" : "requesting"
        case .progress(let received, let expected): "received \(received)\(expected.map { " of \($0)" } ?? "") bytes"
        case .completed(let loaded): "completed (\(loaded.source.rawValue)): \(loaded.image)"
        case .failed(let error): "failed: \(error)"
        }
    }
}
