import ImageLoaderSupport

/// The sRGB transfer function, on values scaled to 0...255.
enum SRGBTransfer {
    /// 8-bit sRGB to linear light, scaled to 0...255.
    static let toLinear255: [Float] = (0..<256).map { value in
        let c = Double(value) / 255
        let linear = c <= 0.04045 ? c / 12.92 : System.power((c + 0.055) / 1.055, 2.4)
        return Float(linear * 255)
    }

    /// Linear light (0...255) to 8-bit sRGB, rounded.
    @inline(__always)
    static func encode255(_ linear: Float) -> UInt8 {
        let l = Double(linear) / 255
        let c = l <= 0.0031308 ? l * 12.92 : 1.055 * System.power(l, 1 / 2.4) - 0.055
        return UInt8(min(255, max(0, c * 255 + 0.5)))
    }
}
