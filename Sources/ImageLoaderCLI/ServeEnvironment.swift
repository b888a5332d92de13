import ArgumentParser
import Foundation

/// The environment spelling of every `serve` option: `--allow-unsigned` is
/// `IMAGELOADER_ALLOW_UNSIGNED`, `--result-cache-mb` is `IMAGELOADER_RESULT_CACHE_MB`.
/// A container is configured by variables alone, so each option has one, read from the
/// command's own list of options (ArgumentParser's description of it), never from a
/// second list that could miss one.
///
/// Order of precedence: the option on the command line, then its `IMAGELOADER_*`
/// variable, then its `IMGPROXY_*` variable where imgproxy has one (read by the option's
/// own code), then the default.
enum ServeEnvironment {
    /// One option of a command as ArgumentParser describes it.
    struct Setting: Equatable {
        enum Kind: Equatable { case option, flag }
        /// The long name, without its dashes (`allow-unsigned`).
        let name: String
        let kind: Kind
        /// `--no-NAME`, for flags that have it.
        let inverted: String?
        let repeats: Bool
        /// The help text, as `--help` prints it.
        let help: String
        /// The default ArgumentParser knows (options with an initial value).
        let defaultValue: String?

        /// `IMAGELOADER_` and the name in capitals, dashes as underscores.
        var variable: String { "IMAGELOADER_" + name.uppercased().replacingOccurrences(of: "-", with: "_") }

        /// The `IMGPROXY_*` variables its help names (imgproxy's spelling of the same setting).
        var imgproxyVariables: [String] { ServeEnvironment.imgproxyNames(in: help) }
    }

    /// `serve`'s options, described once per process (the start reads them for the
    /// variables it adds and for the names it warns about).
    static let serve = settings(of: ServeCommand.self)

    /// The options of `command` (not `--help`, `--version` nor `--experimental-*`).
    static func settings(of command: any ParsableArguments.Type) -> [Setting] {
        guard let data = command._dumpHelp().data(using: .utf8),
            let info = try? JSONDecoder().decode(DumpedHelp.self, from: data)
        else { return [] }
        let all: [Setting] = (info.command.arguments ?? []).compactMap { argument in
            guard argument.kind == "option" || argument.kind == "flag", argument.shouldDisplay ?? true else {
                return nil
            }
            guard let name = (argument.names ?? []).first(where: { $0.kind == "long" })?.name,
                !["help", "version"].contains(name), !name.hasPrefix("experimental")
            else { return nil }
            return Setting(
                name: name, kind: argument.kind == "flag" ? .flag : .option, inverted: nil,
                repeats: argument.isRepeating, help: argument.abstract ?? "", defaultValue: argument.defaultValue)
        }
        // A flag with an inversion (`--auto-webp`, `--no-auto-webp`) is described as two:
        // one setting, whose false is the inversion.
        let names = Set(all.map(\.name))
        return all.compactMap { setting in
            if setting.name.hasPrefix("no-"), names.contains(String(setting.name.dropFirst(3))) { return nil }
            guard setting.kind == .flag, names.contains("no-" + setting.name) else { return setting }
            return Setting(
                name: setting.name, kind: .flag, inverted: "no-" + setting.name, repeats: false, help: setting.help,
                defaultValue: setting.defaultValue)
        }
    }

    /// The options of `serve` that `environment` sets and `given` (the arguments after
    /// `serve`) does not, as arguments to add: flags as `--NAME` or `--no-NAME`, options
    /// as `--NAME VALUE`, repeatable options comma-separated (`IMAGELOADER_PRESET=a=...,b=...`).
    static func arguments(
        for settings: [Setting], environment: [String: String], given: [String]
    ) throws -> [String] {
        let givenNames = Set(
            given.prefix { $0 != "--" }.filter { $0.hasPrefix("--") }.map {
                String($0.dropFirst(2).prefix { $0 != "=" })
            })
        var added: [String] = []
        for setting in settings {
            guard let raw = environment[setting.variable]?.trimmingCharacters(in: .whitespaces), !raw.isEmpty,
                !givenNames.contains(setting.name), !givenNames.contains(setting.inverted ?? "--")
            else { continue }
            switch setting.kind {
            case .flag:
                guard let on = ImgproxyEnvironment.boolean(raw) else {
                    throw ValidationError("\(setting.variable) must be true or false, not \(raw)")
                }
                if on {
                    added.append("--" + setting.name)
                } else if let inverted = setting.inverted {
                    added.append("--" + inverted)
                }
            case .option:
                let values =
                    setting.repeats
                    ? raw.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
                    : [raw]
                for value in values { added += ["--" + setting.name, value] }
            }
        }
        return added
    }

    /// The settings as one Markdown table, in `--help`'s order: the option, its variables
    /// (ours, then imgproxy's where it has one) and what it does (`--help`'s text, with
    /// the default). ServiceReference.md holds it (scripts/settings-table.sh writes it there).
    static func markdownTable(_ settings: [Setting]) -> String {
        func cell(_ text: String) -> String { text.replacingOccurrences(of: "|", with: "\\|") }
        var lines = ["| option | variables | what it sets |", "|---|---|---|"]
        for setting in settings {
            var option = "`--\(setting.name)`"
            if let inverted = setting.inverted { option += ", `--\(inverted)`" }
            if setting.repeats { option += " (repeatable)" }
            let variables = ([setting.variable] + setting.imgproxyVariables).map { "`\($0)`" }.joined(separator: ", ")
            var help = setting.help
            if let value = setting.defaultValue, !help.contains("[default:") { help += " [default: \(value)]" }
            lines.append("| \(option) | \(variables) | \(cell(help)) |")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The `IMGPROXY_*` names in `text`, in order, once each.
    static func imgproxyNames(in text: String) -> [String] {
        var names: [String] = []
        var rest = Substring(text)
        while let range = rest.range(of: "IMGPROXY_") {
            let name = rest[range.lowerBound...].prefix { $0.isUppercase || $0.isNumber || $0 == "_" }
            if name.count > "IMGPROXY_".count, !name.hasSuffix("_"), !names.contains(String(name)) {
                names.append(String(name))
            }
            rest = rest[name.endIndex...]
        }
        return names
    }

    /// ArgumentParser's description of a command (`--experimental-dump-help`), the parts read here.
    private struct DumpedHelp: Decodable {
        struct Command: Decodable { let arguments: [Argument]? }
        struct Argument: Decodable {
            struct Name: Decodable {
                let kind: String
                let name: String
            }
            let kind: String
            let names: [Name]?
            let isRepeating: Bool
            let shouldDisplay: Bool?
            let abstract: String?
            let defaultValue: String?
        }
        let command: Command
    }
}
