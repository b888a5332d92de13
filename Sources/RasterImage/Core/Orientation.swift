/// How stored pixels must be transformed to display upright: the EXIF/TIFF
/// Orientation tag, values 1 to 8.
///
/// The cases name the eight tag values by where the top of the image is: ``right``
/// (value 6, what a phone held upright writes) must be turned 90° clockwise to be
/// shown upright; ``up`` (1) needs nothing.
public enum Orientation: Int, Sendable, Hashable, CaseIterable, Codable {
    /// 1: shown as stored.
    case up = 1
    /// 2: mirrored left to right.
    case upMirrored = 2
    /// 3: turned 180°.
    case down = 3
    /// 4: mirrored top to bottom.
    case downMirrored = 4
    /// 5: mirrored along the top-left to bottom-right diagonal (transposed).
    case leftMirrored = 5
    /// 6: must be turned 90° clockwise to display.
    case right = 6
    /// 7: mirrored along the top-right to bottom-left diagonal (transversed).
    case rightMirrored = 7
    /// 8: must be turned 90° counter-clockwise to display.
    case left = 8

    /// Whether showing the image upright swaps its width and height (values 5 to 8).
    public var swapsDimensions: Bool { rawValue >= 5 }

    /// The orientation for a tag value, treating values outside 1...8 as ``up``,
    /// as viewers do.
    public init(tagValue: Int) {
        self = Orientation(rawValue: tagValue) ?? .up
    }
}
