import Foundation
import RasterImage
import TestSupport
import Testing

@testable import ImageLoader
@testable import ImageLoaderCLI

@Suite("batch's contact sheet labels")
struct BatchSheetLabelTests {
    @Test("a thumbnail read back from the disk cache is labelled with its file's format, not the output's")
    func sourceFormatOfStoredThumbnails() throws {
        func image(_ format: ImageFormat) throws -> RasterImage {
            try #require(
                RasterImage(
                    width: 2, height: 2, frames: [.init(pixels: [UInt8](repeating: 90, count: 16))], format: format))
        }
        // As a warm batch sees it: the thumbnail decoded from its stored JPEG says JPEG.
        let stored = try image(.jpeg)
        let png = URL(fileURLWithPath: Command.fixture("images/png-rgb8.png"))
        for source in [LoadedImage.Source.disk, .networkNotModified] {
            let loaded = LoadedImage(image: stored, source: source, url: png, freshness: .fresh)
            #expect(BatchRunner.sourceFormat(of: loaded, url: png) == .png, "\(source)")
            // A URL's stored thumbnail: the source's format is not known, so none is claimed.
            let remote = URL(string: "https://example.com/a.png")!
            #expect(BatchRunner.sourceFormat(of: loaded, url: remote) == nil, "\(source)")
        }
        // Made now (or kept in memory as made): the image's own record is the source's.
        let made = LoadedImage(image: try image(.webp), source: .networkToDisk, url: png, freshness: .fresh)
        #expect(BatchRunner.sourceFormat(of: made, url: png) == .webp)
    }
}
