import Crypto
import Foundation
import ImageLoaderSupport
import Logging
import RasterImage

/// An entry file: a ``ChecksummedEnvelope`` with the magic "ILC2" for a response,
/// "ILF2" for a remembered failure, the metadata as JSON, the body. "ILC1" files and
/// bare JSON failure records (before checksums) are recognised as the earlier format.
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

    static let earlierMagic: [UInt8] = Array("ILC1".utf8)

    static func encode(_ response: StoredResponse, body: [UInt8]) throws -> [UInt8] {
        encode(metadata: [UInt8](try JSONEncoder().encode(response)), body: body, kind: .response)
    }

    static func encode(metadata: [UInt8], body: [UInt8], kind: Kind) -> [UInt8] {
        ChecksummedEnvelope.encode(magic: kind.magic, metadata: metadata, body: body)
    }

    /// The URL an entry file is for, from its metadata alone (the body is not read),
    /// or `nil` when the file is not a readable entry of `kind` or its metadata's
    /// checksum does not match.
    static func key(ofFileAt path: String, kind: Kind) -> String? {
        guard let metadata = ChecksummedEnvelope.metadata(ofFileAt: path, magic: kind.magic) else { return nil }
        struct Keyed: Decodable { var url: String }
        return (try? JSONDecoder().decode(Keyed.self, from: Data(metadata)))?.url
    }

    static func decode(_ bytes: [UInt8], kind: Kind) -> Decoded {
        guard bytes.count >= 4 else { return .damaged("\(bytes.count) bytes") }
        // Before checksums: a response began "ILC1", a remembered failure was bare JSON.
        if kind == .response && bytes.starts(with: earlierMagic) { return .earlierFormat }
        if kind == .failure && bytes.first == UInt8(ascii: "{") { return .earlierFormat }
        switch ChecksummedEnvelope.decode(bytes, magic: kind.magic) {
        case .valid(let metadata, let body): return .valid(metadata: metadata, body: body)
        case .damaged(let why): return .damaged(why)
        }
    }
}
