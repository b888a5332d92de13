/// Bytes kept where they may be cut short or changed (a cache file, an object in a
/// bucket): a four-byte magic naming the kind, the metadata's length (UInt32 LE), the
/// body's length (UInt64 LE), the CRC32C of the metadata and of the body (UInt32 LE
/// each), the metadata, the body. A copy whose lengths do not add up to its size was cut
/// short; one whose checksums do not match changed after it was written: neither is
/// read. The disk cache's entries and the service's stored results are written so.
///
/// ```swift
/// let bytes = ChecksummedEnvelope.encode(magic: Array("ILC2".utf8), metadata: json, body: image)
/// guard case .valid(let metadata, let body) = ChecksummedEnvelope.decode(bytes, magic: Array("ILC2".utf8))
/// else { return nil }
/// ```
package enum ChecksummedEnvelope {
    /// What one read found.
    package enum Decoded: Equatable, Sendable {
        case valid(metadata: [UInt8], body: [UInt8])
        /// Not an envelope of this magic, cut short, or changed after it was written.
        case damaged(String)
    }

    /// The bytes before the metadata.
    package static let headerSize = 24

    package static func encode(magic: [UInt8], metadata: [UInt8], body: some Collection<UInt8>) -> [UInt8] {
        var bytes = magic
        bytes.reserveCapacity(headerSize + metadata.count + body.count)
        withUnsafeBytes(of: UInt32(truncatingIfNeeded: metadata.count).littleEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt64(body.count).littleEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: CRC32C.checksum(metadata).littleEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: CRC32C.checksum(body).littleEndian) { bytes.append(contentsOf: $0) }
        bytes += metadata
        bytes += body
        return bytes
    }

    /// The metadata and body `bytes` hold, when they are an intact envelope of `magic`.
    package static func decode(_ bytes: [UInt8], magic: [UInt8]) -> Decoded {
        guard bytes.count >= headerSize, bytes.starts(with: magic) else { return .damaged("no header") }
        // Lengths from the bytes: a damaged copy may hold any value, so they are summed checked.
        guard let metadataCount = Checked.int(little(bytes, 4..<8)), let bodyCount = Checked.int(little(bytes, 8..<16)),
            let total = Checked.sum(headerSize, metadataCount, bodyCount), total == bytes.count
        else {
            return .damaged("lengths do not add up to the \(bytes.count) bytes")
        }
        let bodyStart = headerSize + metadataCount
        let (metadataSum, bodySum) = bytes.withUnsafeBytes { raw in
            (
                CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[headerSize..<bodyStart])),
                CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[bodyStart...]))
            )
        }
        guard metadataSum == UInt32(truncatingIfNeeded: little(bytes, 16..<20)) else {
            return .damaged("metadata checksum")
        }
        guard bodySum == UInt32(truncatingIfNeeded: little(bytes, 20..<24)) else { return .damaged("body checksum") }
        return .valid(metadata: Array(bytes[headerSize..<bodyStart]), body: Array(bytes[bodyStart...]))
    }

    /// The metadata of the envelope in the file at `path`, read without its body; `nil`
    /// when the file is not a regular file holding an envelope of `magic`, or the
    /// metadata's checksum does not match.
    package static func metadata(ofFileAt path: String, magic: [UInt8]) -> [UInt8]? {
        guard let (descriptor, size) = try? FileSystem.openRegularFile(path, followingLinks: false) else { return nil }
        defer { try? System.close(descriptor) }
        guard size >= headerSize, let header = FileSystem.read(descriptor, count: headerSize, at: 0),
            header.starts(with: magic), let metadataCount = Checked.int(little(header, 4..<8)),
            metadataCount <= size - headerSize,
            let metadata = FileSystem.read(descriptor, count: metadataCount, at: headerSize),
            CRC32C.checksum(metadata) == UInt32(truncatingIfNeeded: little(header, 16..<20))
        else { return nil }
        return metadata
    }

    /// The little-endian number in `bytes[range]` (at most eight bytes).
    private static func little(_ bytes: [UInt8], _ range: Range<Int>) -> UInt64 {
        bytes[range].reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }
}
