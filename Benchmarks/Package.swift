// swift-tools-version:6.1
// In-process benchmarks of the loader (ordo-one/benchmark). A package of its own so that
// the benchmark framework is never built with the library or its tests.
//
//     cd Benchmarks && swift package benchmark
import Foundation
import PackageDescription

// A path dependency's identity is its folder's name, which depends on where the
// repository was cloned: derive it rather than assume it.
let rootIdentity = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .lastPathComponent.lowercased()

let package = Package(
    name: "ImageLoaderBenchmarks",
    // Built and tested on Linux (Debian 12, glibc) only, and so declared for no other
    // platform: ImageLoaderSupport calls glibc directly, and no Darwin build is claimed.
    products: [
        .executable(name: "thumbnail-throughput", targets: ["ThumbnailThroughput"])
    ],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", exact: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
    ],
    targets: [
        // Thumbnails per second through the RasterImage API, for inprocess_compare.py.
        .executableTarget(
            name: "ThumbnailThroughput",
            dependencies: [.product(name: "RasterImage", package: rootIdentity)],
            path: "Benchmarks/ThumbnailThroughput",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "LoaderBenchmarks",
            dependencies: [
                .product(name: "ImageLoader", package: rootIdentity),
                .product(name: "RasterImage", package: rootIdentity),
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            path: "Benchmarks/LoaderBenchmarks",
            swiftSettings: [.swiftLanguageMode(.v6)],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ]
)
