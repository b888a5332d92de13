// Copied from the documentation by scripts/sync-examples.py: edit the document, then run it.
import Foundation
import RasterImage

let thumb = try ImageDecoder().thumbnail(.file(path: "photo.jpg"), options: ThumbnailOptions(maxPixelSize: 256))
print(thumb)

var uploadLimits = DecodingLimits()
uploadLimits.maxPixelsPerFrame = 40_000_000
let checked = try ImageDecoder().thumbnail(
    .file(path: "photo.jpg"), limits: uploadLimits, options: ThumbnailOptions(maxPixelSize: 256))
print(checked)

var options = ThumbnailOptions(width: 128, height: 128, fit: .fill)   // cropped from the middle
options.kernel = .lanczos3          // or .lanczos2, .mitchell, .bilinear, .box
options.linearLight = true
options.frames = .all               // every frame of an animation
options.outputFormat = .automatic(quality: 85)   // PNG with alpha, JPEG otherwise
let encoded = try ImageDecoder().encodedThumbnail(.file(path: "animation.gif"), options: options)
print(encoded)

let half = try ImageDecoder().thumbnail(.file(path: "animation.gif"), limits: DecodingLimits()) { info in
    var options = ThumbnailOptions(maxPixelSize: max(1, min(1024, max(info.width, info.height) / 2)))
    options.frames = info.frameCount > 1 ? .all : .first
    return options
}
print(half)

let body = try Data(contentsOf: URL(fileURLWithPath: "photo.jpg"))
let sizes = [ThumbnailOptions(maxPixelSize: 512), ThumbnailOptions(maxPixelSize: 128)]
let reduced = try ImageDecoder().decode(.data(body), options: DecodingOptions(), reducedFor: sizes)
let thumbnails = try sizes.map { try reduced.thumbnail(options: $0) }
print(thumbnails.map(\.width))
