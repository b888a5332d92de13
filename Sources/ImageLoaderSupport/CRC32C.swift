import CISAL

/// CRC32C (Castagnoli, as iSCSI and ext4 use it), by ISA-L: about 20 GB/s here, twice
/// libdeflate's CRC-32. What the disk cache checks its entries with.
///
/// ```swift
/// let check = CRC32C.checksum(Array("123456789".utf8))      // 0xE306_9283
/// ```
package enum CRC32C {
    /// The checksum of `bytes`.
    package static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return 0 }
        // ISA-L keeps the register without the final inversion: start from all ones, invert at the end.
        return ~cisal_crc32c(base, bytes.count, 0xFFFF_FFFF)
    }

    /// The checksum of `bytes`, read in place when they are contiguous.
    package static func checksum(_ bytes: some Collection<UInt8>) -> UInt32 {
        if let sum = bytes.withContiguousStorageIfAvailable({ checksum(UnsafeRawBufferPointer($0)) }) { return sum }
        return Array(bytes).withUnsafeBytes { checksum($0) }
    }
}
