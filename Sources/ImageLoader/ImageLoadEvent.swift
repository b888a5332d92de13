import Foundation
import RasterImage

/// What happens during a load, in order. Which events arrive depends on the cache:
///
/// | situation | events |
/// |---|---|
/// | fresh in memory or on disk | `cached` (`.memory` or `.disk`, `.fresh`) |
/// | stale, within stale-while-revalidate | `cached` (`.staleWhileRevalidate`), `sendingRequest(hadCache: true)`, then `completed` (`.networkNotModified` or `.networkToDisk`) or `failed`; the revalidation finishes even if the caller leaves |
/// | stale (no stale-while-revalidate), no-cache, must-revalidate, or `.revalidate` policy | `cached` (`.needsRevalidation`), `sendingRequest(hadCache: true)`, then `completed` (`.networkNotModified` or `.networkToDisk`) or `failed` |
/// | the origin fails, within stale-if-error | `cached` (`.needsRevalidation`), `sendingRequest(hadCache: true)`, `cached` (`.staleIfError`), `failed` |
/// | nothing cached | `sendingRequest(hadCache: false)`, `progress`..., `completed` (`.networkToDisk` or `.network`) or `failed` |
/// | a failure remembered (error caching) | `failed` (`.rememberedFailure`), no request |
/// | a file URL | `cached` (`.memory` or `.disk`) when unchanged, else `completed` (`.localFile`), or `failed` |
///
/// The sequence ends after the last event. A list shows the first image that
/// arrives and replaces it if a later one does. ``ImageLoader/image(for:options:)``
/// returns the first image whose ``LoadedImage/isUsable`` is `true`.
///
/// ```swift
/// for await event in loader.events(for: url) {
///     switch event {
///     case .cached(let cached): cell.show(cached.image)       // stale ones too
///     case .sendingRequest(let hadCache): cell.spinner(!hadCache)
///     case .completed(let done): cell.show(done.image)
///     case .failed(let error): cell.placeholder(error)
///     case .progress: break
///     }
/// }
/// ```
public enum ImageLoadEvent: Sendable {
    /// A cached image is available.
    case cached(LoadedImage)
    /// A request is being sent; `hadCache` says whether a cached response is being revalidated.
    case sendingRequest(hadCache: Bool)
    /// Bytes received so far, and the total when the origin said.
    case progress(received: Int, expected: Int?)
    /// The request completed with an image.
    case completed(LoadedImage)
    /// The load failed (for a stale image served on error, after `cached`).
    case failed(ImageLoadingError)

    /// The image this event carries, if any.
    public var image: LoadedImage? {
        switch self {
        case .cached(let image), .completed(let image): image
        default: nil
        }
    }
}
