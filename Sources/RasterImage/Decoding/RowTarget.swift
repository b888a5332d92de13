/// Where a decoder writes rows, top to bottom: straight into the final image buffer
/// (a full decode, no copy), or a few rows at a time into a scratch buffer handed to a
/// resize (a thumbnail, which never holds the full-size image).
protocol RowTarget: AnyObject {
    var bytesPerRow: Int { get }
    /// The most rows one call to ``rows(_:count:)`` may ask for.
    var maxRows: Int { get }
    /// Where rows `y..<y + count` go, `bytesPerRow` apart.
    func rows(_ y: Int, count: Int) -> UnsafeMutablePointer<UInt8>
    /// Rows `y..<y + count` have been written.
    func commit(_ y: Int, count: Int)
}

extension RowTarget {
    /// Rows `y..<y + count` are missing (data that ended early): transparent black.
    func fillMissing(_ y: Int, count: Int) {
        var row = y
        while row < y + count {
            let n = min(maxRows, y + count - row)
            rows(row, count: n).initialize(repeating: 0, count: n * bytesPerRow)
            commit(row, count: n)
            row += n
        }
    }
}

/// Rows written in place into an image's pixel buffer.
final class ImageBufferTarget: RowTarget {
    let base: UnsafeMutablePointer<UInt8>
    let bytesPerRow: Int
    var maxRows: Int { Int.max }

    init(_ base: UnsafeMutablePointer<UInt8>, bytesPerRow: Int) {
        self.base = base
        self.bytesPerRow = bytesPerRow
    }

    func rows(_ y: Int, count: Int) -> UnsafeMutablePointer<UInt8> { base + y * bytesPerRow }
    func commit(_ y: Int, count: Int) {}
}

/// Rows passed, as they arrive, to a ``StreamingResizer``.
final class ResizingTarget: RowTarget {
    let resizer: StreamingResizer
    let bytesPerRow: Int
    let maxRows: Int
    private let scratch: UnsafeMutablePointer<UInt8>

    init(resizer: StreamingResizer, maxRows: Int = 16) {
        self.resizer = resizer
        self.bytesPerRow = resizer.inputWidth * 4
        self.maxRows = maxRows
        scratch = .allocate(capacity: bytesPerRow * maxRows)
    }

    deinit { scratch.deallocate() }

    func rows(_ y: Int, count: Int) -> UnsafeMutablePointer<UInt8> { scratch }

    func commit(_ y: Int, count: Int) {
        resizer.consume(scratch, count: count, bytesPerRow: bytesPerRow, firstRow: y)
    }
}
