extension RasterImage {
    /// This image turned and mirrored so it shows upright; its ``orientation`` is then `.up`.
    ///
    /// Thumbnails do this after shrinking, on the small image, where it is cheap.
    ///
    /// ```swift
    /// let upright = try ImageDecoder().decode(.file(path: "phone.jpg")).oriented()
    /// assert(upright.orientation == .up)
    /// ```
    public func oriented() -> RasterImage {
        guard orientation != .up else { return self }
        let (outWidth, outHeight) = orientedSize
        let frames = self.frames.map { frame in
            Frame(pixels: transform(frame.pixels, outWidth: outWidth, outHeight: outHeight), duration: frame.duration)
        }
        return RasterImage(
            validatedWidth: outWidth, height: outHeight, bytesPerRow: outWidth * 4, frames: frames,
            alphaMode: alphaMode, loopCount: loopCount, orientation: .up, iccProfile: iccProfile, format: format,
            hasAlpha: hasAlpha)
    }

    /// The same pixels, as stored, labelled with `orientation`: `.up` to take them as
    /// they are (imgproxy's `auto_rotate:0`), another value to say how to show them.
    ///
    /// ```swift
    /// let asStored = try ImageDecoder().decode(.file(path: "phone.jpg")).labelled(.up)
    /// ```
    public func labelled(_ orientation: Orientation) -> RasterImage {
        with(frames: frames, orientation: orientation)
    }

    /// Moves every pixel to where the orientation shows it: output (x, y) takes the
    /// stored pixel the tag maps there.
    private func transform(_ pixels: [UInt8], outWidth: Int, outHeight: Int) -> [UInt8] {
        let (w, h, stride, orientation) = (width, height, bytesPerRow, self.orientation)
        return [UInt8](unsafeUninitializedCapacity: outWidth * outHeight * 4) { buffer, initialized in
            pixels.withUnsafeBytes { source in
                let out = UnsafeMutableRawPointer(buffer.baseAddress!)
                for y in 0..<outHeight {
                    for x in 0..<outWidth {
                        let (sx, sy): (Int, Int)
                        switch orientation {
                        case .up: (sx, sy) = (x, y)
                        case .upMirrored: (sx, sy) = (w - 1 - x, y)
                        case .down: (sx, sy) = (w - 1 - x, h - 1 - y)
                        case .downMirrored: (sx, sy) = (x, h - 1 - y)
                        case .leftMirrored: (sx, sy) = (y, x)
                        case .right: (sx, sy) = (y, h - 1 - x)
                        case .rightMirrored: (sx, sy) = (w - 1 - y, h - 1 - x)
                        case .left: (sx, sy) = (w - 1 - y, x)
                        }
                        let value = source.loadUnaligned(fromByteOffset: sy * stride + sx * 4, as: UInt32.self)
                        out.storeBytes(of: value, toByteOffset: (y * outWidth + x) * 4, as: UInt32.self)
                    }
                }
            }
            initialized = outWidth * outHeight * 4
        }
    }
}
