/// A resize from `inputWidth` x `inputHeight` to `scaledWidth` x `scaledHeight`, of
/// which only the `width` x `height` rectangle at (`x`, `y`) is made.
struct ResizeWindow: Equatable {
    var inputWidth: Int
    var inputHeight: Int
    var scaledWidth: Int
    var scaledHeight: Int
    var x: Int
    var y: Int
    var width: Int
    var height: Int

    /// The whole of a resize.
    init(inputWidth: Int, inputHeight: Int, outputWidth: Int, outputHeight: Int) {
        self.init(
            inputWidth: inputWidth, inputHeight: inputHeight, scaledWidth: outputWidth, scaledHeight: outputHeight,
            x: 0, y: 0, width: outputWidth, height: outputHeight)
    }

    init(
        inputWidth: Int, inputHeight: Int, scaledWidth: Int, scaledHeight: Int, x: Int, y: Int, width: Int,
        height: Int
    ) {
        (self.inputWidth, self.inputHeight, self.scaledWidth, self.scaledHeight) =
            (inputWidth, inputHeight, scaledWidth, scaledHeight)
        (self.x, self.y, self.width, self.height) = (x, y, width, height)
    }

    /// No scaling, at most a crop.
    var isCropOnly: Bool { inputWidth == scaledWidth && inputHeight == scaledHeight }

    /// Nothing changes: the input is the output.
    var isIdentity: Bool {
        inputWidth == scaledWidth && inputHeight == scaledHeight && x == 0 && y == 0 && width == scaledWidth
            && height == scaledHeight
    }
}
