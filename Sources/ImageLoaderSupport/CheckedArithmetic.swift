/// Arithmetic on numbers that came from input (header fields, chunk lengths, offsets,
/// dates, counts). Every such number crosses into the program through these helpers,
/// so an overflow becomes `nil` (the caller throws a typed error or ignores the
/// field) or a saturated value, never a trap. Inside, code works on values known to
/// be in range, so per-pixel loops stay plain.
package enum Checked {
    /// `a * b`, or `nil` on overflow.
    @inlinable
    package static func multiply(_ a: Int, _ b: Int) -> Int? {
        let (value, overflow) = a.multipliedReportingOverflow(by: b)
        return overflow ? nil : value
    }

    /// The product of every factor, or `nil` on overflow.
    @inlinable
    package static func product(_ factors: Int...) -> Int? {
        var total = 1
        for factor in factors {
            guard let next = multiply(total, factor) else { return nil }
            total = next
        }
        return total
    }

    /// `a + b`, or `nil` on overflow.
    @inlinable
    package static func add(_ a: Int, _ b: Int) -> Int? {
        let (value, overflow) = a.addingReportingOverflow(b)
        return overflow ? nil : value
    }

    /// The sum of every term, or `nil` on overflow.
    @inlinable
    package static func sum(_ terms: Int...) -> Int? {
        var total = 0
        for term in terms {
            guard let next = add(total, term) else { return nil }
            total = next
        }
        return total
    }

    /// `a + b`, held at `Int.max` / `Int.min` instead of overflowing.
    @inlinable
    package static func saturatingAdd(_ a: Int, _ b: Int) -> Int {
        let (value, overflow) = a.addingReportingOverflow(b)
        guard overflow else { return value }
        return b > 0 ? .max : .min
    }

    /// `a * b`, held at `Int.max` / `Int.min` instead of overflowing.
    @inlinable
    package static func saturatingMultiply(_ a: Int, _ b: Int) -> Int {
        let (value, overflow) = a.multipliedReportingOverflow(by: b)
        guard overflow else { return value }
        return (a < 0) == (b < 0) ? .max : .min
    }

    /// An unsigned value from a file as an `Int`, or `nil` when it does not fit.
    @inlinable
    package static func int<T: BinaryInteger>(_ value: T) -> Int? {
        Int(exactly: value)
    }

    /// A finite `Double` as an `Int`, clamped to `range`; `nil` for NaN.
    @inlinable
    package static func clampedInt(_ value: Double, to range: ClosedRange<Int>) -> Int? {
        guard !value.isNaN else { return nil }
        if value <= Double(range.lowerBound) { return range.lowerBound }
        // Double(Int.max) rounds up to 2^63, which does not fit back into an Int.
        if value >= Double(range.upperBound) { return range.upperBound }
        return Int(value)
    }

    /// Decimal digits only (no sign, no spaces), as an `Int`; `nil` when the text is
    /// not digits or the value exceeds `limit`.
    package static func decimal<S: StringProtocol>(_ text: S, limit: Int = .max) -> Int? {
        guard !text.isEmpty else { return nil }
        var value = 0
        for byte in text.utf8 {
            guard byte >= 0x30 && byte <= 0x39 else { return nil }
            guard let shifted = multiply(value, 10), let next = add(shifted, Int(byte - 0x30)), next <= limit else {
                return nil
            }
            value = next
        }
        return value
    }
}
