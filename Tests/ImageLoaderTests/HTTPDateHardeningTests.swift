import AsyncHTTPClient
import Foundation
import ImageLoaderSupport
import RasterImage
import Synchronization
import TestSupport
import Testing

@testable import ImageLoader

/// Dates and ages from origins: absurd years, fields and signs are no dates, never a trap.
@Suite("HTTP dates from hostile origins")
struct HTTPDateHardeningTests {
    @Test("HTTP dates with absurd years, fields or signs are no dates, never a trap")
    func httpDates() {
        for text in [
            "Sun, 06 Nov 999999999999 08:49:37 GMT", "Sun, 06 Nov 99999999999999999999999 08:49:37 GMT",
            "Sun, 99999999999999999999 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 99999999999999999999:49:37 GMT", "Sun Nov  6 08:49:37 99999999999999",
            "Sun, 06 Nov 1969 08:49:37 GMT", "Sun, +6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 10000 00:00:00 GMT",
            "Sun, 06 Nov 1994 08:49:37:00 GMT", "Sun, 06 Nov 1994 008:49:37 GMT",
        ] {
            #expect(HTTPDate.parse(text) == nil, "\(text)")
        }
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == Date(timeIntervalSince1970: 784_111_777))
        #expect(HTTPDate.parse("Fri, 31 Dec 9999 23:59:59 GMT") == Date(timeIntervalSince1970: 253_402_300_799))
        // Formatting never traps either, whatever the date.
        #expect(HTTPDate.format(Date(timeIntervalSince1970: 1e15)) == "Fri, 31 Dec 9999 23:59:59 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: .infinity)) == "Fri, 31 Dec 9999 23:59:59 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: -1e300)) == "Thu, 01 Jan 1970 00:00:00 GMT")
    }

    @Test("an Expires with an absurd year is an expired response; Age must be delta-seconds")
    func freshnessFromBadHeaders() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        func response(_ headers: [HeaderField]) -> StoredResponse {
            StoredResponse(url: "u", status: 200, headers: headers, requestTime: now, responseTime: now)
        }
        let policy = HTTPCachePolicy()
        #expect(
            policy.freshnessLifetime(response([HeaderField("Expires", "Sun, 06 Nov 999999999999 08:49:37 GMT")])) == 0)
        let infinite = response([HeaderField("Age", "inf"), HeaderField("Cache-Control", "max-age=60")])
        #expect(policy.evaluate(infinite, now: now).isFresh)
        let huge = response([HeaderField("Age", "99999999999999999999999"), HeaderField("Cache-Control", "max-age=60")])
        #expect(!policy.evaluate(huge, now: now).isFresh)
        #expect(policy.evaluate(huge, now: now).age == TimeInterval(CacheControl.maxDeltaSeconds))
    }
}
