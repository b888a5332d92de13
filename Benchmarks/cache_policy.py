#!/usr/bin/env python3
"""Hit rates of three eviction schemes for the package's byte-bounded memory caches.

Replays skewed workloads (Zipf popularity over 50,000 keys, costs drawn like decoded
thumbnails and originals: log-normal around 200 KB, capped at a quarter of the cache
as the caches cap one entry) against LRU, CLOCK and SIEVE (Zhang et al., NSDI 2024),
each holding at most a given share of the total bytes, and prints the request hit
rate and the byte hit rate of each. A second workload mixes in one-hit wonders (a
crawler or a feed of new uploads: half the requests for keys never asked again).

    python3 Benchmarks/cache_policy.py [--requests 400000] [--seed 1]

Pure Python, no dependencies. The cost of a hit is measured in Swift, by the memory-
cache benchmarks (`cd Benchmarks && swift package benchmark --target LoaderBenchmarks`).
"""
import argparse
import bisect
import math
import random
from collections import OrderedDict


class LRU:
    def __init__(self, capacity):
        self.capacity, self.bytes, self.items = capacity, 0, OrderedDict()

    def get(self, key):
        if key in self.items:
            self.items.move_to_end(key)
            return True
        return False

    def put(self, key, cost):
        if cost > self.capacity // 4:
            return
        self.items[key] = cost
        self.bytes += cost
        while self.bytes > self.capacity:
            _, evicted = self.items.popitem(last=False)
            self.bytes -= evicted


class Clock:
    """A ring of slots; a hit sets a flag; the hand clears flags and evicts the first unflagged."""

    def __init__(self, capacity):
        self.capacity, self.bytes = capacity, 0
        self.slots, self.index, self.free, self.hand = [], {}, [], 0

    def get(self, key):
        position = self.index.get(key)
        if position is None:
            return False
        self.slots[position][2] = True
        return True

    def put(self, key, cost):
        if cost > self.capacity // 4:
            return
        while self.bytes + cost > self.capacity and self.index:
            self._evict()
        slot = [key, cost, False]
        if self.free:
            position = self.free.pop()
            self.slots[position] = slot
        else:
            position = len(self.slots)
            self.slots.append(slot)
        self.index[key] = position
        self.bytes += cost

    def _evict(self):
        for _ in range(2 * len(self.slots)):
            position = self.hand
            self.hand = (self.hand + 1) % len(self.slots)
            slot = self.slots[position]
            if slot is None:
                continue
            if slot[2]:
                slot[2] = False
            else:
                del self.index[slot[0]]
                self.bytes -= slot[1]
                self.slots[position] = None
                self.free.append(position)
                return


class Sieve:
    """A FIFO list, newest at the head; a hit sets a flag; the hand walks from the tail
    towards the head, clearing flags, and evicts the first unflagged entry; survivors
    keep their place."""

    class Node:
        __slots__ = ("key", "cost", "visited", "newer", "older")

        def __init__(self, key, cost):
            self.key, self.cost, self.visited, self.newer, self.older = key, cost, False, None, None

    def __init__(self, capacity):
        self.capacity, self.bytes, self.index = capacity, 0, {}
        self.head = self.tail = self.hand = None

    def get(self, key):
        node = self.index.get(key)
        if node is None:
            return False
        node.visited = True
        return True

    def put(self, key, cost):
        if cost > self.capacity // 4:
            return
        while self.bytes + cost > self.capacity and self.index:
            self._evict()
        node = Sieve.Node(key, cost)
        node.older = self.head
        if self.head:
            self.head.newer = node
        self.head = node
        if self.tail is None:
            self.tail = node
        self.index[key] = node
        self.bytes += cost

    def _evict(self):
        node = self.hand or self.tail
        while node.visited:
            node.visited = False
            node = node.newer or self.tail
        self.hand = node.newer
        if node.older:
            node.older.newer = node.newer
        else:
            self.tail = node.newer
        if node.newer:
            node.newer.older = node.older
        else:
            self.head = node.older
        del self.index[node.key]
        self.bytes -= node.cost


def workload(rng, requests, keys, alpha, wonders):
    weights = [1 / (rank + 1) ** alpha for rank in range(keys)]
    cumulative, total = [], 0.0
    for weight in weights:
        total += weight
        cumulative.append(total)
    costs = [int(min(8e6, math.exp(rng.gauss(math.log(200e3), 1.0)))) for _ in range(keys)]
    fresh = keys
    for _ in range(requests):
        if wonders and rng.random() < wonders:
            fresh += 1
            yield fresh, int(min(8e6, math.exp(rng.gauss(math.log(200e3), 1.0))))
        else:
            key = bisect.bisect_left(cumulative, rng.random() * total)
            yield key, costs[key]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400_000)
    parser.add_argument("--keys", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=1)
    arguments = parser.parse_args()
    print("| workload | cache / all bytes | LRU hits (bytes) | CLOCK hits (bytes) | SIEVE hits (bytes) |")
    print("|---|---:|---:|---:|---:|")
    for alpha, wonders in [(0.8, 0.0), (1.0, 0.0), (0.8, 0.5)]:
        rng = random.Random(arguments.seed)
        trace = list(workload(rng, arguments.requests, arguments.keys, alpha, wonders))
        everything = 200e3 * math.exp(0.5) * arguments.keys
        for share in [0.01, 0.05, 0.2]:
            cells = []
            for policy in (LRU, Clock, Sieve):
                cache = policy(int(everything * share))
                hits = hit_bytes = all_bytes = 0
                for key, cost in trace:
                    all_bytes += cost
                    if cache.get(key):
                        hits += 1
                        hit_bytes += cost
                    else:
                        cache.put(key, cost)
                cells.append(f"{100 * hits / len(trace):.1f}% ({100 * hit_bytes / all_bytes:.1f}%)")
            name = f"Zipf {alpha}" + (f", {int(wonders * 100)}% one-hit wonders" if wonders else "")
            print(f"| {name} | {share:.0%} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
