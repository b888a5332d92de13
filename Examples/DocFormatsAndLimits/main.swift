// Copied from the documentation by scripts/sync-examples.py: edit the document, then run it.
import RasterImage

var options = DecodingOptions()
options.limits.maxPixelsPerFrame = 100_000
do {
    _ = try ImageDecoder().decode(.file(path: "photo.jpg"), options: options)
} catch {
    if case .tooManyPixels = error.reason { print("refused before any allocation") }  // typed: ImageDecodingError
    print(error)     // "JPEG is 600x400, more than the limit of 100000 pixels"
}
