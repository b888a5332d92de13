import ArgumentParser
import ImageLoader
import RasterImage

struct ThumbnailCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "thumbnail",
        abstract: "Make a thumbnail: shrink while decoding, resample, turn upright, convert to sRGB.",
        discussion: """
            The output format follows OUT's extension (\(OutputFormat.fileExtensionList)). With --fill the thumbnail \
            is exactly SIZE x SIZE (or WIDTH x HEIGHT), cropped from the middle; otherwise the whole \
            image fits inside. Images are not enlarged unless --upscale is given.
            """
    )

    @Argument(
        help: "The image file, or an http, https or file URL (its thumbnail made and kept by the loader's caches).")
    var input: String

    @Option(help: "The box, in pixels: the longest side, or both sides with --fill.")
    var size: Int?

    @Option(help: "The box's width (instead of --size).")
    var width: Int?

    @Option(help: "The box's height (instead of --size).")
    var height: Int?

    @Option(
        name: .shortAndLong,
        help:
            "Where to write it: OUT.jpg, OUT.png, OUT.webp, OUT.avif, OUT.jxl, OUT.heic, OUT.ico, OUT.bmp, OUT.tiff or OUT.gif."
    )
    var output: String

    @Flag(help: "Cover the box and crop the overflow, instead of fitting inside it.")
    var fill = false

    @Flag(help: "Stretch to exactly the box, each side on its own (the aspect ratio is not kept).")
    var force = false

    @Option(
        help:
            "With --fill, the part kept: \(ThumbnailOptions.Gravity.allCases.map(\.rawValue).joined(separator: ", ")).")
    var gravity: String = ThumbnailOptions.Gravity.center.rawValue

    @Option(help: "JPEG, WebP, AVIF or JPEG XL quality, 1-100.")
    var quality: Int?

    @Option(help: "Resampling kernel: \(ResamplingKernel.allCases.map(\.rawValue).joined(separator: ", ")).")
    var kernel: String = ResamplingKernel.lanczos3.rawValue

    @Flag(help: "Let the decoder shrink as far as it can (faster, a little softer).")
    var fastest = false

    @Flag(help: "Decode at full size, then resize (no shrinking while decoding): to compare the two.")
    var fullDecode = false

    @Flag(help: "Resample in linear light.")
    var linear = false

    @Flag(help: "Keep the embedded colour profile instead of converting to sRGB.")
    var keepProfile = false

    @Flag(help: "Enlarge images smaller than the box.")
    var upscale = false

    @Flag(help: "Keep every frame of an animation: GIF and WebP results stay animated (other formats keep the first).")
    var allFrames = false

    @OptionGroup(title: "Loading a URL") var loader: LoaderArguments

    func validate() throws {
        guard size != nil || (width != nil && height != nil) else {
            throw ValidationError("give --size, or --width and --height")
        }
        for value in [size, width, height].compactMap({ $0 }) where !(1...ThumbnailOptions.maxSide).contains(value) {
            throw ValidationError("sizes must be between 1 and \(ThumbnailOptions.maxSide)")
        }
        if let quality, !(1...100).contains(quality) { throw ValidationError("--quality must be between 1 and 100") }
        guard ResamplingKernel(rawValue: kernel) != nil else { throw ValidationError("unknown kernel \(kernel)") }
        guard ThumbnailOptions.Gravity(rawValue: gravity) != nil else {
            throw ValidationError("unknown gravity \(gravity)")
        }
        if fill && force { throw ValidationError("--fill and --force exclude each other") }
        guard outputFormat != nil else {
            throw ValidationError("OUT must end in \(OutputFormat.fileExtensionList)")
        }
    }

    private var outputFormat: OutputFormat? {
        Terminal.fileExtension(of: output).flatMap { OutputFormat(fileExtension: $0, quality: quality) }
    }

    func run() async throws {
        var options = ThumbnailOptions(
            width: width ?? size!, height: height ?? size!, fit: force ? .force : fill ? .fill : .fit)
        options.kernel = ResamplingKernel(rawValue: kernel)!
        options.gravity = ThumbnailOptions.Gravity(rawValue: gravity)!
        options.shrinkOnLoad = fastest ? .fastest : .quality
        options.linearLight = linear
        options.keepsColorProfile = keepProfile
        options.allowsUpscaling = upscale
        options.frames = allFrames ? .all : .first
        options.outputFormat = outputFormat!
        let encoded: EncodedImage
        switch Input(input) {
        case .file(let path) where fullDecode:
            encoded = try Input.naming(path) {
                let image = try ImageDecoder().decode(
                    .file(path: path), options: DecodingOptions(frames: options.frames))
                return try image.thumbnail(options: options).encodedKeepingAnimation(as: options.outputFormat)
            }
        case .file(let path):
            encoded = try Input.naming(path) {
                try ImageDecoder().encodedThumbnail(.file(path: path), options: options)
            }
        case .url where fullDecode:
            let image = try await Input(input).image(decoding: DecodingOptions(), loader: loader)
            encoded = try image.thumbnail(options: options).encodedKeepingAnimation(as: options.outputFormat)
        case .url(let url):
            // The loader's thumbnail: shrunk while decoding, kept in its caches (memory and
            // disk, encoded), revalidated with the original's validators.
            encoded = try await loader.withLoader { loader in
                let loaded = try await loader.thumbnail(for: url, options: options)
                return try loaded.encoded ?? loaded.image.encodedKeepingAnimation(as: options.outputFormat)
            }
        }
        try Terminal.write(encoded.bytes, to: output)
    }
}
