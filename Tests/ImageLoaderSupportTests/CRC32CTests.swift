import CISAL
import Testing

@testable import ImageLoaderSupport

@Suite("CRC32C, the disk cache's checksum")
struct CRC32CTests {
    @Test("the published check value and RFC 3720's iSCSI vectors")
    func vectors() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([UInt8]()) == 0)
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(CRC32C.checksum(Array(0...31)) == 0x46DD_794E)
    }

    @Test("a slice, a non-contiguous collection and an array of the same bytes agree; one bit changes it")
    func sameBytes() {
        let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 13) }
        let whole = CRC32C.checksum(bytes)
        #expect(CRC32C.checksum(bytes[0...]) == whole)
        #expect(CRC32C.checksum(bytes.lazy.map { $0 }) == whole)
        var flipped = bytes
        flipped[50_000] ^= 1
        #expect(CRC32C.checksum(flipped) != whole)
    }

    @Test(
        "the vector registers' upper halves are clean after a checksum (ISA-L's loops are AVX where the CPU has it)",
        .enabled(if: cisal_avx_upper_in_use() >= 0, "the processor cannot say (XGETBV's XINUSE)"))
    func vectorState() {
        let bytes = [UInt8](repeating: 0x5A, count: 1 << 20)
        // On this thread: the checksum, then the state, with nothing between.
        let state = bytes.withUnsafeBytes { raw -> Int32 in
            _ = CRC32C.checksum(raw)
            return cisal_avx_upper_in_use()
        }
        #expect(state == 0)
    }
}
