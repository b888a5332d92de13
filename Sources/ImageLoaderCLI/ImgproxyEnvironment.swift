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

    /// A setting's value: the option's when given, else the variable's, checked against
    /// `range` with an error that names the one the value came from ("IMGPROXY_TTL
    /// must be 0 or more", not the option nobody typed).
    func integer(
        _ option: Int?, _ flag: String, _ variable: String, in range: ClosedRange<Int>
    ) throws -> Int? {
        if let option { return try Self.checked(option, flag, range) }
        return try integer(variable, in: range)
    }

    /// The variable's whole number, checked against `range` under the variable's name.
    func integer(_ name: String, in range: ClosedRange<Int>) throws -> Int? {
        try integer(name).map { try Self.checked($0, name, range) }
    }

    /// ``integer(_:_:_:in:)`` for a number that may have a fraction.
    func decimal(
        _ option: Double?, _ flag: String, _ variable: String, in range: ClosedRange<Double>
    ) throws -> Double? {
        if let option { return try Self.checked(option, flag, range) }
        return try decimal(variable).map { try Self.checked($0, variable, range) }
    }

    /// `value` when `range` holds it; otherwise an error naming `name` and the range.
    static func checked(_ value: Int, _ name: String, _ range: ClosedRange<Int>) throws -> Int {
        guard !range.contains(value) else { return value }
        throw outOfRange(name, "\(range.lowerBound)", range.upperBound == .max ? nil : "\(range.upperBound)")
    }

    /// ``checked(_:_:_:)-(Int,_,_)`` for numbers with fractions (bounds written without ".0").
    static func checked(_ value: Double, _ name: String, _ range: ClosedRange<Double>) throws -> Double {
        guard !range.contains(value) else { return value }
        func text(_ bound: Double) -> String { bound == bound.rounded() ? "\(Int(bound))" : "\(bound)" }
        throw outOfRange(name, text(range.lowerBound), range.upperBound.isInfinite ? nil : text(range.upperBound))
    }

    private static func outOfRange(_ name: String, _ lower: String, _ upper: String?) -> ValidationError {
        ValidationError(
            upper.map { "\(name) must be between \(lower) and \($0)" } ?? "\(name) must be \(lower) or more")
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
