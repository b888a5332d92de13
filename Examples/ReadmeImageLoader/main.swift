// Copied from the documentation by scripts/sync-examples.py: edit the document, then run it.
import Foundation
import ImageLoader
import RasterImage

// The image to load: the first argument, or a photograph on the web.
let address = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "https://www.gstatic.com/webp/gallery/1.jpg"
guard let url = URL(string: address) else { fatalError("not a URL: \(address)") }

var configuration = ImageLoader.Configuration()
configuration.cacheDirectory = NSTemporaryDirectory() + "image-cache"  // default: $XDG_CACHE_HOME/imageloader or ~/.cache/imageloader
configuration.defaultCacheControlMaxAge = 3600          // freshness for responses that state none
configuration.maxAttemptsForErrors = 3                  // then fail without a request...
configuration.defaultCacheControlMaxAgeForErrors = 60   // ...for this long
configuration.http.timeout = .seconds(20)               // the whole load (connect and read timeouts too)
let loader = try ImageLoader(configuration: configuration)

// The plain call: the image, and where it came from.
let loaded = try await loader.image(for: url)
print(loaded)           // LoadedImage(RasterImage(...) from networkToDisk: ...); disk after a restart

// The moments of a load, as they happen: a reload asks the origin again.
for await event in loader.events(for: url, options: LoadOptions(cachePolicy: .reload)) {
    switch event {
    case .cached(let cached): print("cached:", cached.source, cached.freshness)  // memory or disk, stale ones too
    case .sendingRequest(let hadCache): print("requesting; a cached image is shown meanwhile:", hadCache)
    case .progress(let received, let expected): print("received", received, "of", expected ?? -1)
    case .completed(let done): print("completed:", done.source)                 // networkToDisk or networkNotModified
    case .failed(let error): print("failed:", error.reason)                     // typed: error.reason, error.status
    }
}

// Thumbnails through both caches: one download and one resample however many callers ask.
let thumbnail = try await loader.thumbnail(for: url, options: ThumbnailOptions(maxPixelSize: 256))
if let encoded = thumbnail.encoded { print(encoded) }  // the encoded thumbnail when at hand: send it as it is

print(loader.peek(url) != nil)               // for code that cannot await: the image in memory, or nil
loader.setPriority(.veryHigh, for: url)
loader.prefetch([url], product: .thumbnail(ThumbnailOptions(maxPixelSize: 128)))
await loader.waitForBackgroundWork()
print(loader.statistics)                     // hits, misses, requests, bytes, decodes, thumbnails

// The original's bytes and headers, through the same HTTP cache (for a proxy).
let original = try await loader.data(for: url)
print(original)                              // LoadedData(jpeg, ... bytes from disk: ...)

// Clean-up, as the classic loaders offer it.
if let disk = loader.diskCache {
    print(disk.statistics)                   // entries, remembered failures, bytes
    disk.removeEntries(olderThan: DiskCache.oneWeek, by: .modified)
    disk.remove(url: url.absoluteString)
}
try await loader.shutdown()                  // finishes loads in flight, closes the HTTP client
