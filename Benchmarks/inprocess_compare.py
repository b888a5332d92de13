#!/usr/bin/env python3
"""inprocess_compare.py: thumbnails per core inside a running process, against libvips.

    python3 Benchmarks/inprocess_compare.py [--rounds N] [--inputs DIR] [--photos DIR]
        [--cores 1,2] [--sizes 256,512] [--formats jpg,webp] [--batch] [--profile]

Engines, each given the same cores with taskset:
  ours      Benchmarks' thumbnail-throughput: the RasterImage API (decode with
            shrink-on-load, resample, encode in memory; no cache), --jobs = cores,
            in one process;
  libvips   pyvips 3.2.0 with pyvips-binary 8.18.7 (libvips 8.18), one process per
            core (VIPS_CONCURRENCY=1, operation cache off), each taking the next file
            from a shared counter: Image.thumbnail(path, size) then write_to_buffer.
Both read the files (from the page cache), keep the encoded bytes in memory, and
encode alike: JPEG quality 85 with optimised Huffman tables (our default; pyvips is
asked for optimize_coding), WebP quality 80 at effort 4. Each process first makes
thumbnails of 20 files untimed, then times one pass over all of them.

Inputs: DIR/small from Benchmarks/kit/make-inputs.sh (200 files, 640x480 to
1600x1200, 70% JPEG, 30% PNG), and PHOTOS: 2000x1500 JPEGs and PNGs made as
serve_compare.py makes them (30 of each by default here).

Method: N rounds; in each, every case runs both engines in an order that alternates
from round to round; the ratio is the median over rounds of (ours / libvips) in that
round. --batch adds `imageloader batch` over the small set as users run it (whole
process, new cache folder each run, its default --concurrency) against libvips' time on
the same cores. --profile adds the stage split of one 1-core pass of each engine.

Installs pyvips into .build/inprocess-bench/venv with pip, ImageMagick through the
kit's setup.sh and, for --profile, perf (linux-perf) with apt when missing; builds the
driver (cd Benchmarks && swift build -c release --product thumbnail-throughput) and,
with --batch, the release binary (scripts/build-release.sh) when it is missing.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from serve_compare import make_inputs, sh  # noqa: E402  (the photos and the command runner)
VENV = os.path.join(ROOT, ".build", "inprocess-bench", "venv")
WARMUP = 20


def ensure_pyvips():
    python = os.path.join(VENV, "bin", "python")
    if not os.path.exists(python):
        sh([sys.executable, "-m", "venv", VENV])
    probe = subprocess.run([python, "-c", "import pyvips"], capture_output=True)
    if probe.returncode != 0:
        sh([os.path.join(VENV, "bin", "pip"), "install", "-q", "pyvips==3.2.0", "pyvips-binary==8.18.7"])
    return python


def ensure_driver(path):
    if path:
        return path
    sh(["swift", "build", "-c", "release", "--product", "thumbnail-throughput"], cwd=HERE,
       stdout=subprocess.DEVNULL)
    return os.path.join(HERE, ".build", "release", "thumbnail-throughput")


def ensure_inputs(inputs, photos, photo_count):
    kit = os.path.join(HERE, "kit")
    if shutil.which("convert-im6.q16") is None:
        sh(["bash", os.path.join(kit, "setup.sh")])  # ImageMagick, for both sets
    if not os.path.isdir(os.path.join(inputs, "small")):
        sh(["bash", os.path.join(kit, "make-inputs.sh"), inputs])
    make_inputs(photos, photo_count)
    small = sorted(os.path.join(inputs, "small", f) for f in os.listdir(os.path.join(inputs, "small")))
    big = sorted(os.path.join(photos, kind, f) for kind in ("jpeg", "png")
                 for f in os.listdir(os.path.join(photos, kind)))
    # Interleave JPEGs and PNGs, so a warm-up sees both.
    jpegs = [p for p in big if p.endswith(".jpg")][:photo_count]
    pngs = [p for p in big if p.endswith(".png")][:photo_count]
    big = [p for pair in zip(jpegs, pngs) for p in pair]
    return {"small": small, "photos": big}


def cpu_list(cores):
    return ",".join(str(i) for i in range(cores))


# The libvips side: run by the virtual environment's Python as
# `inprocess_compare.py --vips-worker LIST SIZE FORMAT QUALITY PROCESSES`.
def vips_worker(list_path, size, fmt, quality, processes, stages=False):
    import multiprocessing
    paths = [line.strip() for line in open(list_path) if line.strip()]
    counter = multiprocessing.Value("i", 0)
    barrier = multiprocessing.Barrier(processes)
    results = multiprocessing.Queue()

    def work(share_warmup):
        import pyvips
        pyvips.cache_set_max(0)
        options = {"Q": quality, "optimize_coding": True} if fmt == "jpg" else {"Q": quality, "effort": 4}

        def one(path):
            image = pyvips.Image.thumbnail(path, size)
            return len(image.write_to_buffer("." + fmt, **options))
        for path in share_warmup:
            one(path)
        barrier.wait()
        start = time.perf_counter()
        total = 0
        while True:
            with counter.get_lock():
                index = counter.value
                counter.value += 1
            if index >= len(paths):
                break
            total += one(paths[index])
        results.put((start, time.perf_counter(), total))

    workers = [multiprocessing.Process(target=work, args=(paths[:WARMUP],)) for _ in range(processes)]
    for w in workers:
        w.start()
    got = [results.get() for _ in workers]
    for w in workers:
        w.join()
    seconds = max(g[1] for g in got) - min(g[0] for g in got)
    print(json.dumps({"seconds": seconds, "images": len(paths), "bytes": sum(g[2] for g in got)}))


def vips_stages(list_path, size, fmt, quality):
    """One process: decode alone (at the shrink-on-load scale), the thumbnail in memory
    (decode, resize, colour), and the encode alone of thumbnails already in memory;
    resize and colour by difference. pyvips-binary's libvips carries no symbols for perf."""
    import pyvips
    pyvips.cache_set_max(0)
    paths = [line.strip() for line in open(list_path) if line.strip()]
    options = {"Q": quality, "optimize_coding": True} if fmt == "jpg" else {"Q": quality, "effort": 4}

    def load(path):
        header = pyvips.Image.new_from_file(path)
        factor = max(header.width, header.height) / size
        if path.endswith(".jpg"):
            shrink = 8 if factor >= 16 else 4 if factor >= 8 else 2 if factor >= 4 else 1
            return pyvips.Image.new_from_file(path, shrink=shrink, access="sequential")
        return pyvips.Image.new_from_file(path, access="sequential")

    def timed(step, items):
        for item in items[:WARMUP]:
            step(item)
        start = time.perf_counter()
        for item in items:
            step(item)
        return time.perf_counter() - start
    decode = timed(lambda p: load(p).copy_memory(), paths)
    thumbnail = timed(lambda p: pyvips.Image.thumbnail(p, size).copy_memory(), paths)
    thumbnails = [pyvips.Image.thumbnail(p, size).copy_memory() for p in paths]
    encode = timed(lambda t: t.write_to_buffer("." + fmt, **options), thumbnails)
    print(json.dumps({"decode": decode, "resize+colour": thumbnail - decode, "encode": encode,
                      "total": thumbnail + encode}))


def run_json(command, env=None):
    out = subprocess.run(command, check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def ours(driver, list_path, size, fmt, quality, cores):
    return run_json(["taskset", "-c", cpu_list(cores), driver, "--list", list_path, "--size", str(size),
                     "--format", fmt, "--quality", str(quality), "--jobs", str(cores), "--warmup", str(WARMUP)])


def libvips(python, list_path, size, fmt, quality, cores):
    env = {**os.environ, "VIPS_CONCURRENCY": "1"}
    return run_json(["taskset", "-c", cpu_list(cores), python, os.path.abspath(__file__), "--vips-worker",
                     list_path, str(size), fmt, str(quality), str(cores)], env=env)


def batch(tool, inputs_dir, size, fmt, quality, cores, parent):
    # Each run writes into a new folder (new output and cache folders, as a first batch),
    # and every run's folder stays until the benchmark ends. Deleting one run's 400 files
    # before the next would bill the next run for them: on an ext4 without a journal, as
    # here, creating a file skips every inode freed in the last minutes, one buffer
    # lookup each (find_inode_bit, recently_deleted): that took the batch's system time from
    # about 0.12 s to 0.2-0.3 s, and its wall time up by about 0.05 s at 2 cores.
    work = tempfile.mkdtemp(prefix="batch-", dir=parent)
    start = time.perf_counter()
    sh(["taskset", "-c", cpu_list(cores), tool, "batch", inputs_dir, "--size", str(size), "--out",
        os.path.join(work, "out"), "--format", fmt, "--quality", str(quality),
        "--cache-dir", os.path.join(work, "cache")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return {"seconds": time.perf_counter() - start}


# perf's view of our pass: each sample goes to the stage of the innermost frame of its
# call chain that names one (Swift symbols are matched mangled; libjpeg's and zlib's
# frames name none, so their callers decide).
OUR_STAGES = [
    ("file I/O", ("ByteReader", "8PlatformO4read", "openRegularFile")),
    ("encode", ("JPEGEncoder", "WebPEncoder", "PNGEncoder", "7encoded")),
    ("resize", ("StreamingResizer", "ResampleWeights", "7resized")),
    ("colour", ("ThumbnailFinisher", "ColorProfile", "TransformCache")),
    ("decode", ("Decoder", "ReadSession", "PNGImageData", "PNGFilter", "ZlibInflate")),
]

UNWOUND = [("decode", ("libjpeg", "libdeflate", "libisal", "libpng", "libz")), ("encode", ("libwebp", "libsharpyuv"))]


def our_stages(driver, list_path, size, fmt, quality):
    if shutil.which("perf") is None:
        # Debian's perf is linux-perf (as root, or through sudo).
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        subprocess.run(sudo + ["apt-get", "install", "-y", "-q", "linux-perf"], stdout=subprocess.DEVNULL,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    if shutil.which("perf") is None:
        print("inprocess_compare: perf is not available; no stage split for our side", file=sys.stderr)
        return None
    with tempfile.TemporaryDirectory() as work:
        data = os.path.join(work, "perf.data")
        sh(["perf", "record", "-q", "-o", data, "-F", "2000", "--call-graph", "dwarf,16384", "taskset", "-c", "0",
            driver, "--list", list_path, "--size", str(size), "--format", fmt, "--quality", str(quality),
            "--jobs", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        script = subprocess.run(["perf", "script", "-i", data, "-F", "ip,sym,dso"],
                                capture_output=True, text=True, errors="replace").stdout
    counts = {name: 0 for name, _ in OUR_STAGES}
    counts["other"] = 0
    total = 0
    for sample in script.split("\n\n"):
        frames = [line.strip() for line in sample.strip().splitlines()]
        if not frames:
            continue
        total += 1
        stage = "other"
        # The innermost frame that names a stage decides (an encoder's libjpeg calls are encode).
        for frame in frames:
            found = next((name for name, keys in OUR_STAGES if any(k in frame for k in keys)), None)
            if found:
                stage = found
                break
        if stage == "other":
            # libjpeg's, libdeflate's and ISA-L's SIMD routines carry no unwind tables, so perf
            # cannot walk out of them: counted as decoding, where nearly all their time goes.
            stage = next((name for name, libraries in UNWOUND if any(lib in frames[0] for lib in libraries)), stage)
        counts[stage] += 1
    return {name: count / total for name, count in counts.items()} if total else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--inputs", default="/tmp/bench")
    parser.add_argument("--photos", default=os.path.join(ROOT, ".build", "serve-bench", "inputs"))
    parser.add_argument("--photo-count", type=int, default=30)
    parser.add_argument("--cores", default="1,2")
    parser.add_argument("--sizes", default="256,512")
    parser.add_argument("--formats", default="jpg,webp")
    parser.add_argument("--sets", default="small,photos")
    parser.add_argument("--driver")
    parser.add_argument("--tool", default=os.path.join(ROOT, ".build-release", "release", "imageloader"))
    parser.add_argument("--batch", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--vips-worker", nargs=5)
    parser.add_argument("--vips-stages", nargs=4)
    args = parser.parse_args()
    if args.vips_worker:
        path, size, fmt, quality, processes = args.vips_worker
        return vips_worker(path, int(size), fmt, int(quality), int(processes))
    if args.vips_stages:
        path, size, fmt, quality = args.vips_stages
        return vips_stages(path, int(size), fmt, int(quality))

    python = ensure_pyvips()
    driver = ensure_driver(args.driver)
    if args.batch and not os.path.exists(args.tool):
        sh(["bash", os.path.join(ROOT, "scripts", "build-release.sh")], stdout=subprocess.DEVNULL)
    sets = ensure_inputs(args.inputs, args.photos, args.photo_count)
    work = tempfile.mkdtemp(prefix="inprocess-compare-")
    lists = {}
    for name, paths in sets.items():
        lists[name] = os.path.join(work, name + ".txt")
        with open(lists[name], "w") as f:
            f.write("\n".join(paths) + "\n")
    quality = {"jpg": 85, "webp": 80}
    cases = [(s, c, z, f) for s in args.sets.split(",") for c in map(int, args.cores.split(","))
             for z in map(int, args.sizes.split(",")) for f in args.formats.split(",")]
    ratios = {case: [] for case in cases}
    seconds = {case: ([], []) for case in cases}
    batch_rows = {}
    for round_index in range(args.rounds):
        for case in cases:
            name, cores, size, fmt = case
            runs = [("ours", lambda: ours(driver, lists[name], size, fmt, quality[fmt], cores)),
                    ("libvips", lambda: libvips(python, lists[name], size, fmt, quality[fmt], cores))]
            if round_index % 2:
                runs.reverse()
            got = {engine: run()["seconds"] for engine, run in runs}
            seconds[case][0].append(got["ours"])
            seconds[case][1].append(got["libvips"])
            ratios[case].append(got["ours"] / got["libvips"])
            print(f"round {round_index + 1} {name} {cores} core(s) {size} px {fmt}: ours {got['ours']:.3f} s, "
                  f"libvips {got['libvips']:.3f} s, {got['ours'] / got['libvips']:.2f}x", file=sys.stderr)
        if args.batch:
            for cores in map(int, args.cores.split(",")):
                runs = [("batch", lambda: batch(args.tool, os.path.join(args.inputs, "small"), 256, "jpg", 85, cores,
                                                     work)),
                        ("libvips", lambda: libvips(python, lists["small"], 256, "jpg", 85, cores))]
                if round_index % 2:
                    runs.reverse()
                got = {engine: run()["seconds"] for engine, run in runs}
                batch_rows.setdefault(cores, []).append((got["batch"], got["libvips"]))
                print(f"round {round_index + 1} batch {cores} core(s): {got['batch']:.3f} s against libvips "
                      f"{got['libvips']:.3f} s", file=sys.stderr)

    print(f"\nMedians of {args.rounds} interleaved rounds (time of one pass; lower is better):\n")
    print("| set | cores | size | output | ours s | libvips s | ours / libvips | thumbnails per core, x libvips |")
    print("|---|---:|---:|---|---:|---:|---:|---:|")
    for case in cases:
        name, cores, size, fmt = case
        ratio = statistics.median(ratios[case])
        print(f"| {name} ({len(sets[name])}) | {cores} | {size} | {fmt} | {statistics.median(seconds[case][0]):.3f} | "
              f"{statistics.median(seconds[case][1]):.3f} | {ratio:.2f} | {1 / ratio:.2f}x |")
    if batch_rows:
        print("\n| `imageloader batch` over small/, 256 px JPEG | cores | batch s | libvips s | batch / libvips |")
        print("|---|---:|---:|---:|---:|")
        for cores, rows in batch_rows.items():
            ratio = statistics.median(b / v for b, v in rows)
            print(f"| whole process, new cache folder | {cores} | {statistics.median(b for b, _ in rows):.3f} | "
                  f"{statistics.median(v for _, v in rows):.3f} | {ratio:.2f} |")
    if args.profile:
        print("\nStages of one 1-core pass over small/, 256 px JPEG:\n")
        split = our_stages(driver, lists["small"], 256, "jpg", 85)
        if split:
            print("ours (perf, call graphs):", ", ".join(f"{k} {v * 100:.0f}%" for k, v in split.items()))
        env = {**os.environ, "VIPS_CONCURRENCY": "1"}
        vips = run_json(["taskset", "-c", "0", python, os.path.abspath(__file__), "--vips-stages", lists["small"],
                         "256", "jpg", "85"], env=env)
        print("libvips (by difference):", ", ".join(f"{k} {v:.3f} s" for k, v in vips.items()))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
