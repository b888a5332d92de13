/// Text from the fixed-size, NUL-terminated message buffers the C shims fill.
enum CString {
    /// The UTF-8 text before the first NUL in `bytes`.
    static func decode(_ bytes: UnsafeRawBufferPointer) -> String {
        String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
    }

    /// The text before the first NUL of a C `char[N]` member or a `[CChar]` buffer.
    static func decode<T>(_ value: inout T) -> String {
        withUnsafeBytes(of: &value) { decode($0) }
    }

    static func decode(_ buffer: [CChar]) -> String {
        buffer.withUnsafeBytes { decode($0) }
    }
}
