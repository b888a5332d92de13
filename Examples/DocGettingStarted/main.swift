// Copied from the documentation by scripts/sync-examples.py: edit the document, then run it.
import Foundation
import RasterImage

let decoder = ImageDecoder()
let image = try decoder.decode(.file(path: "photo.jpg"))   // a file is read in small pieces
print(image.width, image.height)     // as stored
print(image.orientation)             // to apply when showing it (not applied)
print(image.pixels.count)            // RGBA, image.bytesPerRow a row
print(image.cost)                    // decoded bytes, for cache accounting

let body = try Data(contentsOf: URL(fileURLWithPath: "photo.jpg"))
let fromData = try decoder.decode(.data(body))
let fromArray = try decoder.decode(.bytes([UInt8](body)))
let fromSlice = try decoder.decode(.bytes([UInt8](body)[...]))   // read in place
print(fromData.width == fromArray.width && fromArray.width == fromSlice.width)

let png = try PNGEncoder().encode(image)
let jpeg = try JPEGEncoder(quality: 85, progressive: true).encode(image)
let webp = try WebPEncoder(quality: 80).encode(image)
try Data(webp).write(to: URL(fileURLWithPath: "photo.webp"))
print(png.count, jpeg.count, webp.count)
