import Foundation
import ImageLoaderSupport
import RasterImage

/// What a load makes of the image at a URL.
///
/// ```swift
/// loader.prefetch(urls, product: .thumbnail(ThumbnailOptions(maxPixelSize: 256)))
/// ```
public enum ImageProduct: Sendable, Hashable {
    /// The image itself; its downloaded bytes are what the disk cache keeps.
    case original
    /// A thumbnail; the disk cache keeps it encoded, with the original's response, so it
    /// stays valid exactly as long as the original (a 304 keeps it, a new original replaces it).
    // Boxed: the product is part of every cache key, and an original's key then stays as
    // small as its URL's (memory hits of originals were 1.13x slower unboxed).
    indirect case thumbnail(ThumbnailOptions)

    /// The thumbnail's options, or `nil` for the original.
    var thumbnailOptions: ThumbnailOptions? {
        if case .thumbnail(let options) = self { return options }
        return nil
    }
}
