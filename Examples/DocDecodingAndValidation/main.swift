// Copied from the documentation by scripts/sync-examples.py: edit the document, then run it.
import Foundation
import RasterImage

let upload = [UInt8](try Data(contentsOf: URL(fileURLWithPath: "photo.jpg")))  // what a client sent
let accepted = AcceptedContentTypes(["image/png", "image/jpeg", "image/webp"])
let format = try accepted.validate(upload.prefix(64), declaredContentType: "image/jpeg")
print(format)

let info = try ImageDecoder().info(.bytes(upload))
let acceptable = info.width * info.height <= 40_000_000
print(info, acceptable ? "accepted" : "more than 40 megapixels")

var options = DecodingOptions()
options.limits.maxPixelsPerFrame = 50_000_000
options.limits.maxWorkingBytes = 128 << 20
let image = try ImageDecoder().decode(.bytes(upload), options: options)
print(image)

func reject(_ status: Int, _ error: ImageDecodingError) { print("answered \(status): \(error)") }

do {
    _ = try ImageDecoder().decode(.bytes(upload.prefix(upload.count / 2)))  // cut short
} catch {
    switch error.reason {
    case .tooManyPixels, .tooMuchWorkingMemory, .tooMuchWork: reject(413, error)
    case .unrecognizedFormat, .corrupt, .truncated: reject(422, error)
    default: reject(400, error)
    }
}
