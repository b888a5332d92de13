import CTIFF
import ImageLoaderSupport

/// Reads a page in bands of rows (a strip, or a row of tiles), each plane of a band
/// in its own buffer, `scanline` bytes a row.
struct TIFFBandReader {
    struct Band {
        var rows: Int
        var buffers: [UnsafeMutableRawPointer]
        var rowBytes: Int

        func planes(_ row: Int) -> [UnsafeRawPointer] {
            buffers.map { UnsafeRawPointer($0 + row * rowBytes) }
        }
    }

    private let file: TIFFFile
    private let page: TIFFPage
    private let planes: Int
    private let rowBytes: Int  // bytes in one row of one plane
    private let rowsPerBand: Int
    private let tileWidth: Int
    private var storage: [UnsafeMutableRawPointer] = []
    private var tileBuffer: UnsafeMutableRawPointer?
    private let tileBytes: Int
    /// Strips too large for the working memory: read with TIFFReadScanline, a row a band.
    private let scanlines: Bool
    private let owner: Deallocator

    /// Frees the band buffers when the reader goes away.
    private final class Deallocator {
        var pointers: [UnsafeMutableRawPointer] = []
        deinit { for pointer in pointers { pointer.deallocate() } }
    }

    init(file: TIFFFile, page: TIFFPage, limits: DecodingLimits) throws {
        self.file = file
        self.page = page
        planes = page.separatePlanes ? page.samplesPerPixel : 1
        let samplesInRow = page.separatePlanes ? 1 : page.samplesPerPixel
        // Width, samples (at most 8) and bits (at most 16) are in range: the page passed the limits.
        rowBytes = (page.width * samplesInRow * page.bitsPerSample + 7) / 8
        owner = Deallocator()
        // The row converter's scratch: one row of samples, a byte each.
        let scratch = page.width * page.samplesPerPixel
        if file.isTiled {
            guard let width = file.uint32Tag(TIFFTAG_TILEWIDTH), let length = file.uint32Tag(TIFFTAG_TILELENGTH),
                width > 0, length > 0, width <= 1 << 16, length <= 1 << 16
            else { throw ImageDecodingError(.corrupt, format: .tiff, message: "bad tile size") }
            tileWidth = width
            rowsPerBand = min(length, page.height)
            // The tile's size as the header declares it, checked before libtiff is asked
            // (TIFFTileSize multiplies the same fields) and before anything is allocated.
            let declared = Checked.product(width, samplesInRow, page.bitsPerSample).map { ($0 + 7) / 8 }
                .flatMap { Checked.multiply($0, length) }
            let bands = Checked.product(planes, rowBytes, rowsPerBand)
            try limits.checkWorking(
                bytes: Checked.sum(declared ?? .max, bands ?? .max, scratch), format: .tiff,
                what: "a \(width)x\(length) tile")
            tileBytes = file.tileSize
            guard let declared, tileBytes > 0, tileBytes >= declared, tileBytes <= limits.maxWorkingBytes else {
                throw ImageDecodingError(.corrupt, format: .tiff, message: "bad tile size")
            }
            let tile = UnsafeMutableRawPointer.allocate(byteCount: tileBytes, alignment: 16)
            owner.pointers.append(tile)
            tileBuffer = tile
            scanlines = false
        } else {
            tileWidth = 0
            tileBytes = 0
            let perStrip = file.uint32Tag(TIFFTAG_ROWSPERSTRIP) ?? page.height
            let stripRows = max(1, min(perStrip, page.height))
            // A strip too large for the working memory is read a row at a time.
            let stripBytes = Checked.product(planes, rowBytes, stripRows)
            scanlines = stripBytes.map { Checked.saturatingAdd($0, scratch) > limits.maxWorkingBytes } ?? true
            rowsPerBand = scanlines ? 1 : stripRows
            try limits.checkWorking(
                bytes: Checked.sum(planes * rowBytes * rowsPerBand, scratch), format: .tiff, what: "a strip")
        }
        for _ in 0..<planes {
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: max(1, rowBytes * rowsPerBand), alignment: 16)
            owner.pointers.append(buffer)
            storage.append(buffer)
        }
    }

    /// The band holding row `y`, which must start a band.
    mutating func readBand(startingAt y: Int) throws -> Band {
        let rows = min(rowsPerBand, page.height - y)
        let bandIndex = y / rowsPerBand
        let bandsPerPlane = (page.height + rowsPerBand - 1) / rowsPerBand
        for plane in 0..<planes {
            if let tileBuffer {
                try readTiles(row: y, rows: rows, plane: plane, tile: tileBuffer)
            } else if scanlines {
                try file.readScanline(y, plane: plane, into: storage[plane])
            } else {
                let size = rowBytes * rowsPerBand
                let got = try file.readStrip(plane * bandsPerPlane + bandIndex, into: storage[plane], size: size)
                if got < rowBytes * rows {
                    // A short strip: what is missing reads as zero.
                    (storage[plane] + got).initializeMemory(as: UInt8.self, repeating: 0, count: rowBytes * rows - got)
                }
            }
        }
        return Band(rows: rows, buffers: storage, rowBytes: rowBytes)
    }

    private func readTiles(row y: Int, rows: Int, plane: Int, tile: UnsafeMutableRawPointer) throws {
        let samplesInRow = page.separatePlanes ? 1 : page.samplesPerPixel
        let tileRowBytes = (tileWidth * samplesInRow * page.bitsPerSample + 7) / 8
        var x = 0
        while x < page.width {
            try file.readTile(x: x, y: y, plane: plane, into: tile, size: tileBytes)
            // Tile widths are multiples of 16, so a tile's columns start on a byte.
            let start = (x * samplesInRow * page.bitsPerSample) / 8
            let count = min(tileRowBytes, rowBytes - start)
            for r in 0..<rows {
                (storage[plane] + r * rowBytes + start).copyMemory(from: tile + r * tileRowBytes, byteCount: count)
            }
            x += tileWidth
        }
    }
}
