import CJXL

/// libjxl's failure traces, captured instead of printed. Debian's libjxl 0.7 writes a
/// line to standard error at every level a failure passes through (from one to over a
/// hundred lines for a damaged file); the shim keeps the calling thread's lines while
/// a capture is active (see `cjxl_capture` in CJXL.h), and the first of them, the
/// deepest cause, joins the typed error. Other threads' output is never touched.
enum LibjxlDiagnostics {
    /// Runs `body` with libjxl's traces on this thread captured; a decoding error it
    /// throws carries libjxl's own first line as its cause.
    static func decoding<T>(_ body: () throws -> T) throws -> T {
        if let failure = LazyLibraries.jxlFailure {
            throw ImageDecodingError(.unsupported, format: .jxl, message: failure)
        }
        return try capturing(body) { error, cause in
            guard let error = error as? ImageDecodingError else { return error }
            let message = [error.message, cause].compactMap { $0 }.joined(separator: ": ")
            return ImageDecodingError(error.reason, format: error.format, message: message)
        }
    }

    /// The encoder's form: the same capture, its typed error annotated alike.
    static func encoding<T>(_ body: () throws(ImageEncodingError) -> T) throws(ImageEncodingError) -> T {
        if let failure = LazyLibraries.jxlFailure {
            throw ImageEncodingError(.failed, format: .jxl, message: failure)
        }
        return try capturing(body) { error, cause in
            ImageEncodingError(error.reason, format: error.format, message: "\(error.message): \(cause)")
        }
    }

    private static func capturing<T, E: Error>(_ body: () throws(E) -> T, annotate: (E, String) -> E) throws(E) -> T {
        let capture = UnsafeMutablePointer<cjxl_capture>.allocate(capacity: 1)
        capture.initialize(to: cjxl_capture())
        let previous = cjxl_capture_begin(capture)
        defer {
            cjxl_capture_end(previous)
            capture.deallocate()
        }
        do {
            return try body()
        } catch {
            guard let cause = cause(in: capture) else { throw error }
            throw annotate(error, cause)
        }
    }

    /// libjxl's first line without its source location (`./lib/jxl/dec_ma.cc:125: JXL_FAILURE: `).
    private static func cause(in capture: UnsafeMutablePointer<cjxl_capture>) -> String? {
        guard capture.pointee.lines > 0 else { return nil }
        let line = withUnsafeBytes(of: capture.pointee.first_line) { bytes in
            String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
        var text = Substring(line)
        if let location = text.range(of: ": "), text[..<location.lowerBound].contains(".cc:") {
            text = text[location.upperBound...]
        }
        if text.hasPrefix("JXL_FAILURE: ") { text = text.dropFirst("JXL_FAILURE: ".count) }
        return text.isEmpty ? nil : String(text)
    }
}
