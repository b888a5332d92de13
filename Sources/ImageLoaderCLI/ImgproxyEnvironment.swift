import ArgumentParser
import Foundation

/// imgproxy's `IMGPROXY_*` variables, read with the checks each kind of value needs:
/// `serve` takes each of its settings from its option, else from the variable.
struct ImgproxyEnvironment {
    let values: [String: String]

    init(_ values: [String: String]) { self.values = values }

    /// The variable's text, trimmed; `nil` when unset or empty.
    func text(_ name: String) -> String? {
        guard let value = values[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        return value
    }

    /// A list, `separator`-separated, entries trimmed, empty ones left out.
    func list(_ name: String, separator: String = ",") -> [String] {
        guard let value = text(name) else { return [] }
        return value.components(separatedBy: separator).map { $0.trimmingCharacters(in: .whitespaces) }.filter {
            !$0.isEmpty
        }
    }

    func integer(_ name: String) throws -> Int? {
        guard let value = text(name) else { return nil }
        guard let number = Int(value) else { throw ValidationError("\(name) must be a whole number") }
        return number
    }

    func decimal(_ name: String) throws -> Double? {
        guard let value = text(name) else { return nil }
        guard let number = Double(value), number.isFinite else { throw ValidationError("\(name) must be a number") }
        return number
    }

    /// Megapixels (imgproxy's unit for resolutions) as pixels.
    func megapixels(_ name: String) throws -> Int? {
        guard let value = try decimal(name) else { return nil }
        guard value >= 0, value <= 1_000_000 else { throw ValidationError("\(name) is out of range") }
        return Int(value * 1_000_000)
    }

    /// `true`, `false`, `1`, `0` (as Go's `strconv.ParseBool` takes them).
    func flag(_ name: String) throws -> Bool? {
        guard let value = text(name) else { return nil }
        guard let on = Self.boolean(value) else { throw ValidationError("\(name) must be true or false") }
        return on
    }

    /// `true`, `false`, `1`, `0`, `t`, `f`, in any case (as Go's `strconv.ParseBool`); nil otherwise.
    static func boolean(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "1", "t", "true": true
        case "0", "f", "false": false
        default: nil
        }
    }

    /// `format=quality` pairs (`jpeg=80,webp=70`; `jpg` names JPEG), keyed by the
    /// service's format names.
    func formatQualities(_ name: String) throws -> [String: Int] {
        try Self.formatQualities(list(name), name: name)
    }

    static func formatQualities(_ entries: [String], name: String) throws -> [String: Int] {
        var qualities: [String: Int] = [:]
        for entry in entries {
            let parts = entry.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, let quality = Int(parts[1]), (1...100).contains(quality) else {
                throw ValidationError("\(name): \(entry) is not format=quality (1 to 100)")
            }
            qualities[parts[0].lowercased() == "jpg" ? "jpeg" : parts[0].lowercased()] = quality
        }
        return qualities
    }

    /// `host:port` or `:port` (any address: 0.0.0.0).
    func bind(_ name: String) throws -> (host: String, port: Int)? {
        guard let value = text(name) else { return nil }
        return try Self.parseBind(value, name: name)
    }

    static func parseBind(_ value: String, name: String) throws -> (host: String, port: Int) {
        guard let colon = value.lastIndex(of: ":"), let port = Int(value[value.index(after: colon)...]),
            (0...65_535).contains(port)
        else { throw ValidationError("\(name) must be host:port") }
        var host = String(value[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return (host.isEmpty ? "0.0.0.0" : host, port)
    }
}
