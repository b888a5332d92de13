// Copied from the documentation by scripts/sync-examples.py: edit the document, then run it.
import Foundation
import RasterImage

let decoder = ImageDecoder()

// Decode a file (read in small pieces), or bytes in memory with .bytes(...) or .data(...).
let image = try decoder.decode(.file(path: "photo.jpg"))
print(image)                        // RasterImage(600x400 jpeg, straight alpha (opaque), 960000 bytes)
print(image.width, image.height)    // pixels as stored
print(image.orientation)            // how to turn it upright when shown (not applied)
print(image.iccProfile?.count ?? 0) // the embedded colour profile's bytes (not applied)
print(image.bytesPerRow)            // image.pixels: RGBA, 8 bits a channel, rows of this many bytes
print(image.cost)                   // decoded bytes over all frames, for cache accounting

// Only the header, no pixels.
let info = try decoder.info(.file(path: "photo.jpg"))
print(info)                         // ImageInfo(jpeg 600x400, opaque)

// Check what a sender said against the bytes.
let upload = try Data(contentsOf: URL(fileURLWithPath: "photo.jpg"))
let format = try AcceptedContentTypes.default.validate(upload, declaredContentType: "image/jpeg")
print(format)                       // jpeg; a PNG sent as image/jpeg throws ContentTypeError

// Animations: each frame is the whole canvas as shown at that moment.
let animation = try decoder.decode(.file(path: "animation.gif"))
print(animation.frames.count, animation.frames.map(\.duration), animation.loopCount)  // 4 [0.8 seconds, ...] 0 (forever)

// A thumbnail: the longest side 256, shrunk while decoding (the full-size image is never
// in memory), resampled in premultiplied alpha, turned upright, converted to sRGB.
let thumbnail = try decoder.thumbnail(.file(path: "photo.jpg"), options: ThumbnailOptions(maxPixelSize: 256))
print(thumbnail)

// Exactly 128x128, cropped from the middle, every frame, encoded in one call.
var options = ThumbnailOptions(width: 128, height: 128, fit: .fill)
options.kernel = .lanczos3          // or .lanczos2, .mitchell, .bilinear, .box
options.frames = .all
options.outputFormat = .webp(WebPEncoder(quality: 80))
let square = try decoder.encodedThumbnail(.file(path: "animation.gif"), options: options)
print(square)                       // EncodedImage(webp 128x128, 10950 bytes): still animated
try Data(square.bytes).write(to: URL(fileURLWithPath: "square.webp"))

// Write a JPEG, a PNG, a WebP, an AVIF or a JPEG XL.
let jpeg = try JPEGEncoder(quality: 85, progressive: true).encode(thumbnail)
try Data(jpeg).write(to: URL(fileURLWithPath: "thumbnail.jpg"))
let png = try PNGEncoder().encode(thumbnail)
let webp = try WebPEncoder(quality: 80).encode(thumbnail)
let avif = try AVIFEncoder(quality: 60).encode(thumbnail)   // libaom, speed 9
let jxl = try JXLEncoder(quality: 75).encode(thumbnail)     // libjxl, effort 4
print(jpeg.count, png.count, webp.count, avif.count, jxl.count)
