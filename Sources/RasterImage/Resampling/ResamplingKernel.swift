import ImageLoaderSupport

/// The filter a resize uses for its last step (after any box pre-reduction).
///
/// ```swift
/// var options = ThumbnailOptions(maxPixelSize: 256)
/// options.kernel = .mitchell        // softer, cheaper than the default .lanczos3
/// ```
public enum ResamplingKernel: String, Sendable, Hashable, CaseIterable, Codable {
    /// Windowed sinc over 3 lobes: the sharpest, with slight ringing. The default.
    case lanczos3
    /// Windowed sinc over 2 lobes: a little softer and cheaper.
    case lanczos2
    /// Mitchell–Netravali cubic (B = C = 1/3): smooth, no visible ringing.
    case mitchell
    /// Linear interpolation (a triangle filter scaled to the reduction).
    case bilinear
    /// Area averaging: every input pixel counted once. The cheapest.
    case box

    /// How far the kernel reaches, in output pixels.
    var radius: Double {
        switch self {
        case .lanczos3: 3
        case .lanczos2, .mitchell: 2
        case .bilinear: 1
        case .box: 0.5
        }
    }

    /// The kernel's value at distance `x`.
    func weight(_ x: Double) -> Double {
        let x = abs(x)
        switch self {
        case .lanczos3:
            guard x < 3 else { return 0 }
            guard x > 0 else { return 1 }
            // One sine for both factors: sin(3t) = sin t (3 - 4 sin² t), with t = πx/3.
            let t = Double.pi * x / 3
            let s = System.sine(t)
            return s * (3 - 4 * s * s) * s / (3 * t * t)
        case .lanczos2: return x < 2 ? sinc(x) * sinc(x / 2) : 0
        case .mitchell:
            let (b, c) = (1.0 / 3, 1.0 / 3)
            if x < 1 { return ((12 - 9 * b - 6 * c) * x * x * x + (-18 + 12 * b + 6 * c) * x * x + (6 - 2 * b)) / 6 }
            if x < 2 {
                return ((-b - 6 * c) * x * x * x + (6 * b + 30 * c) * x * x + (-12 * b - 48 * c) * x + (8 * b + 24 * c))
                    / 6
            }
            return 0
        case .bilinear: return x < 1 ? 1 - x : 0
        case .box: return x <= 0.5 ? 1 : 0
        }
    }

    private func sinc(_ x: Double) -> Double {
        if x == 0 { return 1 }
        let px = Double.pi * x
        return System.sine(px) / px
    }
}

/// The taps of a one-dimensional resize: for every output index, the first input
/// index it reads and the weights of the inputs from there, summing to 1. Inputs past
/// either edge do not exist; their weight goes to the ones that do (renormalised).
struct ResampleWeights {
    let inputSize: Int
    let outputSize: Int
    /// First input index of each output.
    let starts: [Int]
    /// Number of taps of each output.
    let counts: [Int]
    /// `maxTaps` weights per output (unused ones are zero).
    let weights: [Float]
    let maxTaps: Int

    /// The taps of outputs `outputs` (default: all) of a resize from `inputSize` to
    /// `outputSize`, indexed from 0: a window of a larger resize costs only its own taps.
    init(inputSize: Int, outputSize fullOutputSize: Int, kernel: ResamplingKernel, outputs: Range<Int>? = nil) {
        let outputs = outputs ?? 0..<fullOutputSize
        let outputSize = outputs.count
        self.inputSize = inputSize
        self.outputSize = outputSize
        let scale = Double(inputSize) / Double(fullOutputSize)
        let filterScale = max(scale, 1)
        let support = kernel.radius * filterScale
        let maxTaps = Int((support * 2).rounded(.up)) + 2
        var starts = [Int](repeating: 0, count: outputSize)
        var counts = [Int](repeating: 0, count: outputSize)
        var weights = [Float](repeating: 0, count: outputSize * maxTaps)
        var taps = [Double](repeating: 0, count: maxTaps)
        for index in 0..<outputSize {
            let out = outputs.lowerBound + index
            let center = (Double(out) + 0.5) * scale
            var first = max(0, Int((center - support + 0.5).rounded(.down)))
            var last = min(inputSize, Int((center + support + 0.5).rounded(.down)))
            if last - first > maxTaps { last = first + maxTaps }
            var total = 0.0
            for i in first..<last {
                let w = kernel.weight((Double(i) + 0.5 - center) / filterScale)
                taps[i - first] = w
                total += w
            }
            if total == 0 {
                // A box narrower than a pixel can miss every centre: take the nearest input.
                first = min(inputSize - 1, max(0, Int(center)))
                last = first + 1
                taps[0] = 1
                total = 1
            }
            starts[index] = first
            counts[index] = last - first
            for i in 0..<(last - first) { weights[index * maxTaps + i] = Float(taps[i] / total) }
        }
        self.starts = starts
        self.counts = counts
        self.weights = weights
        self.maxTaps = maxTaps
    }
}

extension ResampleWeights {
    /// What a table is made from.
    private struct Key: Hashable {
        let inputSize: Int
        let outputSize: Int
        let kernel: ResamplingKernel
        let outputs: Range<Int>
    }

    /// The tables made lately, up to ``cacheBytes`` of them: a service resizes the same
    /// sizes over and over, and each table costs a kernel evaluation (a sine or two)
    /// per tap. Full, it is emptied and starts again.
    private static let cache = Lock((tables: [Key: ResampleWeights](), bytes: 0))
    static let cacheBytes = 4 << 20

    /// The table of ``init(inputSize:outputSize:kernel:outputs:)``, from the cache when
    /// it was made lately.
    static func cached(
        inputSize: Int, outputSize: Int, kernel: ResamplingKernel, outputs: Range<Int>? = nil
    ) -> ResampleWeights {
        let key = Key(inputSize: inputSize, outputSize: outputSize, kernel: kernel, outputs: outputs ?? 0..<outputSize)
        if let table = cache.withLock({ $0.tables[key] }) { return table }
        let table = ResampleWeights(inputSize: inputSize, outputSize: outputSize, kernel: kernel, outputs: outputs)
        let bytes = table.weights.count * 4 + table.starts.count * 16
        guard bytes <= cacheBytes / 8 else { return table }
        cache.withLock { cache in
            if cache.bytes + bytes > cacheBytes { cache = ([:], 0) }
            if cache.tables.updateValue(table, forKey: key) == nil { cache.bytes += bytes }
        }
        return table
    }
}
