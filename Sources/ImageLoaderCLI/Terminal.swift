import ImageLoaderSupport

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Output of the command: results on stdout, one-line errors on stderr.
enum Terminal {
    static func error(_ message: String) {
        let line = "imageloader: " + message.split(whereSeparator: \.isNewline).joined(separator: " ") + "\n"
        try? System.write(Array(line.utf8), to: 2)
    }

    /// One line on stdout, written at once (not buffered), for a supervisor reading it.
    static func line(_ text: String) {
        try? System.write(Array((text + "\n").utf8), to: 1)
    }

    /// One JSON object on one line, keys in the order given.
    static func printJSON(_ fields: KeyValuePairs<String, JSONValue>) {
        print(JSONValue.object(Array(fields)).serialized)
    }

    /// Writes `bytes` to `path` through a temporary file, so a reader never sees half a file.
    static func write(_ bytes: [UInt8], to path: String) throws {
        do {
            try Data(bytes).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw CommandFailure("cannot write \(path): \(error)")
        }
    }
}

/// The few JSON shapes the command prints, serialized in a fixed key order.
enum JSONValue {
    case string(String)
    case int(Int)
    case double(Double)
    case bool(Bool)
    case null
    case object([(String, JSONValue)])

    var serialized: String {
        switch self {
        case .string(let text): JSONValue.quote(text)
        case .int(let value): String(value)
        case .double(let value): value.isFinite ? String(value) : "null"
        case .bool(let value): value ? "true" : "false"
        case .null: "null"
        case .object(let fields):
            "{" + fields.map { JSONValue.quote($0.0) + ":" + $0.1.serialized }.joined(separator: ",") + "}"
        }
    }

    private static func quote(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
