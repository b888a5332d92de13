#!/usr/bin/env python3
"""decode_compare.py: whole-process full decodes, imageloader against the C floors.

    python3 Benchmarks/decode_compare.py [--runs N] [--inputs DIR] [--tool PATH]

Rows, on the inputs of Benchmarks/kit/make-inputs.sh (default /tmp/bench):
  photo.jpg, photo-progressive.jpg  `imageloader decode IN`  against `djpeg -outfile /dev/null IN`
  alpha.png                         `imageloader decode IN`  against `pngdec IN` (the kit's libpng floor)

`imageloader decode IN` (no -o) decodes the whole image into RGBA in memory and prints
a one-line summary; djpeg streams its rows to /dev/null and never holds the image.

Method, as in the kit's compare.sh: N rounds; each round runs every command of an
input once, in an order rotated from round to round, so neighbouring runs share the
machine's load. "x floor" is the median over rounds of (command time / floor time in
that round). Peak RSS comes from wait4's rusage of each run. Only the standard library.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run(command):
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    err = process.stderr.read().decode(errors="replace")
    process.stderr.close()
    if status != 0:
        sys.exit(f"decode_compare: {' '.join(command)} failed: {err.strip()}")
    return elapsed * 1000, usage.ru_maxrss / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--inputs", default=os.environ.get("BENCH_DIR", "/tmp/bench"))
    parser.add_argument("--tool", default=os.environ.get("IMAGELOADER", os.path.join(ROOT, ".build-release/release/imageloader")))
    parser.add_argument("--pngdec", default=os.path.join(HERE, "kit", "tools", "pngdec"))
    args = parser.parse_args()
    for path in (args.tool, args.pngdec):
        if not os.access(path, os.X_OK):
            sys.exit(f"decode_compare: {path} is not an executable (see Benchmarks/README.md)")

    cases = [
        ("photo.jpg", ["djpeg", "-outfile", "/dev/null"], "djpeg"),
        ("photo-progressive.jpg", ["djpeg", "-outfile", "/dev/null"], "djpeg"),
        ("alpha.png", [args.pngdec], "pngdec (libpng)"),
    ]
    load = os.getloadavg()[0]
    print(f"Full decode, whole process, {args.runs} interleaved rounds, {os.cpu_count()} CPUs, load {load:.2f}\n")
    print("| input | command | median ms | x floor | peak RSS MiB | IQR |")
    print("|---|---|---:|---:|---:|---:|")
    for name, floor, floor_name in cases:
        path = os.path.join(args.inputs, name)
        if not os.path.exists(path):
            sys.exit(f"decode_compare: {path} missing; run Benchmarks/kit/make-inputs.sh {args.inputs}")
        commands = [("imageloader decode", [args.tool, "decode", path]), (floor_name, floor + [path])]
        for _, command in commands:  # warm-up
            run(command)
        times = {label: [] for label, _ in commands}
        rss = {label: [] for label, _ in commands}
        for r in range(args.runs):
            order = commands[r % 2:] + commands[:r % 2]
            for label, command in order:
                ms, peak = run(command)
                times[label].append(ms)
                rss[label].append(peak)
        floor_times = times[floor_name]
        for label, _ in commands:
            ratio = statistics.median(t / f for t, f in zip(times[label], floor_times))
            q = statistics.quantiles(times[label], n=4)
            iqr = (q[2] - q[0]) / statistics.median(times[label])
            print(f"| {name} | {label} | {statistics.median(times[label]):.1f} | {ratio:.2f} | "
                  f"{statistics.median(rss[label]):.1f} | {iqr:.0%} |")


if __name__ == "__main__":
    main()
