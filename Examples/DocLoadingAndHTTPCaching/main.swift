// Copied from the documentation by scripts/sync-examples.py: edit the document, then run it.
import Foundation
import ImageLoader
import RasterImage

let address = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "https://www.gstatic.com/webp/gallery/1.jpg"
guard let url = URL(string: address) else { fatalError("not a URL: \(address)") }

var configuration = ImageLoader.Configuration()
configuration.cacheDirectory = NSTemporaryDirectory() + "image-cache"   // a service: /var/cache/images
configuration.http.timeout = .seconds(20)
let loader = try ImageLoader(configuration: configuration)

let loaded = try await loader.image(for: url)
print(loaded.source)     // networkToDisk, then memory; disk after a restart; networkNotModified after a 304

for await event in loader.events(for: url, options: LoadOptions(cachePolicy: .revalidate)) {
    switch event {
    case .cached(let cached): print("show", cached.image, cached.freshness)
    case .sendingRequest(let hadCache): print(hadCache ? "keep showing it while asking" : "show a spinner")
    case .completed(let done): print("show", done.image, "from", done.source)
    case .failed(let error): print("show a placeholder:", error)
    case .progress: break
    }
}

let nextPage = [url]
loader.prefetch(nextPage, product: .thumbnail(ThumbnailOptions(maxPixelSize: 128)))
loader.setPriority(.veryHigh, for: url, product: .thumbnail(ThumbnailOptions(maxPixelSize: 128)))
await loader.waitForBackgroundWork()
try await loader.shutdown()
