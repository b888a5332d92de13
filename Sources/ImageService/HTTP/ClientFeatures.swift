import Foundation
import HTTPTypes

/// What a request's client takes and asks for, as the service's settings let it
/// count (imgproxy's client features): the formats its `Accept` lists that the
/// service prefers or enforces, and its client hints (`DPR`, `Width` and their
/// `Sec-CH-` forms) when ``ImageService/Configuration/clientHints`` is on.
///
/// ```swift
/// let features = ClientFeatures(
///     accept: "image/avif,image/webp,*/*", dpr: nil, width: nil, configuration: configuration)
/// ```
struct ClientFeatures: Hashable, Sendable {
    /// Formats the client takes that the service prefers when the URL names none
    /// (`IMGPROXY_AUTO_*` or `IMGPROXY_ENFORCE_*`).
    var prefers: Set<ProcessingOptions.Format> = []
    /// Formats the client takes that the service answers in even when the URL names
    /// another (`IMGPROXY_ENFORCE_*`).
    var enforces: Set<ProcessingOptions.Format> = []
    /// The device pixel ratio the client states (above 0, at most 8).
    var dpr: Double?
    /// The width in physical pixels the client states (above 0).
    var width: Int?

    init() {}

    /// The features of a request with these header fields under `configuration`.
    init(
        accept: String?, dpr: [String?], width: [String?], configuration: ImageService.Configuration
    ) {
        if let accept {
            for format in ProcessingOptions.Format.negotiated {
                let (auto, enforced) = configuration.automatic(format)
                guard auto || enforced, format.acceptTypes.contains(where: { ResponseRules.accepts($0, in: accept) })
                else { continue }
                prefers.insert(format)
                if enforced { enforces.insert(format) }
            }
        }
        guard configuration.clientHints else { return }
        // The first field that holds a usable value, `Sec-CH-` first, as imgproxy reads them.
        self.dpr = dpr.lazy.compactMap { $0.flatMap(ClientFeatures.ratio) }.first
        self.width = width.lazy.compactMap { $0.flatMap(ClientFeatures.physicalWidth) }.first
    }

    private static func ratio(_ text: String) -> Double? {
        guard let value = Double(text.trimmingCharacters(in: .whitespaces)), value > 0, value <= 8 else {
            return nil
        }
        return value
    }

    private static func physicalWidth(_ text: String) -> Int? {
        guard let value = Int(text.trimmingCharacters(in: .whitespaces)), value > 0 else { return nil }
        return min(value, ProcessingOptions.maxSide)
    }

    /// The features of a request with these header fields.
    init(_ headers: HTTPFields, configuration: ImageService.Configuration) {
        self.init(
            accept: headers[.accept], dpr: [headers[.secCHDPR], headers[.dpr]],
            width: [headers[.secCHWidth], headers[.width]], configuration: configuration)
    }

    /// What of these features the format depends on (the hints are in the options).
    var formats: ClientFeatures {
        var formats = ClientFeatures()
        formats.prefers = prefers
        formats.enforces = enforces
        return formats
    }

    /// The options a URL starts from: the hints' DPR, and their width in CSS pixels
    /// (the physical width over the ratio, rounded), before the `default` preset and
    /// the URL's own options.
    var startingOptions: ProcessingOptions {
        var options = ProcessingOptions()
        if let dpr { options.dpr = dpr }
        if let width { options.width = Int((Double(width) / (dpr ?? 1)).rounded()) }
        return options
    }

    /// The `Vary` value of processed results under `configuration`: `Accept` when a
    /// format is chosen by it, the client hints' fields when they are read; `nil` when
    /// neither.
    static func vary(_ configuration: ImageService.Configuration) -> String? {
        var fields: [String] = []
        if ProcessingOptions.Format.negotiated.contains(where: {
            let (auto, enforced) = configuration.automatic($0)
            return auto || enforced
        }) {
            fields.append("Accept")
        }
        if configuration.clientHints { fields += ["Sec-Ch-Dpr", "Dpr", "Sec-Ch-Width", "Width"] }
        return fields.isEmpty ? nil : fields.joined(separator: ", ")
    }
}

extension ImageService.Configuration {
    /// Whether `format` is answered automatically to clients that take it, and whether
    /// it is enforced (over the URL's format).
    func automatic(_ format: ProcessingOptions.Format) -> (auto: Bool, enforced: Bool) {
        switch format {
        case .webp: (autoWebP, enforceWebP)
        case .avif: (autoAVIF, enforceAVIF)
        case .jxl: (autoJXL, enforceJXL)
        case .heic: (autoHEIC, enforceHEIC)
        default: (false, false)
        }
    }
}

extension ProcessingOptions.Format {
    /// The formats a client's `Accept` can choose, when the service's settings let it.
    static let negotiated: [ProcessingOptions.Format] = [.webp, .avif, .jxl, .heic]

    /// The media types in `Accept` that name this format (Safari lists HEIC as `image/heic`).
    var acceptTypes: [String] { self == .heic ? ["image/heic", "image/heif"] : [contentType] }
}

extension HTTPField.Name {
    static let secCHDPR = HTTPField.Name("Sec-CH-DPR")!
    static let dpr = HTTPField.Name("DPR")!
    static let secCHWidth = HTTPField.Name("Sec-CH-Width")!
    static let width = HTTPField.Name("Width")!
    static let originContentLength = HTTPField.Name("X-Origin-Content-Length")!
    static let originWidth = HTTPField.Name("X-Origin-Width")!
    static let originHeight = HTTPField.Name("X-Origin-Height")!
    static let resultWidth = HTTPField.Name("X-Result-Width")!
    static let resultHeight = HTTPField.Name("X-Result-Height")!
}

extension HTTPFields {
    /// imgproxy's debug fields: the source's size and the result's, upright.
    mutating func addDebugFields(origin: (width: Int, height: Int), result: (width: Int, height: Int)) {
        self[.originWidth] = String(origin.width)
        self[.originHeight] = String(origin.height)
        self[.resultWidth] = String(result.width)
        self[.resultHeight] = String(result.height)
    }
}
