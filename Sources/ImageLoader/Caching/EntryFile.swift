import Crypto
import Foundation
import ImageLoaderSupport
import Logging
import RasterImage

/// The layout of an entry file: a magic ("ILC2" for a response, "ILF2" for a remembered
/// failure), the metadata's length (UInt32 LE), the body's length (UInt64 LE), the
/// CRC32C of the metadata and of the body (UInt32 LE each), the metadata as JSON, the
/// body. A file whose lengths do not add up to its size was cut short, and one whose
/// checksums do not match changed after it was written: neither is used. "ILC1" files
/// and bare JSON failure records (before checksums) are recognised as the earlier format.
enum EntryFile {
    enum Kind {
        case response, failure

        var magic: [UInt8] { Array((self == .response ? "ILC2" : "ILF2").utf8) }
    }

    enum Decoded: Equatable {
        case valid(metadata: [UInt8], body: [UInt8])
        /// A response written before entries carried checksums.
        case earlierFormat
        /// Not an entry of this kind: cut short, overwritten, or changed after it was written.
        case damaged(String)
    }

    static let headerSize = 24
    static let earlierMagic: [UInt8] = Array("ILC1".utf8)

    static func encode(_ response: StoredResponse, body: [UInt8]) throws -> [UInt8] {
        encode(metadata: [UInt8](try JSONEncoder().encode(response)), body: body, kind: .response)
    }

    static func encode(metadata: [UInt8], body: [UInt8], kind: Kind) -> [UInt8] {
        var bytes = kind.magic
        bytes.reserveCapacity(headerSize + metadata.count + body.count)
        withUnsafeBytes(of: UInt32(metadata.count).littleEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt64(body.count).littleEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: CRC32C.checksum(metadata).littleEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: CRC32C.checksum(body).littleEndian) { bytes.append(contentsOf: $0) }
        bytes += metadata
        bytes += body
        return bytes
    }

    /// The URL an entry file is for, from its metadata alone (the body is not read),
    /// or `nil` when the file is not a readable entry of `kind` or its metadata's
    /// checksum does not match.
    static func key(ofFileAt path: String, kind: Kind) -> String? {
        guard let (descriptor, size) = try? FileSystem.openRegularFile(path, followingLinks: false) else { return nil }
        defer { try? System.close(descriptor) }
        guard size >= headerSize, let header = FileSystem.read(descriptor, count: headerSize, at: 0),
            header.starts(with: kind.magic)
        else { return nil }
        func little(_ range: Range<Int>) -> UInt32 { header[range].reversed().reduce(0) { $0 << 8 | UInt32($1) } }
        let metadataCount = Int(little(4..<8))
        guard metadataCount <= size - headerSize,
            let metadata = FileSystem.read(descriptor, count: metadataCount, at: headerSize),
            CRC32C.checksum(metadata) == little(16..<20)
        else { return nil }
        struct Keyed: Decodable { var url: String }
        return (try? JSONDecoder().decode(Keyed.self, from: Data(metadata)))?.url
    }

    static func decode(_ bytes: [UInt8], kind: Kind) -> Decoded {
        guard bytes.count >= 4 else { return .damaged("\(bytes.count) bytes") }
        // Before checksums: a response began "ILC1", a remembered failure was bare JSON.
        if kind == .response && bytes.starts(with: earlierMagic) { return .earlierFormat }
        if kind == .failure && bytes.first == UInt8(ascii: "{") { return .earlierFormat }
        guard bytes.count >= headerSize, bytes.starts(with: kind.magic) else { return .damaged("no entry header") }
        func little(_ range: Range<Int>) -> UInt64 {
            bytes[range].reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        }
        // Lengths from the file: a damaged entry may hold any value, so they are summed checked.
        guard let metadataCount = Checked.int(little(4..<8)), let bodyCount = Checked.int(little(8..<16)),
            let total = Checked.sum(headerSize, metadataCount, bodyCount), total == bytes.count
        else {
            return .damaged("lengths do not add up to the file's \(bytes.count) bytes")
        }
        let bodyStart = headerSize + metadataCount
        let (metadataSum, bodySum) = bytes.withUnsafeBytes { raw in
            (
                CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[headerSize..<bodyStart])),
                CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[bodyStart...]))
            )
        }
        guard metadataSum == UInt32(truncatingIfNeeded: little(16..<20)) else { return .damaged("metadata checksum") }
        guard bodySum == UInt32(truncatingIfNeeded: little(20..<24)) else { return .damaged("body checksum") }
        return .valid(metadata: Array(bytes[headerSize..<bodyStart]), body: Array(bytes[bodyStart...]))
    }
}
