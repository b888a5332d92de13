// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "ImageLoader",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "RasterImage", targets: ["RasterImage"]),
        .executable(name: "imageloader", targets: ["ImageLoaderCLI"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2")
    ],
    targets: [
        // Thin C targets: headers, link flags and the setjmp/variadic shims Swift cannot express.
        .target(
            name: "CPNG",
            linkerSettings: [.linkedLibrary("png16")]
        ),
        .target(
            name: "CJPEG",
            linkerSettings: [.linkedLibrary("jpeg")]
        ),
        .systemLibrary(
            name: "CGIF",
            providers: [.apt(["libgif-dev"])]
        ),
        .target(
            name: "CTIFF",
            linkerSettings: [.linkedLibrary("tiff")]
        ),
        .systemLibrary(
            name: "CWebP",
            providers: [.apt(["libwebp-dev"])]
        ),
        .target(
            name: "CLCMS",
            linkerSettings: [.linkedLibrary("lcms2")]
        ),
        .target(
            name: "RasterImage",
            dependencies: ["CPNG", "CJPEG", "CGIF", "CTIFF", "CWebP", "CLCMS"]
        ),
        .executableTarget(
            name: "ImageLoaderCLI",
            dependencies: [
                "RasterImage",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "RasterImageTests",
            dependencies: ["RasterImage"]
        ),
        .testTarget(
            name: "CommandLineTests",
            // Runs the built executable; the dependency makes sure it is built first.
            dependencies: ["RasterImage", "ImageLoaderCLI"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
