import ArgumentParser
import Foundation
import ImageLoader
import RasterImage

struct InfoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Print what an image's header says, as one JSON object.",
        discussion: """
            Keys: format, width, height, frames, hasAlpha, orientation (the EXIF/TIFF value, 1-8), contentType.
            The format comes from the bytes, never from the file name. With --placeholders, also bytes, \
            colorProfile, exif (date, camera, lens; GPS with --gps), dominantColors, blurhash and thumbhash, \
            as GET /info of imageloader serve answers.
            """
    )

    @Flag(help: "Also the colour profile's name, EXIF fields, dominant colours, a BlurHash and a ThumbHash.")
    var placeholders = false

    @Flag(help: "With --placeholders, include the GPS position EXIF states.")
    var gps = false

    @Argument(help: "The image file, or an http, https or file URL (loaded through the caches).")
    var file: String

    @OptionGroup(title: "Loading a URL") var loader: LoaderArguments

    func run() async throws {
        if placeholders {
            let bytes = try await Input(file).bytes(loader: loader)
            var options = DescriptionOptions()
            options.includesLocation = gps
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
            let described = try Input.naming(file) { try ImageDecoder().describe(bytes, options: options) }
            Terminal.line(String(decoding: try encoder.encode(described), as: UTF8.self))
            return
        }
        let info: ImageInfo
        switch Input(file) {
        case .file(let path):
            info = try Input.naming(path) { try ImageDecoder().info(.file(path: path)) }
        case .url:
            let image = try await Input(file).image(decoding: DecodingOptions(), loader: loader)
            info = ImageInfo(
                format: image.format ?? .png, width: image.width, height: image.height, frameCount: image.frames.count,
                hasAlpha: image.hasAlpha, orientation: image.orientation, loopCount: image.loopCount,
                iccProfile: image.iccProfile)
        }
        Terminal.printJSON([
            "format": .string(info.format.rawValue),
            "width": .int(info.width),
            "height": .int(info.height),
            "frames": .int(info.frameCount),
            "hasAlpha": .bool(info.hasAlpha),
            "orientation": .int(info.orientation.rawValue),
            "contentType": .string(info.contentType),
        ])
    }
}
