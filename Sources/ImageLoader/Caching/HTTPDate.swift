import Foundation
import ImageLoaderSupport
import RasterImage

/// HTTP dates (RFC 9110 §5.6.7): IMF-fixdate to write, and the two obsolete forms
/// (RFC 850 and asctime) also read, as recipients must. Parsed by hand: no locale,
/// no date formatter, nothing that can read a date differently on another machine.
/// Every field is digits of a bounded length, the year is 1970...9999: anything else
/// is not a date (`nil`), never an overflow.
package enum HTTPDate {
    /// The years read; outside them a date is invalid (RFC 9110's four-digit year).
    static let years = 1970...9999
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    private static let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]  // 1970-01-01 was a Thursday

    /// The date, or `nil` when the text is not an HTTP date.
    package static func parse(_ text: String) -> Date? {
        let fields = text.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "-" }).map(String.init)
        // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT -> [Sun, 06, Nov, 1994, 08:49:37, GMT]
        // RFC 850:     Sunday, 06-Nov-94 08:49:37 GMT -> [Sunday, 06, Nov, 94, 08:49:37, GMT]
        // asctime:     Sun Nov  6 08:49:37 1994 -> [Sun, Nov, 6, 08:49:37, 1994]
        var day: Int?
        var month: Int?
        var year: Int?
        var time: [Int]?
        if fields.count == 6, fields[5] == "GMT" {
            day = Checked.decimal(fields[1], limit: 31)
            month = months.firstIndex(of: fields[2].lowercased())
            // RFC 850's two-digit years: the closest century, read as RFC 9110 asks.
            year = Checked.decimal(fields[3], limit: years.upperBound).map { value in
                fields[3].count == 2 ? (value >= 70 ? 1900 + value : 2000 + value) : value
            }
            time = clock(fields[4])
        } else if fields.count == 5 {
            month = months.firstIndex(of: fields[1].lowercased())
            day = Checked.decimal(fields[2], limit: 31)
            time = clock(fields[3])
            year = Checked.decimal(fields[4], limit: years.upperBound)
        }
        guard let day, let month, let year, let time, (1...31).contains(day), years.contains(year) else { return nil }
        // In range, so none of this can overflow: at most 8,035 years of seconds.
        let days = daysFromCivil(year: year, month: month + 1, day: day)
        let seconds = days * 86_400 + time[0] * 3_600 + time[1] * 60 + time[2]
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// IMF-fixdate, the form HTTP senders must use.
    /// Dates outside ``years`` are written as its first or last second.
    package static func format(_ date: Date) -> String {
        let last = 253_402_300_799  // 9999-12-31 23:59:59
        let seconds = Checked.clampedInt(date.timeIntervalSince1970.rounded(.down), to: 0...last) ?? 0
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = civilFromDays(days)
        let weekday = weekdays[((days % 7) + 7) % 7]
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let monthName = months[month - 1].prefix(1).uppercased() + months[month - 1].dropFirst()
        return
            "\(weekday), \(two(day)) \(monthName) \(year) \(two(secondOfDay / 3600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60)) GMT"
    }

    /// The UTC calendar fields of `date` (clamped to ``years``), for the other text forms
    /// dates take (AWS's `20150830T123600Z`).
    package static func fields(_ date: Date) -> (year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) {
        let last = 253_402_300_799  // 9999-12-31 23:59:59
        let seconds = Checked.clampedInt(date.timeIntervalSince1970.rounded(.down), to: 0...last) ?? 0
        let days = seconds / 86_400
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = civilFromDays(days)
        return (year, month, day, secondOfDay / 3600, secondOfDay / 60 % 60, secondOfDay % 60)
    }

    /// An RFC 3339 / ISO 8601 time as storage services and credential endpoints write
    /// it (`2026-11-28T19:39:45.465Z`, `2026-11-28T19:39:45+01:00`); `nil` for anything else.
    package static func parseISO8601(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.count <= 40 else { return nil }
        func number(_ start: Int, _ count: Int) -> Int? {
            Checked.decimal(String(decoding: bytes[start..<(start + count)], as: UTF8.self), limit: 9999)
        }
        guard bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
            bytes[10] == UInt8(ascii: "T") || bytes[10] == UInt8(ascii: "t") || bytes[10] == UInt8(ascii: " "),
            bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
            let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
            let minute = number(14, 2), let second = number(17, 2), years.contains(year), (1...12).contains(month),
            (1...31).contains(day), hour < 24, minute < 60, second <= 60
        else { return nil }
        var index = 19
        if bytes[index] == UInt8(ascii: ".") {
            index += 1
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
        }
        var offset = 0
        let rest = bytes[index...]
        if rest.elementsEqual([UInt8(ascii: "Z")]) || rest.elementsEqual([UInt8(ascii: "z")]) {
            offset = 0
        } else if rest.count == 6, rest.first == UInt8(ascii: "+") || rest.first == UInt8(ascii: "-"),
            bytes[index + 3] == UInt8(ascii: ":"), let hours = number(index + 1, 2), let minutes = number(index + 4, 2),
            hours < 24, minutes < 60
        {
            offset = (hours * 3600 + minutes * 60) * (rest.first == UInt8(ascii: "-") ? -1 : 1)
        } else {
            return nil
        }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offset
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    private static func clock(_ text: String) -> [Int]? {
        let fields = text.split(separator: ":", omittingEmptySubsequences: false)
        let parts = fields.compactMap { Checked.decimal($0, limit: 99) }
        guard fields.count == 3, parts.count == 3, fields.allSatisfy({ (1...2).contains($0.count) }),
            (0...23).contains(parts[0]), (0...59).contains(parts[1]), (0...60).contains(parts[2])
        else {
            return nil
        }
        return parts
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func civilFromDays(_ days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
