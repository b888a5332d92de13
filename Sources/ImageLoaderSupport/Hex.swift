/// Bytes as lowercase hexadecimal text: digests for file names, signatures and keys.
package enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    /// Two lowercase hex digits a byte, in order.
    package static func lowercase(_ bytes: some Sequence<UInt8>) -> String {
        var text = [UInt8]()
        text.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 15)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
