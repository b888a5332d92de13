import Foundation
import RasterImage

/// An image the loader obtained, and where it came from.
public struct LoadedImage: Sendable, CustomStringConvertible {
    /// Where the image came from.
    public enum Source: String, Sendable, Hashable, Codable {
        /// The memory cache.
        case memory
        /// The disk cache, without asking the origin.
        case disk
        /// Downloaded and written to the disk cache.
        case networkToDisk
        /// The origin answered 304: the cached image is still valid.
        case networkNotModified
        /// Downloaded, but the response may not be stored (no-store, Vary: *).
        case network
        /// A file URL.
        case localFile
        /// Bytes the caller handed over (``ImageLoader/thumbnail(of:options:declaredContentType:priority:)``).
        case bytes
    }

    /// Whether a cached image may be used as it is, and why.
    public enum Freshness: String, Sendable, Hashable, Codable {
        /// Fresh (or just obtained from the origin).
        case fresh
        /// Stale, and RFC 9111 lets it be used while it is revalidated in the
        /// background (stale-while-revalidate). ``ImageLoader/image(for:options:)`` returns it.
        case staleWhileRevalidate
        /// Stale, and the origin failed: stale-if-error lets it be used.
        /// ``ImageLoader/image(for:options:)`` returns it.
        case staleIfError
        /// Stale (or no-cache, must-revalidate, or a reload asked for), offered to show
        /// while it is revalidated: it may not be used as the answer until the origin
        /// confirms it. ``ImageLoader/image(for:options:)`` waits for the revalidation.
        case needsRevalidation
    }

    /// The decoded image (a thumbnail for thumbnail loads).
    public let image: RasterImage
    /// Where it came from.
    public let source: Source
    /// The URL it was loaded from, without its fragment.
    public let url: URL
    /// Whether the image may be used as it is (see ``Freshness``).
    public let freshness: Freshness
    /// For a thumbnail, its encoded bytes when the loader has them at hand (just made,
    /// read from the disk cache, or kept beside it in the memory cache): send or write
    /// them without encoding again.
    public let encoded: EncodedImage?

    /// `true` when the image is past its freshness (any ``Freshness`` but `.fresh`).
    public var isStale: Bool { freshness != .fresh }

    /// Whether HTTP's rules let this image be used as the answer to a request
    /// (fresh, or stale within stale-while-revalidate or stale-if-error).
    public var isUsable: Bool { freshness != .needsRevalidation }

    /// An image and where it came from (for custom code that makes events of its own).
    public init(
        image: RasterImage, source: Source, url: URL, freshness: Freshness = .fresh, encoded: EncodedImage? = nil
    ) {
        self.image = image
        self.source = source
        self.url = url
        self.freshness = freshness
        self.encoded = encoded
    }

    /// One line: the image, where it came from and how fresh it is, and the URL.
    public var description: String {
        let stale = freshness == .fresh ? "" : " (\(freshness.rawValue))"
        return "LoadedImage(\(image) from \(source.rawValue)\(stale): \(url.absoluteString))"
    }
}
