import Foundation
import ImageLoaderSupport
import RasterImage

/// Where a product is kept, in memory and on disk: a URL (without fragment) and a
/// product. Two keys are equal when their URLs are and their products make the same
/// pixels and bytes (a thumbnail's limits, which the loader sets, do not count): the
/// memory cache and the pipeline's shared work compare them as values; only the disk
/// cache names them as text (``storageName``).
struct CacheKey: Sendable, Hashable {
    let url: URL
    let product: ImageProduct
    /// The URL as text, resolved against its base: what keys compare and hash (one
    /// string, as the memory cache's keys were before they were values).
    private let urlText: String

    init(url: URL, product: ImageProduct) {
        self.url = url
        self.product = product
        urlText = url.absoluteString
    }

    /// The name the disk cache files the product under: the URL for an original, the
    /// URL and the thumbnail's options otherwise. The URL has no fragment, so no URL
    /// can reach another product's name.
    var storageName: String {
        guard case .thumbnail(let options) = product else { return urlText }
        var name = urlText
        name.reserveCapacity(name.utf8.count + 96)
        name += "#thumbnail("
        name += options.storageName
        name += ")"
        return name
    }

    static func == (a: CacheKey, b: CacheKey) -> Bool {
        guard a.urlText == b.urlText else { return false }
        switch (a.product, b.product) {
        case (.original, .original): return true
        case (.thumbnail(let x), .thumbnail(let y)): return x.identity == y.identity
        default: return false
        }
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(urlText)
        if case .thumbnail(let options) = product { hasher.combine(options.identity) }
    }
}

/// The first stage: one load of one product (or of an original's bytes), shared by
/// every caller asking for it with the same cache policy and request header fields.
struct ProductKey: Sendable, Hashable {
    let cache: CacheKey
    let cachePolicy: LoadOptions.CachePolicy
    /// The caller's own request header fields (``LoadOptions/headers``): a request
    /// with other credentials is other work.
    let headers: [HeaderField]
    /// What the load hands out.
    var delivery = Delivery.product

    /// What a load hands out: the product (an image load's events), or the original's
    /// bytes (``ImageLoader/data(for:options:)``), with what its caller adds to the
    /// request: a client's validators, sent when nothing is stored, and whether the
    /// caches are bypassed.
    enum Delivery: Sendable, Hashable {
        case product
        case bytes(clientValidators: [HeaderField], bypassesCache: Bool)
    }

    var url: URL { cache.url }
    var product: ImageProduct { cache.product }
}

/// The download stage's shared work.
typealias Downloads = SharedWork<DownloadKey, DataResponse, ImageProduct, DownloadProgress>

/// How much of a download has arrived: what the download stage tells its members.
struct DownloadProgress: Sendable {
    let received: Int
    let expected: Int?
}

/// The download stage: one request per URL and request header fields (validators
/// included), shared by every product in flight that would send the same request.
struct DownloadKey: Sendable, Hashable {
    let url: URL
    let headers: [HeaderField]
}

/// The decode stage: one decode per download and plan, shared by the products made from it.
struct DecodeKey: Sendable, Hashable {
    /// Which download's bytes (a stage run's identity).
    let download: UInt64
    let plan: DecodePlan
}

/// How bytes shared by several products are decoded: at full size when the original
/// is among them (every thumbnail is resampled from it), otherwise once for all the
/// thumbnails, shrunk as far as the largest allows.
enum DecodePlan: Sendable, Hashable {
    case full
    case reduced([ThumbnailOptions])

    init(products: [ImageProduct]) {
        let thumbnails = products.compactMap(\.thumbnailOptions)
        if thumbnails.count < products.count {
            self = .full
        } else {
            // The same set in the same order for every product that computes it.
            self = .reduced(Array(Set(thumbnails)).sorted { $0.storageName < $1.storageName })
        }
    }
}
