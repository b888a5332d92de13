import Foundation
import TestSupport
import Testing

/// libheif, libavif, libtiff and libjxl (with the HEVC and AV1 codecs and the rest they load) are
/// opened when their format is first met, not when the process starts: the dynamic loader's own
/// account (`LD_DEBUG=files`) of what a process maps.
@Suite("Format libraries opened on first use")
struct LazyLibraryTests {
    /// The libraries the dynamic loader opened for `arguments`, by file name.
    func opened(_ arguments: [String], environment: [String: String] = [:]) async throws -> (Set<String>, CommandResult)
    {
        let run = try await Command.run(arguments, environment: environment.merging(["LD_DEBUG": "files"]) { $1 })
        var names: Set<String> = []
        for line in run.stderr.split(separator: "\n") {
            guard let range = line.range(of: "file="), line.contains("needed by") || line.contains("loaded by")
            else { continue }
            let rest = line[range.upperBound...]
            names.insert(String(rest.prefix { $0 != " " && $0 != ";" && $0 != "[" }))
        }
        return (names, run)
    }

    @Test(
        "a JPEG or PNG job maps none of the libraries nor their codecs; a HEIC, an AVIF, a TIFF and a JPEG XL job open theirs"
    )
    func openedWhenMet() async throws {
        try await Command.withTemporaryDirectory { directory in
            let codecs = [
                "libheif.so.1", "libavif.so.15", "libde265.so.0", "libx265.so.199", "libdav1d.so.6", "libaom.so.3",
                "libtiff.so.6", "libzstd.so.1", "libjxl.so.0.7", "libhwy.so.1", "librsvg-2.so.2", "libcairo.so.2",
                "libfreetype.so.6",
            ]
            for input in ["images/jpeg-800x600.jpg", "images/png-rgb8.png"] {
                let (names, run) = try await opened(
                    ["thumbnail", Command.fixture(input), "--size", "64", "-o", directory.path + "/t.png"])
                #expect(run.status == 0, "\(input): \(run.stderr.suffix(300))")
                #expect(!names.isEmpty, "LD_DEBUG printed nothing")
                for codec in codecs { #expect(!names.contains(codec), "\(input) mapped \(codec)") }
            }
            let (heif, heifRun) = try await opened(
                [
                    "thumbnail", Command.fixture("modern/images/heif-8bit.heic"), "--size", "64", "-o",
                    directory.path + "/h.png",
                ])
            #expect(heifRun.status == 0)
            #expect(heif.contains("libheif.so.1") && heif.contains("libde265.so.0") && !heif.contains("libavif.so.15"))
            let (avif, avifRun) = try await opened(
                [
                    "thumbnail", Command.fixture("modern/images/avif-8bit.avif"), "--size", "64", "-o",
                    directory.path + "/a.png",
                ])
            #expect(avifRun.status == 0)
            #expect(avif.contains("libavif.so.15") && !avif.contains("libheif.so.1"))
            let (tiff, tiffRun) = try await opened(
                [
                    "thumbnail", Command.fixture("images/tiff-rgb-lzw.tif"), "--size", "64", "-o",
                    directory.path + "/t.png",
                ])
            #expect(tiffRun.status == 0)
            #expect(tiff.contains("libtiff.so.6") && !tiff.contains("libavif.so.15"))
            let (jxl, jxlRun) = try await opened(
                [
                    "thumbnail", Command.fixture("modern/images/jxl-alpha.jxl"), "--size", "64", "-o",
                    directory.path + "/x.png",
                ])
            #expect(jxlRun.status == 0)
            #expect(jxl.contains("libjxl.so.0.7") && !jxl.contains("libtiff.so.6"))
            let (svg, svgRun) = try await opened(
                [
                    "thumbnail", Command.fixture("formats/gradients.svg"), "--size", "64", "-o",
                    directory.path + "/s.png",
                ])
            #expect(svgRun.status == 0, "\(svgRun.stderr.suffix(300))")
            #expect(svg.contains("librsvg-2.so.2") && svg.contains("libcairo.so.2") && !svg.contains("libjxl.so.0.7"))
            // The contact sheet's labels open FreeType.
            let (sheet, sheetRun) = try await opened(
                [
                    "batch", Command.fixture("images/jpeg-800x600.jpg"), "--size", "64", "--out", directory.path + "/b",
                    "--sheet", directory.path + "/sheet.png", "--cache-dir", directory.path + "/cache",
                ])
            #expect(sheetRun.status == 0, "\(sheetRun.stderr.suffix(300))")
            #expect(sheet.contains("libfreetype.so.6") && !sheet.contains("librsvg-2.so.2"))
        }
    }

    @Test("a library that cannot be opened is a typed error naming it and its package, not a crash")
    func missingLibrary() async throws {
        try await Command.withTemporaryDirectory { directory in
            for (input, variable, soname) in [
                ("modern/images/heif-8bit.heic", "IMAGELOADER_HEIF_LIBRARY", "libheif.so.1"),
                ("modern/images/avif-8bit.avif", "IMAGELOADER_AVIF_LIBRARY", "libavif.so.15"),
                ("images/tiff-rgb-lzw.tif", "IMAGELOADER_TIFF_LIBRARY", "libtiff.so.6"),
                ("modern/images/jxl-alpha.jxl", "IMAGELOADER_JXL_LIBRARY", "libjxl.so.0.7"),
                ("formats/gradients.svg", "IMAGELOADER_SVG_LIBRARY", "librsvg-2.so.2"),
            ] {
                let run = try await Command.run(
                    ["thumbnail", Command.fixture(input), "--size", "64", "-o", directory.path + "/t.png"],
                    environment: [variable: directory.path + "/missing.so"])
                #expect(run.status == 1, "\(input): \(run.status)")
                #expect(run.stderr.contains("\(soname) cannot be opened"), "\(run.stderr)")
                #expect(run.stderr.contains("apt-get install"), "\(run.stderr)")
                // The rest of the process is unaffected: a JPEG still works beside it.
                let jpeg = try await Command.run(
                    [
                        "thumbnail", Command.fixture("images/jpeg-800x600.jpg"), "--size", "64", "-o",
                        directory.path + "/j.png",
                    ], environment: [variable: directory.path + "/missing.so"])
                #expect(jpeg.status == 0)
            }
        }
    }
}
