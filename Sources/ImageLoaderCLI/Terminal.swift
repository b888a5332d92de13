import Foundation
import ImageLoaderSupport
import NIOCore
import RasterImage

/// Output of the command: results on stdout, one-line errors on stderr.
enum Terminal {
    /// The formats read by default, in words, for help texts: "PNG, JPEG, ... and JPEG XL".
    static let formatNames: String = {
        let names = ImageFormat.allCases.map(\.displayName)
        return names.dropLast().joined(separator: ", ") + " and " + (names.last ?? "")
    }()

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

    /// The extension of a path's last component (`"a/b.JPG"`: `"JPG"`); nil when it has
    /// none (a leading dot names a hidden file, not an extension).
    static func fileExtension(of path: String) -> String? {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return nil }
        return String(name[name.index(after: dot)...])
    }

    /// Writes `bytes` to `path` through a temporary file, so a reader never sees half a file.
    static func write(_ bytes: [UInt8], to path: String) throws {
        do {
            try Data(bytes).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw CommandFailure("cannot write \(path): \(whyNotWritable(path, error))")
        }
    }

    /// Creates `path` and the folders above it, or says in one line why it cannot.
    static func createFolder(_ path: String, for purpose: String) throws {
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw CommandFailure("cannot create the \(purpose) folder \(path): \(describe(error))")
        }
    }

    /// Why `path` could not be written, in words a person can act on: a missing folder
    /// is named as such.
    static func whyNotWritable(_ path: String, _ error: any Error) -> String {
        let folder = (path as NSString).deletingLastPathComponent
        if errno(of: error) == ENOENT, !folder.isEmpty, !FileManager.default.fileExists(atPath: folder) {
            return "the folder \(folder) does not exist (create it first)"
        }
        return describe(error)
    }

    /// An error in one line without the libraries' dumps: the system's text for a file
    /// or socket error (Foundation's `NSCocoaErrorDomain` wrappers, NIO's `IOError`), the
    /// error's own description otherwise.
    static func describe(_ error: any Error) -> String {
        if let code = errno(of: error) { return System.describe(errno: code).lowercased() }
        if let error = error as? CocoaError { return error.localizedDescription }
        return String(describing: error)
    }

    /// The `errno` behind `error`, when it is a system error however wrapped.
    static func errno(of error: any Error) -> Int32? {
        switch error {
        case let error as SystemError: return error.code
        case let error as IOError: return error.errnoCode
        case let error as POSIXError: return error.code.rawValue
        case let error as CocoaError:
            if let underlying = error.userInfo[NSUnderlyingErrorKey] as? any Error, let code = errno(of: underlying) {
                return code
            }
            switch error.code {
            case .fileNoSuchFile, .fileReadNoSuchFile: return ENOENT
            case .fileWriteNoPermission, .fileReadNoPermission: return EACCES
            case .fileWriteOutOfSpace: return ENOSPC
            case .fileWriteVolumeReadOnly: return EROFS
            default: return nil
            }
        default:
            let error = error as NSError
            if error.domain == NSPOSIXErrorDomain { return Int32(error.code) }
            if let underlying = error.userInfo[NSUnderlyingErrorKey] as? NSError,
                underlying.domain == NSPOSIXErrorDomain
            {
                return Int32(underlying.code)
            }
            return nil
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
    case array([JSONValue])

    var serialized: String {
        switch self {
        case .string(let text): JSONValue.quote(text)
        case .int(let value): String(value)
        case .double(let value): value.isFinite ? String(value) : "null"
        case .bool(let value): value ? "true" : "false"
        case .null: "null"
        case .object(let fields):
            "{" + fields.map { JSONValue.quote($0.0) + ":" + $0.1.serialized }.joined(separator: ",") + "}"
        case .array(let values): "[" + values.map(\.serialized).joined(separator: ",") + "]"
        }
    }

    static func quote(_ text: String) -> String {
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
