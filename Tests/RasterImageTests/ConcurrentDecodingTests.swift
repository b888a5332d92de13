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
