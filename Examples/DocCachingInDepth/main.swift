// Copied from the documentation by scripts/sync-examples.py: edit the document, then run it.
import Foundation
import ImageLoader
import Logging
import RasterImage

let address = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "https://www.gstatic.com/webp/gallery/1.jpg"
guard let url = URL(string: address) else { fatalError("not a URL: \(address)") }

var configuration = ImageLoader.Configuration()
configuration.cacheDirectory = NSTemporaryDirectory() + "image-cache"
configuration.memoryCache.maxBytes = 256 << 20     // decoded bytes; default: an eighth of the memory
configuration.memoryCache.maxCount = 500           // optional, as is timeToLive
configuration.memoryCache.maxEntryFraction = 0.25  // one image takes at most a quarter
configuration.concurrentLoads = 8                  // requests in flight; more wait, by priority
configuration.decodingThreads = 2                  // decodes and resamples at once (default: the cores)
configuration.queueOrder = .lifo                   // newest first among equals (scrolling lists)
configuration.logger = Logger(label: "images")     // misses at debug (info with logCacheMisses), failures at warning
let loader = try ImageLoader(configuration: configuration)

// Thumbnails through both caches, keyed by URL and options; one download and one
// resample however many callers ask at once.
let thumb = try await loader.thumbnail(for: url, options: ThumbnailOptions(maxPixelSize: 256))
print(thumb.encoded?.bytes.count ?? 0)  // the encoded thumbnail when at hand: write it without encoding again

// For code that cannot await (a view being configured).
print(loader.peek(url) != nil)          // the image in memory, or nil
print(loader.failedToFetch(url))        // the last load failed: show a placeholder, do not retry

// Priorities, changeable while waiting; prefetching at the lowest priority; for
// originals and thumbnails alike.
let small = ImageProduct.thumbnail(ThumbnailOptions(maxPixelSize: 128))
let nextPage = [url]
_ = try await loader.image(for: url, options: LoadOptions(priority: .high))
loader.setPriority(.veryHigh, for: url)
loader.setPriority(.veryHigh, for: url, product: small)
loader.prefetch(nextPage, product: small)
loader.cancelPrefetching(nextPage, product: small)

// A cell reused before its image came: stop waiting but let the download fill the cache.
let task = Task { try await loader.image(for: url, options: LoadOptions(finishesWhenCancelled: true)) }
task.cancel()

loader.memoryCache?.setMaxBytes(64 << 20)    // evicts at once (SIEVE: see MemoryCache)
loader.memoryCache?.removeAll()              // purge
print(loader.statistics)       // memoryHits, diskHits, misses, requests, notModified, failures, bytesReceived, decodes, decodeTime, thumbnailsMade, coalesced
try await loader.shutdown()
