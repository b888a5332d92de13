#!/usr/bin/env python3
"""loader_compare.py: the loader benchmarks of two trees, side by side.

    python3 Benchmarks/loader_compare.py --baseline OLD_TREE [--rounds 3] [--filter REGEX]

Runs the `LoaderBenchmarks` executable of this tree and of OLD_TREE (another checkout,
e.g. `git worktree add /tmp/before COMMIT`), each built first with
`swift build -c release --product LoaderBenchmarks` in its Benchmarks/ folder, directly
rather than through `swift package benchmark` (whose build check takes minutes each
time here), alternating which goes first from round to round. Prints a Markdown table:
per benchmark, the median over rounds of each tree's p50 wall-clock time, the rounds,
and the ratio this/baseline.
"""
import argparse
import os
import re
import statistics
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_FILTER = ("Memory-cache.*|Disk-cache hit, thumbnail.*|1000 concurrent.*|10,000 prefetches.*"
                  "|Server path, thumbnail.*1 thread.*|Server path baseline.*")


def build(folder):
    subprocess.run(["swift", "build", "-c", "release", "--product", "LoaderBenchmarks"], cwd=folder, check=True,
                   stdout=subprocess.DEVNULL)


def run(folder, pattern):
    """{benchmark: p50} from the executable's own histogram output."""
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(folder, ".build", "release"))
    out = subprocess.run([os.path.join(folder, ".build", "release", "LoaderBenchmarks"), "--filter", pattern],
                         cwd=folder, env=env, capture_output=True, text=True, check=True).stdout
    found, bench, in_time = {}, None, False
    for line in out.split("\n"):
        m = re.match(r"Debug results for (.*):$", line)
        if m:
            bench, in_time = m.group(1), False
        elif line.startswith("Time (wall clock)"):
            in_time = True
        elif in_time:
            m = re.match(r"\s*([\d.]+)\s+([\d.]+)\s+\d+", line)
            if m and float(m.group(2)) >= 0.5:
                found[bench], in_time = float(m.group(1)), False
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", required=True, help="the other tree (its root folder)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--filter", default=DEFAULT_FILTER)
    args = parser.parse_args()
    trees = {"this": HERE, "baseline": os.path.join(os.path.abspath(args.baseline), "Benchmarks")}
    for folder in trees.values():
        build(folder)
    results = {}
    for round_index in range(args.rounds):
        order = ["baseline", "this"] if round_index % 2 == 0 else ["this", "baseline"]
        for name in order:
            for bench, value in run(trees[name], args.filter).items():
                results.setdefault(bench, {}).setdefault(name, []).append(value)
    print("| benchmark | baseline p50 (rounds) | this p50 (rounds) | this/baseline |")
    print("|---|---:|---:|---:|")
    for bench, by in results.items():
        base, this = by.get("baseline", []), by.get("this", [])
        if not base or not this:
            continue
        b, t = statistics.median(base), statistics.median(this)
        rounds = lambda values: ", ".join(f"{v:g}" for v in values)  # noqa: E731
        print(f"| {bench} | {b:g} ({rounds(base)}) | {t:g} ({rounds(this)}) | {t / b:.2f} |")


if __name__ == "__main__":
    main()
