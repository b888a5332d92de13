import ArgumentParser
import RasterImage

struct DecodeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decode",
        abstract: "Decode an image; with -o, write one frame as an 8-bit RGBA PNG.",
        discussion: """
            The PNG holds the pixels as stored, with straight alpha: the orientation is not applied and
            no colour profile is converted. For an animation, frame N is the canvas as shown at that
            frame; for a TIFF, it is page N. Without -o the image is decoded and a JSON summary printed.
            """
    )

    @Argument(help: "The image file.")
    var file: String

    @Option(name: .shortAndLong, help: "Where to write the PNG.")
    var output: String?

    @Option(help: "The frame (or TIFF page) to write, from 0.")
    var frame: Int = 0

    func validate() throws {
        guard frame >= 0 else { throw ValidationError("--frame must be 0 or more") }
    }

    func run() throws {
        let options = DecodingOptions(frames: .index(frame))
        let image = try ImageDecoder(options: options).decode(.file(path: file))
        guard let output else {
            Terminal.printJSON([
                "format": .string(image.format?.rawValue ?? ""),
                "width": .int(image.width),
                "height": .int(image.height),
                "frame": .int(frame),
                "bytes": .int(image.cost),
            ])
            return
        }
        let png = try PNGEncoder(alwaysIncludeAlpha: true, includeICCProfile: false).encode(image)
        try Terminal.write(png, to: output)
    }
}
