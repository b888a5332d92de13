#!/usr/bin/env python3
"""strips_compare.py: one large baseline JPEG thumbnailed alone, on one core and spread over
several, with and without restart markers (issue 54's strips, JPEGStrips).

    python3 Benchmarks/strips_compare.py [--rounds 5] [--cores 2] [--outputs 256,1024]
        [--driver PATH] [--work DIR]

Inputs: the baseline JPEG sets of matrix_compare.py (6000x4000 and 4000x3000 plasma photos
with noise, q90 4:2:0, made there into WORK/inputs), each file also rewritten losslessly by
`jpegtran -restart` with a restart marker every MCU row (`rows`) and every 4 MCUs (`4 MCUs`,
a boundary every row here), as cameras and phones write them.
Engine: Benchmarks' thumbnail-throughput, `--jobs 1` (one thumbnail at a time, as a loader
job that runs alone), `--cores-per-job 1` (the whole decode) against `--cores-per-job C`
(the strips, on C cores by taskset), each file read, decoded with shrink-on-load,
resampled and encoded (JPEG q80) in memory. Wall time per image; the floor is
Benchmarks/decode_floor.c decoding the file without markers at the same reduction on one
core, plus the encode. Each round runs every configuration in an order that alternates
from round to round; the table shows medians, and the ratio is the median of the
per-round ratios.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import matrix_compare  # noqa: E402  (its inputs, the floor tool and the reduction rule)
from inprocess_compare import cpu_list  # noqa: E402

SETS = [("jpeg 6000x4000", 6000, 4000), ("jpeg 4000x3000", 4000, 3000)]
MARKINGS = [("none", None), ("rows", "1"), ("4 MCUs", "4B")]


def marked_sets(work):
    """Every set's files, and their rewrites with restart markers, as lists of paths."""
    folder = os.path.join(work, "inputs")
    wanted = [entry for entry in matrix_compare.INPUTS if entry[0] in [name for name, *_ in SETS]]
    matrix_compare.INPUTS[:] = wanted
    python = matrix_compare.ensure_pyvips(os.path.join(work, "venv"))
    matrix_compare.make_inputs(folder, python)
    lists = {}
    os.makedirs(os.path.join(work, "strips"), exist_ok=True)
    for name, *_ in SETS:
        source = os.path.join(folder, name.replace(" ", "-"))
        files = sorted(os.path.join(source, f) for f in os.listdir(source) if f.endswith(".jpg"))
        for marking, restart in MARKINGS:
            paths = []
            for path in files:
                if restart is None:
                    paths.append(path)
                    continue
                out = os.path.join(work, "strips", f"{name.replace(' ', '-')}-{restart}", os.path.basename(path))
                os.makedirs(os.path.dirname(out), exist_ok=True)
                if not os.path.exists(out):
                    subprocess.run(["jpegtran", "-copy", "all", "-restart", restart, "-outfile", out, path],
                                   check=True)
                paths.append(out)
            list_path = os.path.join(work, "strips", f"{name.replace(' ', '-')}-{marking.replace(' ', '')}.txt")
            with open(list_path, "w") as handle:
                handle.write("\n".join(paths * 3) + "\n")
            lists[(name, marking)] = (list_path, paths)
    return lists


def run(driver, list_path, size, cores, per_job):
    command = ["taskset", "-c", cpu_list(cores), driver, "--list", list_path, "--size", str(size), "--format",
               "jpg", "--quality", "80", "--jobs", "1", "--cores-per-job", str(per_job), "--warmup", "2"]
    result = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
    return result["seconds"] / result["images"] * 1000


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--outputs", default="256,1024")
    parser.add_argument("--driver")
    parser.add_argument("--work", default=os.path.join(ROOT, ".build", "matrix-bench"))
    args = parser.parse_args()
    driver = args.driver
    if not driver:
        subprocess.run(["swift", "build", "-c", "release", "--product", "thumbnail-throughput"], cwd=HERE,
                       check=True, stdout=subprocess.DEVNULL)
        driver = os.path.join(HERE, ".build", "release", "thumbnail-throughput")
    lists = marked_sets(args.work)
    floor_tool = matrix_compare.ensure_floor(args.work)
    sizes = [int(s) for s in args.outputs.split(",")]
    rows = [(name, width, height, marking, size) for name, width, height in SETS for size in sizes
            for marking, _ in MARKINGS]
    times = {}
    for round_index in range(args.rounds):
        for name, width, height, marking, size in rows:
            list_path = lists[(name, marking)][0]
            configurations = [("one", 1), ("spread", args.cores)]
            if round_index % 2:
                configurations.reverse()
            for label, per_job in configurations:
                value = run(driver, list_path, size, args.cores, per_job)
                times.setdefault((name, marking, size, label), []).append(value)
        print(f"round {round_index + 1} of {args.rounds} done", file=sys.stderr)
    print(f"Wall time per image, ms, medians of {args.rounds} interleaved rounds; one thumbnail at a time "
          f"on {args.cores} cores (taskset). Lower is better.\n")
    print(f"| input | markers | output | 1 core | {args.cores} cores | {args.cores} cores / 1 | reduce | "
          "floor (decode + encode), 1 core |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    floors = {}
    for name, width, height, marking, size in rows:
        factor = matrix_compare.reduction("jpeg", width, height, size, size, False)
        if (name, factor) not in floors:
            files = lists[(name, "none")][1]
            decode = float(subprocess.run(["taskset", "-c", "0", floor_tool, "--reduce", str(factor), "--runs", "5"]
                                          + files, check=True, capture_output=True, text=True).stdout)
            out_w, out_h = matrix_compare.scaled_size(width, height, size, size, False)
            encode = float(subprocess.run(["taskset", "-c", "0", floor_tool, "--encode", f"{out_w}x{out_h}"],
                                          check=True, capture_output=True, text=True).stdout)
            floors[(name, factor)] = (decode, encode)
        one = times[(name, marking, size, "one")]
        spread = times[(name, marking, size, "spread")]
        ratio = statistics.median(s / o for s, o in zip(spread, one))
        decode, encode = floors[(name, factor)]
        print(f"| {name} | {marking} | {size} fit | {statistics.median(one):.2f} | {statistics.median(spread):.2f} "
              f"| {ratio:.2f} | 1/{factor} | {decode:.2f} + {encode:.2f} |")


if __name__ == "__main__":
    main()
