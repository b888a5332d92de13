import ArgumentParser
import Foundation
import ImageLoader
import ImageLoaderSupport
import RasterImage

/// The loader's settings, shared by every command that takes a URL.
struct LoaderArguments: ParsableArguments {
    @Option(help: "The disk cache's folder (default: $XDG_CACHE_HOME/imageloader or ~/.cache/imageloader).")
    var cacheDir: String?

    @Option(help: "Seconds of freshness for responses that state none.")
    var defaultMaxAge: Double?

    @Option(help: "Seconds an error response is remembered.")
    var errorMaxAge: Double?

    @Option(help: "Failures within that time after which no request is made.")
    var maxErrorAttempts: Int?

    @Flag(help: "Ignore the server's caching headers: keep images until cleaned up.")
    var ignoreServerCachePolicy = false

    @Option(
        name: .customLong("accept"),
        help: "An accepted content type (repeatable; default: the types of \(Terminal.formatNames)).")
    var acceptedTypes: [String] = []

    @Option(help: "User name for basic authentication (sent to the URL's origin only).")
    var user: String?

    @Option(help: "Password for basic authentication.")
    var password: String?

    @Flag(help: "Accept any TLS certificate.")
    var insecure = false

    @Option(help: "Seconds the whole request may take.")
    var timeout: Double?

    @Option(
        name: .customLong("memory-cache-mb"),
        help: "MiB of decoded images kept in memory; 0 keeps none (default: an eighth of the memory available).")
    var memoryCacheMB: Int?

    func validate() throws {
        if (user == nil) != (password == nil) { throw ValidationError("give --user and --password together") }
        if let timeout, !(timeout > 0 && timeout <= 86_400) {
            throw ValidationError("--timeout must be between 0 and 86400 seconds")
        }
        if let memoryCacheMB, memoryCacheMB < 0 { throw ValidationError("--memory-cache-mb must be 0 or more") }
        if let maxErrorAttempts, maxErrorAttempts < 1 {
            throw ValidationError("--max-error-attempts must be 1 or more")
        }
    }

    /// The settings, with `memoryCacheDefaultMB` MiB of memory cache unless the user gave a size.
    func configuration(memoryCacheDefaultMB: Int?) -> ImageLoader.Configuration {
        var configuration = ImageLoader.Configuration()
        if let megabytes = memoryCacheMB ?? memoryCacheDefaultMB {
            configuration.cacheImagesInMemory = megabytes > 0
            configuration.memoryCache.maxBytes = megabytes << 20
        }
        if let cacheDir { configuration.cacheDirectory = cacheDir }
        configuration.defaultCacheControlMaxAge = defaultMaxAge
        if let errorMaxAge { configuration.defaultCacheControlMaxAgeForErrors = errorMaxAge }
        if let maxErrorAttempts { configuration.maxAttemptsForErrors = maxErrorAttempts }
        configuration.useServerCachePolicy = !ignoreServerCachePolicy
        if !acceptedTypes.isEmpty { configuration.acceptedContentTypes = AcceptedContentTypes(acceptedTypes) }
        if let user, let password { configuration.http.credentials = (user, password) }
        configuration.http.trustAnySSLCertificate = insecure
        if let timeout { configuration.http.timeout = .milliseconds(Int(timeout * 1000)) }
        return configuration
    }

    /// Runs `body` with a loader, shutting it down afterwards (background work finished first).
    func withLoader<R>(memoryCacheDefaultMB: Int? = nil, _ body: (ImageLoader) async throws -> R) async throws -> R {
        let loader: ImageLoader
        do {
            loader = try ImageLoader(configuration: configuration(memoryCacheDefaultMB: memoryCacheDefaultMB))
        } catch {
            let folder = cacheDir ?? DiskCache.defaultDirectory()
            throw CommandFailure(
                "cannot open the cache in \(folder): \(Terminal.describe(error)) (choose another with --cache-dir)")
        }
        do {
            let result = try await body(loader)
            try await loader.shutdown()
            return result
        } catch {
            try? await loader.shutdown()
            throw error
        }
    }
}

/// Where an input comes from: a URL for the loader, or a file path.
enum Input {
    case url(URL)
    case file(String)

    init(_ text: String) {
        if let url = URL(string: text), let scheme = url.scheme?.lowercased(),
            ["http", "https", "file"].contains(scheme)
        {
            self = .url(url)
        } else {
            self = .file(text)
        }
    }

    /// The file's bytes (at most the decoders' input limit), or a URL's through the loader and its caches.
    func bytes(loader arguments: LoaderArguments) async throws -> [UInt8] {
        switch self {
        case .file(let path):
            let limit = DecodingLimits().maxInputBytes
            guard let handle = FileHandle(forReadingAtPath: path) else {
                throw CommandFailure("cannot read \(path): \(System.describe(errno: errno).lowercased())")
            }
            defer { try? handle.close() }
            let data = try handle.read(upToCount: limit + 1) ?? Data()
            guard data.count <= limit else { throw CommandFailure("\(path) is larger than \(limit) bytes") }
            return Array(data)
        case .url(let url):
            return try await arguments.withLoader { loader in try await loader.data(for: url).bytes }
        }
    }

    /// The decoded image: through the loader and its caches for a URL, straight from the file otherwise.
    func image(decoding options: DecodingOptions, loader arguments: LoaderArguments) async throws -> RasterImage {
        switch self {
        case .file(let path):
            return try Input.naming(path) { try ImageDecoder(options: options).decode(.file(path: path)) }
        case .url(let url):
            return try await arguments.withLoader { loader in try await loader.image(for: url).image }
        }
    }

    /// `body`'s result; a decoder's or encoder's error that does not name the file gets
    /// its name in front ("notes.txt: not a supported image format ...").
    static func naming<T>(_ path: String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as ImageDecodingError {
            throw CommandFailure(error.description.contains(path) ? error.description : "\(path): \(error)")
        } catch let error as ImageEncodingError {
            throw CommandFailure("\(path): \(error)")
        }
    }
}
