import Foundation
import ImageLoaderSupport
import RasterImage

/// Reading one option of a URL or preset into ``ProcessingOptions``: the name (long or
/// short) and its arguments, each checked as imgproxy checks it.
extension ProcessingOptions {
    mutating func apply(
        name: String, _ arguments: [String], rules: URLRules = .init(), presetsInUse: [String] = []
    ) throws(ProcessingURL.Failure) {
        var reader = ArgumentReader(option: name, arguments: arguments)
        switch name {
        case "rs", "resize":
            try reader.limit(8)
            if let type = reader.text(0) { resizingType = try reader.parse(type) }
            try applySize(&reader, from: 1)
        case "s", "size":
            try reader.limit(7)
            try applySize(&reader, from: 0)
        case "rt", "resizing_type":
            try reader.limit(1)
            resizingType = try reader.parse(reader.required(0))
        case "w", "width":
            try reader.limit(1)
            width = try reader.pixels(reader.required(0))
        case "h", "height":
            try reader.limit(1)
            height = try reader.pixels(reader.required(0))
        case "mw", "min-width", "min_width":
            try reader.limit(1)
            minWidth = try reader.pixels(reader.required(0))
        case "mh", "min-height", "min_height":
            try reader.limit(1)
            minHeight = try reader.pixels(reader.required(0))
        case "z", "zoom":
            try reader.limit(2)
            zoomWidth = try reader.decimal(reader.required(0), above: 0, max: 100)
            zoomHeight =
                try reader.text(1).map { text throws(ProcessingURL.Failure) in
                    try reader.decimal(text, above: 0, max: 100)
                } ?? zoomWidth
        case "dpr":
            try reader.limit(1)
            dpr = try reader.decimal(reader.required(0), atLeast: 0.1, max: 8)
        case "el", "enlarge":
            try reader.limit(1)
            enlarge = try reader.flag(reader.required(0))
        case "ex", "extend":
            try reader.limit(4)
            extend = try reader.extend(from: 0)
        case "exar", "extend_ar", "extend_aspect_ratio":
            try reader.limit(4)
            extendAspectRatio = try reader.extend(from: 0)
        case "g", "gravity":
            try reader.limit(3)
            gravity = try reader.gravity(from: 0, allowed: GravityType.allCases)
        case "c", "crop":
            try reader.limit(5)
            let cropWidth = try reader.decimal(reader.required(0), atLeast: 0, max: Double(Self.maxSide))
            let cropHeight =
                try reader.text(1).map { text throws(ProcessingURL.Failure) in
                    try reader.decimal(text, atLeast: 0, max: Double(Self.maxSide))
                } ?? 0
            let cropGravity =
                arguments.count > 2 ? try reader.gravity(from: 2, allowed: GravityType.allCases) : nil
            crop = Crop(width: cropWidth, height: cropHeight, gravity: cropGravity)
        case "t", "trim":
            try reader.limit(4)
            guard let thresholdText = reader.text(0) else {
                trim = nil
                return
            }
            var value = Trim(threshold: try reader.decimal(thresholdText, atLeast: 0, max: 255))
            if let color = reader.text(1) { value.color = try reader.color(color) }
            if let equal = reader.text(2) { value.equalHorizontal = try reader.flag(equal) }
            if let equal = reader.text(3) { value.equalVertical = try reader.flag(equal) }
            trim = value
        case "pd", "padding":
            try reader.limit(4)
            var value = Padding()
            value.top = try reader.text(0).map { text throws(ProcessingURL.Failure) in try reader.pixels(text) } ?? 0
            value.right =
                try reader.text(1).map { text throws(ProcessingURL.Failure) in try reader.pixels(text) }
                ?? value.top
            value.bottom =
                try reader.text(2).map { text throws(ProcessingURL.Failure) in try reader.pixels(text) }
                ?? value.top
            value.left =
                try reader.text(3).map { text throws(ProcessingURL.Failure) in try reader.pixels(text) }
                ?? value.right
            padding = value
        case "ar", "auto_rotate":
            try reader.limit(1)
            autoRotate = try reader.flag(reader.required(0))
        case "rot", "rotate":
            try reader.limit(1)
            let text = try reader.required(0)
            guard text.utf8.count <= 10, let degrees = Int(text), degrees % 90 == 0 else { throw reader.invalid }
            rotate = ((degrees % 360) + 360) % 360
        case "fl", "flip":
            try reader.limit(2)
            if let horizontal = reader.text(0) { flipHorizontal = try reader.flag(horizontal) }
            if let vertical = reader.text(1) { flipVertical = try reader.flag(vertical) }
        case "bg", "background":
            switch arguments.count {
            case 1:
                background = try reader.text(0).map { text throws(ProcessingURL.Failure) in try reader.color(text) }
            case 3:
                let channels = try (0..<3).map { index throws(ProcessingURL.Failure) in
                    UInt8(try reader.number(reader.required(index), max: 255))
                }
                background = PixelColor(red: channels[0], green: channels[1], blue: channels[2])
            default:
                throw reader.invalid
            }
        case "bl", "blur":
            try reader.limit(1)
            blur = try reader.decimal(reader.required(0), atLeast: 0, max: 1000)
        case "sh", "sharpen":
            try reader.limit(1)
            sharpen = try reader.decimal(reader.required(0), atLeast: 0, max: 1000)
        case "pix", "pixelate":
            try reader.limit(1)
            pixelate = try reader.number(reader.required(0), max: Self.maxSide)
        case "wm", "watermark":
            try reader.limit(5)
            var value = Watermark(opacity: try reader.decimal(reader.required(0), atLeast: 0, max: 1))
            if let position = reader.text(1) {
                if position == "re" {
                    value.position = .tiled
                } else {
                    let type: GravityType = try reader.parse(position)
                    guard type != .smart, type != .focusPoint else { throw reader.invalid }
                    value.position = .gravity(type)
                }
            }
            if let x = reader.text(2) {
                value.x = try reader.decimal(x, atLeast: -Double(Self.maxSide), max: Double(Self.maxSide))
            }
            if let y = reader.text(3) {
                value.y = try reader.decimal(y, atLeast: -Double(Self.maxSide), max: Double(Self.maxSide))
            }
            if let scale = reader.text(4) { value.scale = try reader.decimal(scale, atLeast: 0, max: 1) }
            watermark = value.opacity > 0 ? value : nil
        case "q", "quality":
            try reader.limit(1)
            let value = try reader.number(reader.required(0), max: 100)
            quality = value == 0 ? nil : value
        case "fq", "format_quality":
            guard !arguments.isEmpty, arguments.count % 2 == 0, arguments.count <= 2 * Format.allCases.count else {
                throw reader.invalid
            }
            for pair in stride(from: 0, to: arguments.count, by: 2) {
                guard let target = Format(name: arguments[pair]) else { throw reader.invalid }
                let value = try reader.number(arguments[pair + 1], max: 100)
                formatQuality[target] = value == 0 ? nil : value
            }
        case "mb", "max_bytes":
            try reader.limit(1)
            maxBytes = try reader.number(reader.required(0), max: 1 << 30)
        case "f", "format", "ext":
            try reader.limit(1)
            let text = try reader.required(0)
            guard let named = Format(name: text) else {
                // imgproxy's Pro formats: known, but not written here (422, not 404).
                if ["pdf", "mp4"].contains(text.lowercased()) {
                    throw .cannotWrite(text.lowercased())
                }
                throw reader.invalid
            }
            format = named
        case "sm", "strip_metadata":
            try reader.limit(1)
            stripMetadata = try reader.flag(reader.required(0))
        case "kcr", "keep_copyright":
            try reader.limit(1)
            keepCopyright = try reader.flag(reader.required(0))
        case "scp", "strip_color_profile":
            try reader.limit(1)
            stripColorProfile = try reader.flag(reader.required(0))
        case "eth", "enforce_thumbnail":
            try reader.limit(1)
            enforceThumbnail = try reader.flag(reader.required(0))
        case "ph", "preserve_hdr":
            try reader.limit(1)
            preserveHDR = try reader.flag(reader.required(0))
        case "skp", "skip_processing":
            guard !arguments.isEmpty, arguments.count <= 16 else { throw reader.invalid }
            for text in arguments {
                guard let source = ImageFormat(imgproxyName: text) else { throw reader.invalid }
                skipProcessing.insert(source)
            }
        case "bh", "blurhash":
            guard rules.forInfo else { throw .unknownOption(name) }
            try reader.limit(2)
            let x = try reader.number(reader.required(0), max: 9)
            let y =
                try reader.text(1).map { text throws(ProcessingURL.Failure) in try reader.number(text, max: 9) } ?? x
            guard x >= 1, y >= 1 else { throw reader.invalid }
            blurHash = BlurHashSize(x: x, y: y)
        case "raw":
            try reader.limit(1)
            raw = try reader.flag(reader.required(0))
        case "cb", "cachebuster":
            try reader.limit(1)
            cacheBuster = reader.text(0)
        case "exp", "expires":
            try reader.limit(1)
            let text = try reader.required(0)
            guard text.utf8.count <= 19, let time = Int64(text) else { throw reader.invalid }
            if time > 0 && time < Int64(rules.now().timeIntervalSince1970) { throw .expired }
            expires = time
        case "fn", "filename":
            try reader.limit(2)
            let text = try reader.required(0)
            if let encoded = reader.text(1), try reader.flag(encoded) {
                guard let bytes = Base64URL.decode(Substring(text)),
                    let name = String(validating: bytes, as: UTF8.self)
                else { throw reader.invalid }
                filename = name
            } else {
                filename = text.removingPercentEncoding ?? text
            }
        case "att", "return_attachment":
            try reader.limit(1)
            returnAttachment = try reader.flag(reader.required(0))
        case "pr", "preset":
            guard !arguments.isEmpty else { throw reader.invalid }
            for preset in arguments {
                guard let options = rules.presets[preset] else { throw .unknownPreset(preset) }
                // A preset naming itself, directly or not, is applied once.
                guard !presetsInUse.contains(preset) else { continue }
                for option in options {
                    try apply(name: option.name, option.arguments, rules: rules, presetsInUse: presetsInUse + [preset])
                }
            }
        case "msr", "max_src_resolution", "msfs", "max_src_file_size", "maf", "max_animation_frames", "mafr",
            "max_animation_frame_resolution", "mrd", "max_result_dimension":
            guard rules.allowsSecurityOptions else { throw .forbiddenOption(name) }
            try reader.limit(1)
            let text = try reader.required(0)
            switch name {
            case "msr", "max_src_resolution":
                security.maxSourcePixels = Int(try reader.decimal(text, atLeast: 0, max: 100_000) * 1_000_000)
            case "mafr", "max_animation_frame_resolution":
                security.maxAnimationFramePixels = Int(try reader.decimal(text, atLeast: 0, max: 100_000) * 1_000_000)
            case "msfs", "max_src_file_size":
                security.maxSourceBytes = try reader.number(text, max: Int(Int32.max))
            case "maf", "max_animation_frames":
                let frames = try reader.number(text, max: 100_000)
                guard frames > 0 else { throw reader.invalid }
                security.maxAnimationFrames = frames
            default:
                security.maxResultSide = try reader.number(text, max: Self.maxSide)
            }
        default:
            throw .unknownOption(name)
        }
    }

    /// `size`'s arguments from `start`: width, height, enlarge, then extend's.
    private mutating func applySize(_ reader: inout ArgumentReader, from start: Int) throws(ProcessingURL.Failure) {
        if let text = reader.text(start) { width = try reader.pixels(text) }
        if let text = reader.text(start + 1) { height = try reader.pixels(text) }
        if let text = reader.text(start + 2) { enlarge = try reader.flag(text) }
        if reader.text(start + 3) != nil { extend = try reader.extend(from: start + 3) }
    }
}

/// An option's arguments, read with the checks every option shares.
private struct ArgumentReader {
    let option: String
    let arguments: [String]

    var invalid: ProcessingURL.Failure {
        .invalidArgument(option: option, value: arguments.joined(separator: ":"))
    }

    /// The argument at `index` when present and not empty.
    func text(_ index: Int) -> String? {
        index < arguments.count && !arguments[index].isEmpty ? arguments[index] : nil
    }

    func required(_ index: Int) throws(ProcessingURL.Failure) -> String {
        guard let text = text(index) else { throw invalid }
        return text
    }

    func limit(_ count: Int) throws(ProcessingURL.Failure) {
        guard arguments.count <= count, !arguments.isEmpty else { throw invalid }
    }

    func parse<T: RawRepresentable<String>>(_ text: String) throws(ProcessingURL.Failure) -> T {
        guard let value = T(rawValue: text) else { throw invalid }
        return value
    }

    func pixels(_ text: String) throws(ProcessingURL.Failure) -> Int {
        try number(text, max: ProcessingOptions.maxSide)
    }

    /// A decimal number of digits only, at most `max`: no sign, no spaces, no overflow.
    func number(_ text: String, max: Int) throws(ProcessingURL.Failure) -> Int {
        guard !text.isEmpty, text.utf8.count <= 10, text.utf8.allSatisfy({ (48...57).contains($0) }),
            let value = Int(text), value <= max
        else { throw invalid }
        return value
    }

    /// A finite decimal in `min...max` (digits, a sign and a point; no exponent).
    func decimal(_ text: String, atLeast min: Double, max: Double) throws(ProcessingURL.Failure) -> Double {
        guard text.utf8.count <= 24,
            text.utf8.allSatisfy({ (48...57).contains($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") }),
            let value = Double(text), value.isFinite, value >= min, value <= max
        else { throw invalid }
        return value
    }

    /// A decimal above `floor` (exclusive), at most `max`.
    func decimal(_ text: String, above floor: Double, max: Double) throws(ProcessingURL.Failure) -> Double {
        let value = try decimal(text, atLeast: floor, max: max)
        guard value > floor else { throw invalid }
        return value
    }

    func flag(_ text: String) throws(ProcessingURL.Failure) -> Bool {
        switch text {
        case "1", "t", "true": return true
        case "0", "f", "false": return false
        default: throw invalid
        }
    }

    func color(_ text: String) throws(ProcessingURL.Failure) -> PixelColor {
        guard let color = PixelColor(hex: text) else { throw invalid }
        return color
    }

    /// A gravity from `start`: its type, then offsets (two, in 0...1, for `fp`; none for `sm`).
    func gravity(from start: Int, allowed: [ProcessingOptions.GravityType]) throws(ProcessingURL.Failure)
        -> ProcessingOptions.Gravity
    {
        let type: ProcessingOptions.GravityType = try parse(required(start))
        guard allowed.contains(type) else { throw invalid }
        let count = arguments.count - start
        switch type {
        case .smart:
            guard count == 1 else { throw invalid }
            return .smart
        case .focusPoint:
            guard count == 3 else { throw invalid }
            return ProcessingOptions.Gravity(
                .focusPoint, x: try decimal(required(start + 1), atLeast: 0, max: 1),
                y: try decimal(required(start + 2), atLeast: 0, max: 1))
        default:
            guard count <= 3 else { throw invalid }
            let limit = Double(ProcessingOptions.maxSide)
            let x =
                try text(start + 1).map { text throws(ProcessingURL.Failure) in
                    try decimal(text, atLeast: -limit, max: limit)
                } ?? 0
            let y =
                try text(start + 2).map { text throws(ProcessingURL.Failure) in
                    try decimal(text, atLeast: -limit, max: limit)
                } ?? 0
            return ProcessingOptions.Gravity(type, x: x, y: y)
        }
    }

    /// `extend`'s arguments from `start`: whether, then a gravity (not smart).
    func extend(from start: Int) throws(ProcessingURL.Failure) -> ProcessingOptions.Extend {
        var value = ProcessingOptions.Extend()
        value.enabled = try flag(required(start))
        if text(start + 1) != nil {
            value.gravity = try gravity(
                from: start + 1, allowed: ProcessingOptions.GravityType.allCases.filter { $0 != .smart })
        }
        return value
    }
}
