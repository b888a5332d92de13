// Copied from the documentation by scripts/sync-examples.py: edit the document, then run it.
import RasterImage

let image = try ImageDecoder().decode(.file(path: "photo.jpg"))
let thumb = try ImageDecoder().thumbnail(.file(path: "photo.jpg"), options: ThumbnailOptions(maxPixelSize: 256))
let jpeg = try JPEGEncoder(quality: 85).encode(thumb)
print(image, thumb, "\(jpeg.count) bytes of JPEG")
