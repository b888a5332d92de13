import Foundation
import RasterImage
import TestSupport
import Testing

@testable import ImageLoader

@Suite("The memory cache")
struct MemoryCacheTests {
    /// The key of the original at a URL named `name`.
    func key(_ name: String) -> CacheKey { CacheKey(url: url(name), product: .original) }

    func url(_ name: String) -> URL { URL(string: "https://example.com/" + name)! }

    /// The names of the keys held, newest first.
    func names(_ cache: MemoryCache) -> [String] { cache.keysNewestFirst.map(\.url.lastPathComponent) }

    func image(_ side: Int) -> RasterImage {
        RasterImage(width: side, height: side, pixels: [UInt8](repeating: 1, count: side * side * 4))!
    }

    @Test("SIEVE by decoded bytes: a marked image is spared once, the hand moves on from where it stopped")
    func evictionByBytes() {
        var configuration = MemoryCache.Configuration()
        configuration.maxBytes = 3 * 40_000
        configuration.maxEntryFraction = 0.5
        let cache = MemoryCache(configuration: configuration)
        for key in ["a", "b", "c"] {
            cache.insert(image(100), response: nil, freshUntil: .distantFuture, for: self.key(key))
        }
        _ = cache.peek(url("a"))  // a is marked: the hand spares it and takes b
        cache.insert(image(100), response: nil, freshUntil: .distantFuture, for: self.key("d"))
        #expect(cache.peek(url("b")) == nil)
        #expect(names(cache) == ["d", "c", "a"])
        #expect(cache.usage.bytes == 120_000)
        // A bigger image (57,600 bytes: under half) pushes out as many as it needs,
        // from where the hand stopped: c, then d; a, unmarked on the first pass, stays
        // only because the room is made before it comes up.
        cache.insert(image(120), response: nil, freshUntil: .distantFuture, for: self.key("big"))
        #expect(names(cache) == ["big", "a"])
        #expect(cache.usage.bytes == 57_600 + 40_000)
    }

    @Test("one image larger than its share is not kept")
    func perEntryCap() {
        var configuration = MemoryCache.Configuration()
        configuration.maxBytes = 100_000
        let cache = MemoryCache(configuration: configuration)  // a quarter: 25,000 bytes
        #expect(!cache.insert(image(100), response: nil, freshUntil: .distantFuture, for: self.key("huge")))
        #expect(cache.insert(image(50), response: nil, freshUntil: .distantFuture, for: self.key("small")))
        #expect(cache.usage.count == 1)
    }

    @Test("count limit, time to live, a smaller limit, purge")
    func limits() {
        let clock = ManualClock()
        var configuration = MemoryCache.Configuration()
        configuration.maxCount = 2
        configuration.timeToLive = 60
        let cache = MemoryCache(configuration: configuration, clock: { clock.now })
        for key in ["a", "b", "c"] {
            cache.insert(image(10), response: nil, freshUntil: .distantFuture, for: self.key(key))
        }
        #expect(names(cache) == ["c", "b"])
        clock.advance(by: 61)
        #expect(cache.peek(url("c")) == nil)
        cache.insert(image(10), response: nil, freshUntil: .distantFuture, for: self.key("d"))
        cache.insert(image(10), response: nil, freshUntil: .distantFuture, for: self.key("e"))
        cache.setMaxBytes(400)
        #expect(names(cache) == ["e"])
        cache.removeAll()
        #expect(cache.usage.count == 0 && cache.usage.bytes == 0)
    }

    @Test("what is kept matches a plain model of SIEVE under random hits, inserts and removals")
    func sieveModel() {
        var configuration = MemoryCache.Configuration()
        configuration.maxCount = 8
        let cache = MemoryCache(configuration: configuration)
        // Oldest first, with the marks; the hand names the entry the next eviction looks at first.
        var model: [(key: String, marked: Bool)] = []
        var hand: String?
        func removeFromModel(_ key: String) {
            guard let index = model.firstIndex(where: { $0.key == key }) else { return }
            if hand == key { hand = index + 1 < model.count ? model[index + 1].key : nil }
            model.remove(at: index)
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            let key = "k\(Int.random(in: 0..<12, using: &generator))"
            switch Int.random(in: 0..<4, using: &generator) {
            case 0:
                cache.insert(image(2), response: nil, freshUntil: .distantFuture, for: self.key(key))
                removeFromModel(key)
                if model.count >= 8 {
                    var index = hand.flatMap { name in model.firstIndex { $0.key == name } } ?? 0
                    while model[index].marked {
                        model[index].marked = false
                        index = (index + 1) % model.count
                    }
                    hand = index + 1 < model.count ? model[index + 1].key : nil
                    model.remove(at: index)
                }
                model.append((key, false))
            case 1:
                cache.remove(url(key))
                removeFromModel(key)
            default:
                let hit = cache.peek(url(key)) != nil
                #expect(hit == model.contains { $0.key == key })
                if let index = model.firstIndex(where: { $0.key == key }) { model[index].marked = true }
            }
            #expect(names(cache) == model.reversed().map(\.key))
        }
        #expect(cache.usage.bytes == model.count * 16)
    }

    @Test("the default size follows the memory this process may use")
    func defaultSize() {
        #expect(MemoryCache.defaultMaxBytes >= 32 << 20 && MemoryCache.defaultMaxBytes <= 1 << 30)
        #expect(MemoryCache.defaultMaxBytes == min(1 << 30, max(32 << 20, MemoryLimit.available / 8)))
    }
}
