import Foundation

/// What a service allows in URLs beyond the options themselves: presets, security
/// options, the allowed options, the argument separator, the base URL and
/// replacements of sources, and the clock `expires` is judged by.
///
/// ```swift
/// var rules = URLRules()
/// try rules.addPresets(["thumb=rs:fill:300:300/q:70"])
/// rules.onlyPresets = true
/// ```
public struct URLRules: Sendable {
    /// Presets by name: their options, applied where `pr` names them. The `default`
    /// preset is applied to every URL before its own options.
    private(set) var presets: [String: [ProcessingURL.Option]] = [:]

    /// The names of the presets.
    public var presetNames: [String] { presets.keys.sorted() }
    /// Only presets may be named: the first segment of a URL lists preset names,
    /// separated by the argument separator (imgproxy's `IMGPROXY_ONLY_PRESETS`).
    public var onlyPresets = false
    /// Serve the security options (`msr`, `msfs`, `maf`, `mafr`, `mrd`); each can only
    /// lower the service's own limit.
    public var allowsSecurityOptions = false
    /// The options a URL may use, by the names it writes them with (`w`, `width`...);
    /// `nil`: all. Presets may hold others (imgproxy's `IMGPROXY_ALLOWED_PROCESSING_OPTIONS`).
    public var allowedOptions: Set<String>?
    /// What separates an option's name and arguments (imgproxy's `IMGPROXY_ARGUMENTS_SEPARATOR`).
    public var argumentsSeparator: Character = ":"
    /// Prepended to every source that does not start with it (`IMGPROXY_BASE_URL`).
    public var baseURL: String?
    /// Rewrites of sources, in order, before the base URL (`IMGPROXY_URL_REPLACEMENTS`).
    public var urlReplacements: [URLReplacement] = []
    /// A base64 source may be followed by a last segment that is only a file name,
    /// dropped (`IMGPROXY_BASE64_URL_INCLUDES_FILENAME`).
    public var base64URLIncludesFilename = false
    /// The time `exp` is compared with.
    public var now: @Sendable () -> Date = { Date() }
    /// Parsing an `/info` URL: its own options (`bh`) are accepted.
    var forInfo = false

    public init() {}

    /// A preset that cannot be used: not `NAME=OPTIONS`, an empty name or value, or
    /// options a URL could not take (an unknown option or preset, a bad argument).
    public struct InvalidPreset: Error, Sendable, Hashable, CustomStringConvertible {
        /// The entry as given.
        public let definition: String
        /// What is wrong with it, in a few words.
        public let reason: String
        /// `preset DEFINITION REASON`, one line.
        public var description: String { "preset \(definition) \(reason)" }
    }

    /// Adds presets, each `NAME=OPTIONS` (options separated by `/`, as in a URL),
    /// as imgproxy reads `IMGPROXY_PRESETS`: blank entries and `#` comments are
    /// skipped; a preset may name presets given after it; every preset is checked
    /// once all are known.
    ///
    /// Throws ``InvalidPreset`` for an entry without exactly one `=`, with an empty name
    /// or value, or whose options are invalid or name an unknown preset; the rules are
    /// then unchanged.
    public mutating func addPresets(_ definitions: [String]) throws(InvalidPreset) {
        // Checked as a whole on a copy: the rules change only when every preset is valid.
        var candidate = self
        var definitionOf: [String: String] = [:]
        for definition in definitions {
            let trimmed = definition.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty, !trimmed.hasPrefix("#") else { continue }
            let halves = trimmed.split(separator: "=", omittingEmptySubsequences: false)
            let name = halves.first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
            let value = halves.count == 2 ? halves[1].trimmingCharacters(in: .whitespaces) : ""
            guard halves.count == 2, !name.isEmpty, !value.isEmpty else {
                throw InvalidPreset(
                    definition: trimmed, reason: "is not NAME=OPTIONS (as thumb=rs:fill:300:300/q:80)")
            }
            let (options, rest) = ProcessingURL.options(
                in: value.split(separator: "/", omittingEmptySubsequences: false), self)
            if let segment = rest.first {
                throw InvalidPreset(definition: trimmed, reason: "has \(segment), which is not an option")
            }
            candidate.presets[name] = options
            definitionOf[name] = trimmed
        }
        for (name, options) in candidate.presets {
            var check = ProcessingOptions()
            for option in options {
                do {
                    try check.apply(name: option.name, option.arguments, rules: candidate, presetsInUse: [name])
                } catch {
                    throw InvalidPreset(definition: definitionOf[name] ?? name, reason: "is invalid: \(error)")
                }
            }
        }
        self = candidate
    }

    /// Adds one preset, checked at once (``addPresets(_:)`` checks a list together).
    public mutating func addPreset(_ definition: String) throws(InvalidPreset) {
        try addPresets([definition])
    }

    /// A source rewrite: every match of `pattern` replaced by `template`, whose
    /// `${1}` (or `$1`) names the pattern's groups (imgproxy's `IMGPROXY_URL_REPLACEMENTS`).
    public struct URLReplacement: @unchecked Sendable {
        // NSRegularExpression is immutable once made, and safe to use from any thread.
        let pattern: NSRegularExpression
        let template: String

        /// A rewrite of what `pattern` matches into `template`; `nil` when the pattern
        /// is not a regular expression.
        public init?(pattern: String, template: String) {
            guard let expression = try? NSRegularExpression(pattern: pattern) else { return nil }
            self.pattern = expression
            self.template = template.replacingOccurrences(
                of: #"\$\{(\d+)\}"#, with: "\\$$1", options: .regularExpression)
        }

        /// imgproxy's form (`IMGPROXY_URL_REPLACEMENTS`): `pattern` matches from the
        /// start, each `*` a run without `/`, the rest literally; `${1}` in `template`
        /// is what the first `*` matched.
        ///
        /// ```swift
        /// URLReplacement(wildcard: "mys3://*/", template: "https://${1}.s3.amazonaws.com/")
        /// ```
        public init?(wildcard pattern: String, template: String) {
            let parts = pattern.components(separatedBy: "*").map { NSRegularExpression.escapedPattern(for: $0) }
            self.init(pattern: "^" + parts.joined(separator: "([^/]*)"), template: template)
        }

        func apply(_ text: String) -> String {
            pattern.stringByReplacingMatches(
                in: text, range: NSRange(text.startIndex..., in: text), withTemplate: template)
        }
    }
}
