import ImageLoaderSupport
import RasterImage

extension ImageInfo {
    /// The width and height as shown, after the orientation.
    var uprightSize: (width: Int, height: Int) {
        orientation.swapsDimensions ? (height, width) : (width, height)
    }
}

/// The limits one request is held to: the service's, lowered by the URL's security options.
struct EffectiveLimits: Sendable {
    let maxSourceBytes: Int
    let maxSourcePixels: Int
    var maxResultSide: Int
    let maxAnimationFrames: Int
    /// The largest frame of an animation; `nil`: the frames kept together are held to
    /// ``maxSourcePixels``, as imgproxy's.
    let maxAnimationFramePixels: Int?

    /// Throws 422 when a source's header says more pixels than allowed.
    func checkPixels(of info: ImageInfo) throws {
        guard Checked.multiply(info.width, info.height).map({ $0 <= maxSourcePixels }) ?? false else {
            throw ServiceError.sourceTooLarge(pixels: maxSourcePixels)
        }
    }

    /// Throws 422 when an animation kept with `frames` frames has more pixels than
    /// allowed, as imgproxy's `CheckDimensions`: each frame against
    /// ``maxAnimationFramePixels`` when it is set, else all of them together against
    /// ``maxSourcePixels``.
    func checkAnimation(of info: ImageInfo, frames: Int) throws {
        let framePixels = Checked.multiply(info.width, info.height)
        if let limit = maxAnimationFramePixels {
            guard framePixels.map({ $0 <= limit }) ?? false else {
                throw ServiceError(status: 422, "animation frames larger than \(limit) pixels")
            }
        } else {
            guard framePixels.flatMap({ Checked.multiply($0, frames) }).map({ $0 <= maxSourcePixels }) ?? false else {
                throw ServiceError.sourceTooLarge(pixels: maxSourcePixels)
            }
        }
    }
}
