import Foundation
import TestSupport
import Testing

@testable import ImageLoader

/// The pure parts of the caching rules: dates, directives, ages.
@Suite("HTTP cache policy arithmetic")
struct HTTPCachePolicyTests {
    @Test("the three HTTP date forms parse to the same instant; IMF-fixdate is what is written")
    func dates() {
        let expected = Date(timeIntervalSince1970: 784_111_777)  // 1994-11-06 08:49:37 UTC
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == expected)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == expected)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == expected)
        #expect(HTTPDate.format(expected) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.parse("0") == nil)
        #expect(HTTPDate.parse("Sun, 32 Nov 1994 08:49:37 GMT") == nil)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 25:49:37 GMT") == nil)
        // Round trips across leap years and centuries, against Foundation's formatter.
        for seconds in stride(from: 0.0, to: 4_000_000_000, by: 86_400 * 97 + 3_607) {
            let date = Date(timeIntervalSince1970: seconds)
            #expect(HTTPDate.format(date) == HTTPDates.format(date))
            #expect(HTTPDate.parse(HTTPDates.format(date)) == date)
        }
    }

    @Test("field names compare without regard to ASCII case, and only ASCII letters fold")
    func fieldNames() {
        #expect(HeaderField("Content-Type", "").hasName("content-type"))
        #expect(HeaderField("ETAG", "").hasName("ETag"))
        #expect(!HeaderField("ETag", "").hasName("ETags"))
        #expect(!HeaderField("X-[", "").hasName("x-{"))  // 0x5B and 0x7B differ only in bit 5
        #expect(!HeaderField("X-@", "").hasName("x-`"))
        #expect(!HeaderField("Vary", "").hasName("Varz"))
        let fields = [HeaderField("Cache-Control", "max-age=1"), HeaderField("cache-control", "public")]
        #expect(fields.values(named: "CACHE-CONTROL") == ["max-age=1", "public"])
        #expect(fields.first(named: "Cache-control") == "max-age=1")
    }

    @Test("directives: case, quotes, unknowns, repeated or unreadable max-age")
    func directives() {
        let control = CacheControl(headerValues: [
            "Max-Age=60, MUST-REVALIDATE", "stale-while-revalidate=\"30\", foo=\"a, b\", immutable",
        ])
        #expect(control.maxAge == 60)
        #expect(control.mustRevalidate && control.immutable)
        #expect(control.staleWhileRevalidate == 30)
        #expect(CacheControl(headerValues: ["max-age=abc"]).maxAge == 0)
        #expect(CacheControl(headerValues: ["max-age=10, max-age=20"]).maxAge == 0)
        // Past 2^31 a delta-seconds is held at 2^31 (RFC 9111 §1.2.2), so sums cannot overflow.
        #expect(CacheControl(headerValues: ["max-age=99999999999999999999"]).maxAge == 1 << 31)
        #expect(CacheControl(headerValues: ["max-age=4294967296"]).maxAge == 1 << 31)
        #expect(CacheControl(headerValues: ["no-store"]).noStore)
        #expect(CacheControl(headerValues: ["no-cache=\"Set-Cookie\""]).noCache)
        #expect(CacheControl(headerValues: [""]) == CacheControl(headerValues: []))
    }

    @Test("current age: apparent age, Age, the round trip, and the time resident")
    func currentAge() {
        let sent = Date(timeIntervalSince1970: 1_000)
        let received = sent.addingTimeInterval(2)
        let response = StoredResponse(
            url: "u", status: 200,
            headers: [HeaderField("Date", HTTPDate.format(received.addingTimeInterval(-10))), HeaderField("Age", "5")],
            requestTime: sent, responseTime: received)
        let policy = HTTPCachePolicy()
        // apparent 10, corrected Age 5 + 2 = 7: the larger, 10; plus 30 resident.
        #expect(policy.currentAge(response, now: received.addingTimeInterval(30)) == 40)
        var noDate = response
        noDate.headers = [HeaderField("Age", "5")]
        #expect(policy.currentAge(noDate, now: received) == 7)
    }

    @Test("lifetime: max-age over Expires over the default over the heuristic")
    func lifetime() {
        let now = Date(timeIntervalSince1970: 2_000_000_000)
        func response(_ headers: [(String, String)], status: Int = 200) -> StoredResponse {
            StoredResponse(
                url: "u", status: status,
                headers: [HeaderField("Date", HTTPDate.format(now))] + headers.map { HeaderField($0.0, $0.1) },
                requestTime: now, responseTime: now)
        }
        let policy = HTTPCachePolicy()
        let expires = ("Expires", HTTPDate.format(now.addingTimeInterval(300)))
        let modified = ("Last-Modified", HTTPDate.format(now.addingTimeInterval(-1000)))
        #expect(policy.freshnessLifetime(response([("Cache-Control", "max-age=60"), expires])) == 60)
        #expect(policy.freshnessLifetime(response([expires, modified])) == 300)
        #expect(policy.freshnessLifetime(response([modified])) == 100)
        #expect(policy.freshnessLifetime(response([modified], status: 302)) == 0)  // not heuristically cacheable
        #expect(
            policy.freshnessLifetime(response([("Last-Modified", HTTPDate.format(now.addingTimeInterval(-1e8)))]))
                == HTTPCachePolicy.heuristicCap)
        #expect(HTTPCachePolicy(defaultMaxAge: 42).freshnessLifetime(response([modified])) == 42)
        #expect(HTTPCachePolicy(defaultMaxAge: 42).freshnessLifetime(response([expires])) == 300)
    }

    @Test("stale windows: within stale-while-revalidate and stale-if-error, but never with must-revalidate or no-cache")
    func staleWindows() {
        let start = Date(timeIntervalSince1970: 5_000)
        func evaluate(_ control: String, after seconds: TimeInterval) -> HTTPCachePolicy.Evaluation {
            let response = StoredResponse(
                url: "u", status: 200, headers: [HeaderField("Cache-Control", control)], requestTime: start,
                responseTime: start)
            return HTTPCachePolicy().evaluate(response, now: start.addingTimeInterval(seconds))
        }
        #expect(evaluate("max-age=10, stale-while-revalidate=5", after: 12).mayServeWhileRevalidating)
        #expect(!evaluate("max-age=10, stale-while-revalidate=5", after: 16).mayServeWhileRevalidating)
        #expect(evaluate("max-age=10, stale-if-error=5", after: 12).mayServeOnError)
        #expect(!evaluate("max-age=10, stale-if-error=5, must-revalidate", after: 12).mayServeOnError)
        #expect(!evaluate("max-age=10, stale-while-revalidate=5, no-cache", after: 12).mayServeWhileRevalidating)
        #expect(!evaluate("max-age=10, no-cache", after: 1).isFresh)
        #expect(evaluate("max-age=10, immutable", after: 1).isImmutable)
        #expect(!evaluate("max-age=10, immutable", after: 11).isImmutable)
    }
}
