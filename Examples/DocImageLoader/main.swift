// Copied from the documentation by scripts/sync-examples.py: edit the document, then run it.
import Foundation
import ImageLoader
import RasterImage

// The image to load: the first argument, or a photograph on the web.
let address = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "https://www.gstatic.com/webp/gallery/1.jpg"
guard let url = URL(string: address) else { fatalError("not a URL: \(address)") }

let loader = try ImageLoader()      // caches in $XDG_CACHE_HOME/imageloader or ~/.cache/imageloader
let loaded = try await loader.image(for: url)
let thumb = try await loader.thumbnail(for: url, options: ThumbnailOptions(maxPixelSize: 256))
print(loaded, thumb)
try await loader.shutdown()
