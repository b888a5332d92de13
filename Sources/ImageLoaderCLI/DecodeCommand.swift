import ArgumentParser
import ImageLoader
import RasterImage

struct DecodeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decode",
        abstract: "Decode an image; with -o, write one frame as an 8-bit RGBA PNG.",
        discussion: """
            The PNG holds the pixels as stored, with straight alpha: the orientation is not applied and
            no colour profile is converted. For an animation, frame N is the canvas as shown at that
            frame; for a TIFF, it is page N. Without -o the image is decoded and a JSON summary printed.
            """
    )

    @Argument(help: "The image file, or an http, https or file URL (loaded through the caches).")
    var file: String

    @Option(name: .shortAndLong, help: "Where to write the PNG.")
    var output: String?

    @Option(help: "The frame (or TIFF page) to write, from 0.")
    var frame: Int = 0

    @OptionGroup(title: "Loading a URL") var loader: LoaderArguments

    func validate() throws {
        guard frame >= 0 else { throw ValidationError("--frame must be 0 or more") }
        // The file is a PNG whatever it is called: a name that says another format is refused.
        if let output, let named = Terminal.fileExtension(of: output).flatMap(ImageFormat.init(fileExtension:)),
            named != .png
        {
            throw ValidationError(
                "-o \(output) names a \(named.displayName) file, but decode writes PNG: name it .png "
                    + "(imageloader thumbnail writes other formats)")
        }
    }

    func run() async throws {
        var image = try await Input(file).image(decoding: DecodingOptions(frames: .index(frame)), loader: loader)
        if case .url = Input(file) {
            // The loader keeps every frame; pick the one asked for.
            guard image.frames.indices.contains(frame) else {
                throw ImageDecodingError(
                    .frameOutOfRange(index: frame, count: image.frames.count), format: image.format)
            }
            image = RasterImage(
                width: image.width, height: image.height, bytesPerRow: image.bytesPerRow, frames: [image.frames[frame]],
                alphaMode: image.alphaMode, orientation: image.orientation, iccProfile: image.iccProfile,
                format: image.format, hasAlpha: image.hasAlpha)!
        }
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
