// Copied from the documentation by scripts/sync-examples.py: edit the document, then run it.
import Foundation
import ImageLoader
import ObjectStorage

let endpoint = ProcessInfo.processInfo.environment["S3_ENDPOINT"] ?? "http://127.0.0.1:9000"
var s3 = S3Configuration(region: "us-east-1", endpoint: URL(string: endpoint))
s3.credentials = .standard  // the environment, ~/.aws, then the container's or instance's credentials
var configuration = ImageLoader.Configuration()
configuration.cacheDirectory = NSTemporaryDirectory() + "bucket-cache"
configuration.dataLoader = try ObjectStorageDataLoader(ObjectStorageConfiguration(s3: s3), wrapping: configuration)
let loader = try ImageLoader(configuration: configuration)
let photo = try await loader.image(for: URL(string: "s3://photos/cat.jpg")!)
print(photo.image.width, photo.image.height, photo.source)  // 800 600 networkToDisk; disk after a restart
try await loader.shutdown()  // the stores too
