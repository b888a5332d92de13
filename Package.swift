// swift-tools-version:6.0
import Foundation
import PackageDescription

let package = Package(
    name: "ImageLoader",
    // Built and tested on Linux (Debian 12, glibc) only, and so declared for no other
    // platform: ImageLoaderSupport calls glibc directly, and no Darwin build is claimed.
    products: [
        .library(name: "RasterImage", targets: ["RasterImage"]),
        .library(name: "ImageLoader", targets: ["ImageLoader"]),
        .library(name: "ObjectStorage", targets: ["ObjectStorage"]),
        .library(name: "ImageService", targets: ["ImageService"]),
        .executable(name: "imageloader", targets: ["ImageLoaderCLI"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // Already in the graph through swift-nio: HeapModule orders the schedulers' queues.
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // Already in the graph through Hummingbird: the HTTP parts its pipeline carries.
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.34.1"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // Spans (already in the graph through Hummingbird); swift-otel exports them over
        // OTLP (HTTP or gRPC) for `imageloader serve`.
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.6.0"),
        // `swift package generate-documentation` for the DocC catalogs; a plugin, never linked.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // Thin C targets: headers, link flags and the setjmp/variadic shims Swift cannot express.
        .target(
            name: "CPNG",
            linkerSettings: [.linkedLibrary("png16"), .linkedLibrary("z")]
        ),
        .target(
            name: "CJPEG",
            linkerSettings: [.linkedLibrary("jpeg")]
        ),
        .systemLibrary(
            name: "CGIF",
            providers: [.apt(["libgif-dev"])]
        ),
        // libtiff (with the codecs it loads: zstd, lzma, LERC, JBIG) opened at run time
        // when the first TIFF is met (lazy.c, written by scripts/generate-lazy-libraries.py).
        .target(
            name: "CTIFF",
            linkerSettings: [.linkedLibrary("dl")]
        ),
        .systemLibrary(
            name: "CWebP",
            providers: [.apt(["libwebp-dev"])]
        ),
        .systemLibrary(
            name: "CDeflate",
            providers: [.apt(["libdeflate-dev"])]
        ),
        .target(
            name: "CISAL",
            linkerSettings: [.linkedLibrary("isal")]
        ),
        .target(
            name: "CLCMS",
            linkerSettings: [.linkedLibrary("lcms2")]
        ),
        // libheif and libavif: their headers at build time, the libraries (and the HEVC
        // and AV1 codecs they load) opened at run time when the format is first met
        // (lazy.c, written by scripts/generate-lazy-libraries.py).
        .target(name: "CHEIF", linkerSettings: [.linkedLibrary("dl")]),
        .target(name: "CAVIF", linkerSettings: [.linkedLibrary("dl")]),
        // libjxl (with brotli and highway) opened at run time when the first JPEG XL is
        // met (lazy.c, written by scripts/generate-lazy-libraries.py); shim.c's capture
        // of its traces binds as before (see CJXL.h).
        .target(
            name: "CJXL",
            linkerSettings: [.linkedLibrary("dl")]
        ),
        // FreeType for the contact sheet's labels: its headers at build time, through
        // Sources/CFreeType/freetype2 (a link to Debian's /usr/include/freetype2, so that
        // no pkg-config link flag comes with them), the library opened at run time
        // (dlopen) when a label is first drawn.
        .target(
            name: "CFreeType", exclude: ["freetype2"], cSettings: [.headerSearchPath("freetype2")],
            linkerSettings: [.linkedLibrary("dl")]),
        // librsvg and cairo for SVG sources, opened at run time (dlopen) when the first
        // SVG is rendered: Debian's librsvg2-2, no headers needed.
        .target(name: "CSVG", linkerSettings: [.linkedLibrary("dl")]),
        // The resampler's inner loops in AVX2 and FMA, compiled for those instructions
        // alone and called only when the CPU has them (the Swift loops run otherwise).
        .target(name: "CResample"),
        // What the other targets share and users never see (package access only): the
        // lock, the one way to wait, shared work, the scheduler, deadlines, checked
        // arithmetic, the checksummed envelope (CRC32C by ISA-L).
        .target(
            name: "ImageLoaderSupport",
            dependencies: ["CISAL", .product(name: "HeapModule", package: "swift-collections")]),
        .target(
            name: "RasterImage",
            dependencies: [
                "ImageLoaderSupport", "CPNG", "CJPEG", "CGIF", "CTIFF", "CWebP", "CLCMS", "CDeflate", "CISAL", "CHEIF",
                "CAVIF", "CJXL", "CSVG", "CResample",
            ]
        ),
        .target(
            name: "ImageLoader",
            dependencies: [
                "ImageLoaderSupport", "RasterImage",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // S3, GCS and Azure Blob objects read (and written) through the loader's data-loading
        // seam: the stores' signing, credentials and requests.
        .target(
            name: "ObjectStorage",
            dependencies: [
                "ImageLoaderSupport", "ImageLoader",
                .product(name: "Crypto", package: "swift-crypto"),
                // RSA signatures (RS256) for Google service accounts' token requests.
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The thumbnail service: imgproxy-format URLs behind Hummingbird.
        .target(
            name: "ImageService",
            dependencies: [
                "ImageLoaderSupport", "RasterImage",
                "ImageLoader", "ObjectStorage",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        .executableTarget(
            name: "ImageLoaderCLI",
            dependencies: [
                "ImageLoaderSupport", "RasterImage", "CFreeType",
                "ImageLoader", "ObjectStorage",
                "ImageService",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                // The demo's in-process HTTP server.
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                // NIO's IOError, read for the system's error text.
                .product(name: "NIOCore", package: "swift-nio"),
                // `imageloader health`'s request (already linked through ImageLoader).
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                // OpenTelemetry's exporters, bootstrapped when IMGPROXY_OPEN_TELEMETRY_ENABLE is set.
                .product(name: "OTel", package: "swift-otel"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        .testTarget(
            name: "RasterImageTests",
            dependencies: ["ImageLoaderSupport", "RasterImage", "CDeflate", "TestSupport"]
        ),
        // What the test targets share (not part of any product): a scripted HTTP origin,
        // gates, waiting, child processes, the fixtures' folder, the time scale.
        .target(
            name: "TestSupport",
            dependencies: [
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            path: "Tests/TestSupport"
        ),
        .testTarget(
            name: "ImageLoaderSupportTests",
            dependencies: ["ImageLoaderSupport", "CISAL", "TestSupport"]
        ),
        .testTarget(
            name: "ImageLoaderTests",
            // The loader's tests, and ObjectStorage's (ObjectStorage/): the stores are read
            // through a loader, with the same harness.
            dependencies: [
                "ImageLoader", "ObjectStorage", "ImageLoaderSupport", "RasterImage", "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "ImageServiceTests",
            dependencies: [
                "ImageService", "ImageLoaderSupport", "RasterImage", "TestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
            ]
        ),
        .testTarget(
            name: "CommandLineTests",
            // Runs the built executable; the dependency makes sure it is built first.
            dependencies: [
                "RasterImage", "ImageLoader", "ImageLoaderSupport", "ImageService", "ImageLoaderCLI", "TestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// Every Swift program in README.md and the DocC articles, built as it is written there
// (scripts/sync-examples.py copies them into Examples/; DocumentationTests runs them).
let exampleDependencies: [String: [Target.Dependency]] = [
    "RasterImage": ["RasterImage"],
    "ImageLoader": ["ImageLoader", "RasterImage", .product(name: "Logging", package: "swift-log")],
    "ObjectStorage": ["ImageLoader", "ObjectStorage"],
    "Server": [
        "ImageLoader", "RasterImage", "ImageService",
        .product(name: "AsyncHTTPClient", package: "async-http-client"),
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
    ],
]
let examples: [(name: String, uses: String)] = [
    ("ReadmeRasterImage", "RasterImage"), ("ReadmeImageLoader", "ImageLoader"), ("ReadmeImageService", "Server"),
    ("DocRasterImage", "RasterImage"), ("DocGettingStarted", "RasterImage"),
    ("DocDecodingAndValidation", "RasterImage"),
    ("DocThumbnails", "RasterImage"), ("DocFormatsAndLimits", "RasterImage"), ("DocImageLoader", "ImageLoader"),
    ("DocLoadingAndHTTPCaching", "ImageLoader"), ("DocCachingInDepth", "ImageLoader"),
    ("DocObjectStorage", "ObjectStorage"), ("DocUsingInAServer", "Server"), ("DocImageService", "Server"),
]
package.targets += examples.map { example in
    .executableTarget(
        name: example.name, dependencies: exampleDependencies[example.uses] ?? [], path: "Examples/\(example.name)")
}
package.targets.append(
    .testTarget(
        name: "DocumentationTests",
        dependencies: [
            "TestSupport", "RasterImage", "ImageService",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
        ] + examples.map { .target(name: $0.name) }))

// The libFuzzer targets (Fuzz/), only when scripts/fuzz.sh builds them with
// -sanitize=fuzzer,address in .build-fuzz: never part of the normal build.
if ProcessInfo.processInfo.environment["IMAGELOADER_FUZZ"] == "1" {
    package.targets += [
        .target(name: "CFuzzDriver", path: "Fuzz/CFuzzDriver"),
        .executableTarget(
            name: "ImageLoaderFuzz",
            dependencies: ["CFuzzDriver", "RasterImage", "ImageLoader", "ObjectStorage", "ImageService"],
            path: "Fuzz/ImageLoaderFuzz"),
    ]
}
