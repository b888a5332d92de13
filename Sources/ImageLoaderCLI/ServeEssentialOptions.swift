import ArgumentParser

/// The options of `serve` everyone sets, listed first in its help: where it listens and
/// how URLs are signed.
struct ServeEssentialOptions: ParsableArguments {
    @Option(help: "The address to listen on (IMGPROXY_BIND: host:port) [default: 0.0.0.0, every interface].")
    var host: String?

    @Option(help: "The port to listen on; 0: any free port, printed at start (PORT) [default: 8080].")
    var port: Int?

    @Option(help: "A signing key, hexadecimal (repeatable, paired with --salt; IMGPROXY_KEY, IMGPROXY_KEYS: a list).")
    var key: [String] = []

    @Option(help: "A signing salt, hexadecimal (repeatable, paired with --key; IMGPROXY_SALT, IMGPROXY_SALTS: a list).")
    var salt: [String] = []

    @Option(help: "Bytes of the signature, 1 to 32 (IMGPROXY_SIGNATURE_SIZE) [default: 32].")
    var signatureSize: Int?

    @Flag(
        help: """
            Serve unsigned URLs (`insecure` or `_` in place of the signature). imgproxy serves them whenever no \
            key is set; without a key this service refuses to start instead, unless this is given.
            """)
    var allowUnsigned = false
}
