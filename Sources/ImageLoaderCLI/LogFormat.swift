import Foundation
import ImageLoaderSupport
import Logging

/// How `serve` writes its log (imgproxy's `IMGPROXY_LOG_FORMAT`): one line per event on
/// standard output, in text for people or as fields for a log collector.
enum LogFormat: String, CaseIterable {
    /// `2026-12-07T05:00:00+0000 info imageloader.http : method=GET ... GET /x 200`: swift-log's text lines.
    case pretty
    /// logfmt: `time=... level=info logger=imageloader.http msg="GET /x 200" status=200 ...`.
    case structured
    /// One JSON object a line: `{"time":...,"level":"info","logger":...,"msg":...,"status":200,...}`;
    /// numbers in the fields (status, bytes, ms) are JSON numbers.
    case json
    /// JSON as Google Cloud Logging reads it: `severity` and `message` in place of `level` and `msg`.
    case gcp

    /// The handler for `label` at `level`.
    func handler(label: String, level: Logger.Level) -> any LogHandler {
        switch self {
        case .pretty:
            var handler = StreamLogHandler.standardOutput(label: label)
            handler.logLevel = level
            return handler
        case .structured, .json, .gcp:
            return FieldsLogHandler(label: label, format: self, logLevel: level)
        }
    }
}

/// A log handler writing each event as one line of fields (logfmt or JSON) to standard
/// output, written whole with one `write`, so lines from several threads never interleave.
struct FieldsLogHandler: LogHandler {
    let label: String
    let format: LogFormat
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var fields = metadata
        if let extra = event.metadata { fields.merge(extra) { $1 } }
        let line = Self.line(
            time: Date(), level: event.level, label: label, message: event.message.description, fields: fields,
            format: format)
        try? System.write(Array(line.utf8), to: 1)
    }

    /// The line for one event (with its newline): the time (RFC 3339, UTC, milliseconds),
    /// the level, the logger, the message, then the fields sorted by name.
    static func line(
        time: Date, level: Logger.Level, label: String, message: String, fields: Logger.Metadata, format: LogFormat
    ) -> String {
        let stamp = timestamp(time)
        let sorted = fields.sorted { $0.key < $1.key }
        switch format {
        case .json, .gcp:
            let gcp = format == .gcp
            var object: [(String, JSONValue)] = [
                ("time", .string(stamp)),
                (gcp ? "severity" : "level", .string(gcp ? gcpSeverity(level) : level.rawValue)),
                ("logger", .string(label)), (gcp ? "message" : "msg", .string(message)),
            ]
            let reserved: Set<String> = ["time", "level", "severity", "logger", "msg", "message"]
            for (key, value) in sorted { object.append((reserved.contains(key) ? "field_" + key : key, json(value))) }
            return JSONValue.object(object).serialized + "\n"
        default:
            var parts = [
                "time=" + stamp, "level=" + level.rawValue, "logger=" + logfmt(label), "msg=" + logfmt(message),
            ]
            for (key, value) in sorted { parts.append(key + "=" + logfmt(value.description)) }
            return parts.joined(separator: " ") + "\n"
        }
    }

    /// A field's value in JSON: whole numbers, finite decimals and truth values as such,
    /// lists and dictionaries nested, the rest as text.
    static func json(_ value: Logger.Metadata.Value) -> JSONValue {
        switch value {
        case .string(let text): return .string(text)
        case .stringConvertible(let convertible):
            switch convertible {
            case let number as Int: return .int(number)
            case let number as Double where number.isFinite: return .double(number)
            case let flag as Bool: return .bool(flag)
            default: return .string(convertible.description)
            }
        case .array(let values): return .array(values.map(json))
        case .dictionary(let entries):
            return .object(entries.sorted { $0.key < $1.key }.map { ($0.key, json($0.value)) })
        }
    }

    /// logfmt's value: bare when it has no space, quote, `=` or control character, else quoted.
    static func logfmt(_ text: String) -> String {
        let plain =
            !text.isEmpty
            && !text.unicodeScalars.contains { $0 == " " || $0 == "\"" || $0 == "=" || $0.value < 0x20 || $0 == "\\" }
        return plain ? text : JSONValue.quote(text)
    }

    /// Google Cloud Logging's severity names.
    static func gcpSeverity(_ level: Logger.Level) -> String {
        switch level {
        case .trace, .debug: "DEBUG"
        case .info: "INFO"
        case .notice: "NOTICE"
        case .warning: "WARNING"
        case .error: "ERROR"
        case .critical: "CRITICAL"
        }
    }

    /// `2026-12-07T05:00:00.123Z`.
    static func timestamp(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        let milliseconds = Int((date.timeIntervalSince1970 - Double(seconds)) * 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1,
            Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), min(999, milliseconds))
    }
}
