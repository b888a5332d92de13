import ArgumentParser
import RasterImage

struct InfoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Print what an image's header says, as one JSON object.",
        discussion: """
            Keys: format, width, height, frames, hasAlpha, orientation (the EXIF/TIFF value, 1-8), contentType.
            The format comes from the bytes, never from the file name.
            """
    )

    @Argument(help: "The image file.")
    var file: String

    func run() throws {
        let info = try ImageDecoder().info(.file(path: file))
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
