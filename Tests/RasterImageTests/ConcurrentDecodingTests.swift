import RasterImage
import Testing

@Suite("Decoding in parallel")
struct ConcurrentDecodingTests {
    @Test("many decodes at once give the same pixels as one at a time")
    func parallelDecodes() async throws {
        // Given every fixture decoded one at a time
        let fixtures = Fixtures.all.filter { $0.page == nil }
        let decoder = ImageDecoder()
        let sequential = try fixtures.map { try decoder.decode(.bytes($0.bytes)) }

        // When all of them are decoded four times over, concurrently, half from files
        let parallel = try await withThrowingTaskGroup(of: (Int, RasterImage).self) { group in
            for round in 0..<4 {
                for (index, fixture) in fixtures.enumerated() {
                    let source: ImageSource = round % 2 == 0 ? .bytes(fixture.bytes) : .file(path: fixture.path)
                    group.addTask { (index, try decoder.decode(source)) }
                }
            }
            var results: [(Int, RasterImage)] = []
            for try await result in group { results.append(result) }
            return results
        }

        // Then every result is identical to the sequential one
        #expect(parallel.count == fixtures.count * 4)
        for (index, image) in parallel {
            #expect(image == sequential[index], "\(fixtures[index].name)")
        }
    }

    @Test("SVG documents with text, gradients and filters render alike on many threads at once")
    func parallelSVG() async throws {
        // librsvg, cairo, pango and fontconfig, each thread with its own handle.
        let text = Array(
            ("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"160\" height=\"60\">"
                + "<filter id=\"b\"><feGaussianBlur stdDeviation=\"2\"/></filter>"
                + "<rect width=\"160\" height=\"60\" fill=\"#36c\" filter=\"url(#b)\"/>"
                + "<text x=\"8\" y=\"40\" font-family=\"DejaVu Sans\" font-size=\"28\" fill=\"#fff\">Thumbs 42</text></svg>")
                .utf8)
        let documents =
            [text] + ["gradients", "shapes", "opacity-clip-mask"].map { Fixtures.bytes("formats/\($0).svg") }
        let decoder = ImageDecoder()
        let sequential = try documents.map { try decoder.decode(.bytes($0)) }
        let parallel = try await withThrowingTaskGroup(of: (Int, RasterImage).self) { group in
            for _ in 0..<8 {
                for (index, document) in documents.enumerated() {
                    group.addTask { (index, try decoder.decode(.bytes(document))) }
                }
            }
            var results: [(Int, RasterImage)] = []
            for try await result in group { results.append(result) }
            return results
        }
        #expect(parallel.count == documents.count * 8)
        for (index, image) in parallel { #expect(image == sequential[index], "document \(index)") }
        // The text was drawn: white pixels where the words are.
        #expect(sequential[0].pixels.enumerated().contains { $0.offset % 4 == 0 && $0.element > 240 })
    }

    @Test("hostile inputs fail the same way in parallel")
    func parallelFailures() async {
        let names = ["png-30000x30000.png", "jpeg-50000x50000.jpg", "gif-65535x65535.gif", "tiff-absurd-strips.tif"]
        let reasons = await withTaskGroup(of: ImageDecodingError.Reason?.self) { group in
            for _ in 0..<8 {
                for name in names {
                    group.addTask {
                        do {
                            _ = try ImageDecoder().decode(.file(path: Fixtures.root + "/hostile/" + name))
                            return nil
                        } catch let error as ImageDecodingError {
                            return error.reason
                        } catch {
                            return nil
                        }
                    }
                }
            }
            var reasons: [ImageDecodingError.Reason?] = []
            for await reason in group { reasons.append(reason) }
            return reasons
        }
        #expect(reasons.count == 32)
        #expect(reasons.allSatisfy { $0 != nil })
    }
}
