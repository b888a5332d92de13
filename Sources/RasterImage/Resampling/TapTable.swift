/// A ``ResampleWeights`` laid out for the inner loops: raw memory, so reading a tap
/// costs no bounds check and no reference counting. Owned by one resizer, which frees it.
struct TapTable {
    let starts: UnsafeMutablePointer<Int>
    let counts: UnsafeMutablePointer<Int>
    /// `stride` weights per output.
    let weights: UnsafeMutablePointer<Float>
    /// The same weights, each in all four lanes (only with `splat`): the horizontal
    /// pass multiplies a pixel by one without a shuffle per tap.
    let splatWeights: UnsafeMutablePointer<SIMD4<Float>>
    /// How many weights ``splatWeights`` holds (none without `splat`).
    let splatCount: Int
    let stride: Int

    /// The taps of `table`, each weight multiplied by `inputScale` of the input it reads,
    /// with input indices counted from `firstInput`.
    init(
        _ table: ResampleWeights, firstInput: Int = 0, splat: Bool = false, inputScale: (Int) -> Float = { _ in 1 }
    ) {
        stride = table.maxTaps
        starts = .allocate(capacity: table.outputSize)
        starts.initialize(from: table.starts.map { $0 - firstInput }, count: table.outputSize)
        counts = .allocate(capacity: table.outputSize)
        counts.initialize(from: table.counts, count: table.outputSize)
        weights = .allocate(capacity: table.weights.count)
        weights.initialize(from: table.weights, count: table.weights.count)
        for output in 0..<table.outputSize {
            for tap in 0..<table.counts[output] {
                weights[output * stride + tap] *= inputScale(table.starts[output] + tap)
            }
        }
        let splatCount = splat ? table.weights.count : 0
        self.splatCount = splatCount
        splatWeights = .allocate(capacity: max(1, splatCount))
        for i in 0..<splatCount { (splatWeights + i).initialize(to: SIMD4(repeating: weights[i])) }
    }

    func deallocate() {
        starts.deallocate()
        counts.deallocate()
        weights.deallocate()
        splatWeights.deallocate()
    }
}
