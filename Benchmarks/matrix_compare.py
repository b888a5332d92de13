#!/usr/bin/env python3
"""matrix_compare.py: thumbnails per core across sizes and formats, against libvips 8.18 and
against each format's decoder floor. One command prints the whole table:

    python3 Benchmarks/matrix_compare.py [--rounds 3] [--cores 1,2] [--inputs REGEX] [--outputs REGEX]
        [--driver PATH] [--work DIR]

Rows: every input set by every output, on one core and on two.
  inputs   JPEG 640x480, 2000x1500, 4000x3000 and 6000x4000, baseline and progressive
           (ImageMagick plasma photos with noise, q90 4:2:0), and 6000x4000 progressive with an
           optimiser's scan script (jpegtran -scans, mozjpeg's shape); 2000x1500 PNG, RGB and RGBA
           (the alpha a radial gradient); 2000x1500 WebP (cwebp -q 90); 12 MP (4000x3000)
           HEIC (heif-enc -q 80: one HEVC frame) and AVIF (avifenc -s 8); a 12.6 MP HEIC as
           an iPhone writes one (4096x3072, a grid of 48 HEVC tiles of 512x512). Distinct files, made once into
           WORK/inputs (deterministic seeds).
  outputs  256, 512 and 1024 px fit (the longer side), and 512x512 fill (centre crop);
           JPEG quality 80 out, optimised Huffman tables, on both sides.
Engines, each given the same cores with taskset:
  ours     Benchmarks' thumbnail-throughput in one process, --jobs = cores: each file read,
           decoded with shrink-on-load, resampled and encoded in memory.
  libvips  pyvips 3.2.0 + pyvips-binary 8.18.7, a process per core (VIPS_CONCURRENCY=1,
           operation cache off) taking the next file from a shared counter: the file's
           bytes read, Image.thumbnail_buffer(bytes, W, height=H, linear=False[, crop=
           "centre"]), write_to_buffer(".jpg", Q=80, optimize_coding=True).
  floor    Benchmarks/decode_floor.c on one core: the format's reference decoder (libjpeg-
           turbo, libpng, libwebp, libheif, libavif) decoding the file to 8-bit pixels at
           the reduction the thumbnail chooses (JPEG's and WebP's shrink-on-load, the same
           rule as ImageDecoder's `.quality`: the largest that leaves twice the output),
           plus libjpeg-turbo writing a thumbnail of the output's size (q80, optimised
           tables): the two steps no thumbnailer of these files can skip.
libvips is asked for each set's first file first: pyvips-binary's libheif reads HEIC
headers but has no HEVC decoder, so HEIC rows show the floor alone.
Both engines first make thumbnails of a few files untimed, then time one pass over the
set (repeated up to a minimum count of images). Time per image per core = seconds x cores
/ images. Each round runs every row's engines in an order that alternates from round to
round; a row's ratio is the median over rounds of that round's ours / libvips.

Installs pyvips into WORK/venv with pip; needs ImageMagick, cwebp, heif-enc and avifenc
(scripts/setup.sh installs them) and a C compiler with the codecs' headers; builds the
driver (cd Benchmarks && swift build -c release --product thumbnail-throughput).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from inprocess_compare import cpu_list, run_json  # noqa: E402  (taskset's list, a tool's JSON line)
from serve_compare import sh  # noqa: E402  (the command runner)
WARMUP = 3

# name, kind, width, height, files, minimum images a pass (even, so two cores share it evenly)
INPUTS = [
    ("jpeg 640x480", "jpeg", 640, 480, 24, 120),
    ("jpeg 640x480 progressive", "jpeg-progressive", 640, 480, 24, 120),
    ("jpeg 2000x1500", "jpeg", 2000, 1500, 12, 36),
    ("jpeg 2000x1500 progressive", "jpeg-progressive", 2000, 1500, 12, 24),
    ("jpeg 4000x3000", "jpeg", 4000, 3000, 4, 12),
    ("jpeg 4000x3000 progressive", "jpeg-progressive", 4000, 3000, 4, 8),
    ("jpeg 6000x4000", "jpeg", 6000, 4000, 3, 10),
    ("jpeg 6000x4000 progressive", "jpeg-progressive", 6000, 4000, 3, 6),
    ("jpeg 6000x4000 progressive optimiser", "jpeg-progressive-optimiser", 6000, 4000, 3, 6),
    ("png 2000x1500 rgb", "png", 2000, 1500, 8, 16),
    ("png 2000x1500 rgba", "png-rgba", 2000, 1500, 8, 16),
    ("webp 2000x1500", "webp", 2000, 1500, 8, 16),
    ("heic 4000x3000", "heic", 4000, 3000, 3, 4),
    ("heic 4096x3072 grid", "heic-grid", 4096, 3072, 2, 2),
    ("avif 4000x3000", "avif", 4000, 3000, 3, 6),
]
# The scan script of the optimiser input set (jpegtran -scans syntax).
OPTIMISER_SCANS = """0 1 2: 0 0 0 0;
0: 1 8 0 2;
1: 1 8 0 0;
2: 1 8 0 0;
0: 9 63 0 2;
0: 1 63 2 1;
0: 1 63 1 0;
1: 9 63 0 0;
2: 9 63 0 0;
"""

# name, width, height, fill
OUTPUTS = [("256 fit", 256, 256, False), ("512 fit", 512, 512, False), ("1024 fit", 1024, 1024, False),
           ("512x512 fill", 512, 512, True)]


def make_inputs(folder, venv_python):
    """Each set in its own folder, files made once (the names say the seed)."""
    jobs = []
    for name, kind, width, height, count, _ in INPUTS:
        target = os.path.join(folder, name.replace(" ", "-"))
        os.makedirs(target, exist_ok=True)
        for i in range(count):
            seed = 9000 + 97 * width + i
            ext = {"jpeg": "jpg", "jpeg-progressive": "jpg", "jpeg-progressive-optimiser": "jpg", "png": "png", "png-rgba": "png", "webp": "webp",
                   "heic": "heic", "heic-grid": "heic", "avif": "avif"}[kind]
            out = os.path.join(target, f"f{i:02d}.{ext}")
            if not os.path.exists(out):
                jobs.append((kind, width, height, seed, out))
    work = tempfile.mkdtemp(prefix="matrix-inputs-", dir=folder)
    photo = ["convert-im6.q16", "-seed", "{seed}", "-size", "{w}x{h}", "plasma:fractal", "-blur", "0x1",
             "-attenuate", "0.3", "+noise", "Gaussian"]
    running = []
    env = {**os.environ, "MAGICK_THREAD_LIMIT": "1"}
    for index, (kind, width, height, seed, out) in enumerate(jobs):
        base = [c.replace("{seed}", str(seed)).replace("{w}", str(width)).replace("{h}", str(height)) for c in photo]
        tmp = os.path.join(work, f"{index}-" + os.path.basename(out))
        if kind == "jpeg":
            steps = [base + ["-sampling-factor", "2x2", "-quality", "90", tmp]]
        elif kind == "jpeg-progressive-optimiser":
            # An optimiser's scan script (mozjpeg's shape: the DC of all components in one
            # scan, then luma bands with successive approximation, chroma bands whole),
            # written over a baseline file by jpegtran -scans.
            script = os.path.join(work, "optimiser-scans.txt")
            with open(script, "w") as handle:
                handle.write(OPTIMISER_SCANS)
            steps = [base + ["-sampling-factor", "2x2", "-quality", "90", tmp + ".jpg"],
                     ["jpegtran", "-scans", script, "-outfile", tmp, tmp + ".jpg"]]
        elif kind == "jpeg-progressive":
            steps = [base + ["-sampling-factor", "2x2", "-quality", "90", "-interlace", "Plane", tmp]]
        elif kind == "png":
            steps = [base + ["-depth", "8", "-define", "png:exclude-chunks=date,time", "PNG24:" + tmp]]
        elif kind == "png-rgba":
            steps = [base + ["(", "-size", f"{width}x{height}", "radial-gradient:white-gray20", ")", "-alpha", "off",
                             "-compose", "CopyOpacity", "-composite", "-depth", "8", "-define",
                             "png:exclude-chunks=date,time", "PNG32:" + tmp]]
        elif kind == "webp":
            steps = [base + ["-depth", "8", tmp + ".png"], ["cwebp", "-quiet", "-q", "90", tmp + ".png", "-o", tmp]]
        elif kind == "heic":
            steps = [base + ["-sampling-factor", "2x2", "-quality", "95", tmp + ".jpg"],
                     ["heif-enc", "-q", "80", "-o", tmp, tmp + ".jpg"]]
        elif kind == "heic-grid":
            # As an iPhone stores a photo: 512x512 HEVC tiles in a grid (Fixtures/make_heic_grid.py).
            steps = [base + ["-depth", "8", tmp + ".png"],
                     [venv_python, os.path.join(ROOT, "Fixtures", "make_heic_grid.py"), tmp + ".png", tmp,
                      "--width", str(width), "--height", str(height), "--tile", "512", "--quality", "80"]]
        else:
            steps = [base + ["-sampling-factor", "2x2", "-quality", "95", tmp + ".jpg"],
                     ["avifenc", "-s", "8", "-j", "2", tmp + ".jpg", tmp]]
        running.append((steps, tmp, out))
    # Two at a time: each chain runs its steps in order.
    pending = list(running)
    active = []
    while pending or active:
        while pending and len(active) < 2:
            steps, tmp, out = pending.pop(0)
            active.append([steps, 0, subprocess.Popen(steps[0], env=env, stdout=subprocess.DEVNULL), tmp, out])
        entry = active.pop(0)
        steps, step, process, tmp, out = entry
        if process.wait() != 0:
            sys.exit(f"matrix_compare: making {out} failed: {' '.join(steps[step])}")
        if step + 1 < len(steps):
            active.append([steps, step + 1, subprocess.Popen(steps[step + 1], env=env, stdout=subprocess.DEVNULL),
                           tmp, out])
        else:
            os.rename(tmp, out)
    sh(["rm", "-rf", work])


def ensure_pyvips(venv):
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        sh([sys.executable, "-m", "venv", venv])
    if subprocess.run([python, "-c", "import pyvips"], capture_output=True).returncode != 0:
        sh([os.path.join(venv, "bin", "pip"), "install", "-q", "pyvips==3.2.0", "pyvips-binary==8.18.7"])
    return python


def ensure_floor(work):
    out = os.path.join(work, "decode_floor")
    source = os.path.join(HERE, "decode_floor.c")
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(source):
        sh(["cc", "-O2", "-o", out, source, "-ljpeg", "-lpng16", "-lwebp", "-lheif", "-lavif"])
    return out


def scaled_size(width, height, box_width, box_height, fill):
    fit_x, fit_y = box_width / width, box_height / height
    scale = max(fit_x, fit_y) if fill else min(fit_x, fit_y)
    scale = min(scale, 1.0)
    return max(1, round(width * scale)), max(1, round(height * scale))


def output_size(width, height, output):
    """The thumbnail's size: the box for fill, else the image scaled into it."""
    _, box_width, box_height, fill = output
    return (box_width, box_height) if fill else scaled_size(width, height, box_width, box_height, False)


def reduction(kind, width, height, box_width, box_height, fill):
    """The shrink-on-load factor ImageDecoder's `.quality` mode picks."""
    choices = {"jpeg": [8, 4, 2], "jpeg-progressive": [8, 4, 2], "jpeg-progressive-optimiser": [8, 4, 2],
               "webp": list(range(64, 1, -1))}.get(kind, [])
    target_w, target_h = scaled_size(width, height, box_width, box_height, fill)
    for factor in choices:
        if -(-width // factor) >= 2 * target_w and -(-height // factor) >= 2 * target_h:
            return factor
    return 1


def vips_worker(list_path, width, height, fill, processes):
    """Run by the virtual environment's Python: `--vips-worker LIST W H FILL PROCESSES`."""
    import multiprocessing
    paths = [line.strip() for line in open(list_path) if line.strip()]
    counter = multiprocessing.Value("i", 0)
    barrier = multiprocessing.Barrier(processes)
    results = multiprocessing.Queue()

    def work():
        try:
            import pyvips
            pyvips.cache_set_max(0)
            extra = {"crop": "centre"} if fill else {}

            def one(path):
                with open(path, "rb") as f:
                    data = f.read()
                image = pyvips.Image.thumbnail_buffer(data, width, height=height, linear=False, **extra)
                return len(image.write_to_buffer(".jpg", Q=80, optimize_coding=True))
            for path in paths[:WARMUP]:
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
        except Exception as error:  # reported, so the parent does not wait for a result forever
            barrier.abort()
            results.put(str(error).splitlines()[-1] if str(error) else repr(error))

    workers = [multiprocessing.Process(target=work) for _ in range(processes)]
    for w in workers:
        w.start()
    got = [results.get() for _ in workers]
    for w in workers:
        w.join()
    failures = [g for g in got if isinstance(g, str)]
    if failures:
        sys.exit(f"libvips: {failures[0]}")
    seconds = max(g[1] for g in got) - min(g[0] for g in got)
    print(json.dumps({"seconds": seconds, "images": len(paths), "bytes": sum(g[2] for g in got)}))


def ours(driver, list_path, output, cores):
    _, width, height, fill = output
    command = ["taskset", "-c", cpu_list(cores), driver, "--list", list_path, "--size", str(width), "--height",
               str(height), "--fit", "fill" if fill else "fit", "--format", "jpg", "--quality", "80", "--jobs",
               str(cores), "--warmup", str(WARMUP)]
    return run_json(command)


def libvips(python, list_path, output, cores):
    _, width, height, fill = output
    env = {**os.environ, "VIPS_CONCURRENCY": "1"}
    return run_json(["taskset", "-c", cpu_list(cores), python, os.path.abspath(__file__), "--vips-worker", list_path,
                     str(width), str(height), "1" if fill else "0", str(cores)], env=env)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cores", default="1,2")
    parser.add_argument("--inputs", default=".", help="a regular expression over the input names")
    parser.add_argument("--outputs", default=".", help="a regular expression over the output names")
    parser.add_argument("--driver")
    parser.add_argument("--work", default=os.path.join(ROOT, ".build", "matrix-bench"))
    parser.add_argument("--no-floor", action="store_true")
    parser.add_argument("--vips-worker", nargs=5)
    args = parser.parse_args()
    if args.vips_worker:
        path, width, height, fill, processes = args.vips_worker
        return vips_worker(path, int(width), int(height), fill == "1", int(processes))

    os.makedirs(args.work, exist_ok=True)
    python = ensure_pyvips(os.path.join(args.work, "venv"))
    driver = args.driver
    if not driver:
        sh(["swift", "build", "-c", "release", "--product", "thumbnail-throughput"], cwd=HERE,
           stdout=subprocess.DEVNULL)
        driver = os.path.join(HERE, ".build", "release", "thumbnail-throughput")
    folder = os.path.join(args.work, "inputs")
    make_inputs(folder, python)
    floor_tool = None if args.no_floor else ensure_floor(args.work)

    inputs = [i for i in INPUTS if re.search(args.inputs, i[0])]
    outputs = [o for o in OUTPUTS if re.search(args.outputs, o[0])]
    cores_list = [int(c) for c in args.cores.split(",")]
    lists = {}
    files = {}
    for name, kind, width, height, count, minimum in inputs:
        target = os.path.join(folder, name.replace(" ", "-"))
        paths = sorted(os.path.join(target, f) for f in os.listdir(target) if not f.startswith("."))
        files[name] = paths
        repeated = (paths * (-(-minimum // len(paths))))[:max(minimum, len(paths))]
        lists[name] = os.path.join(args.work, name.replace(" ", "-") + ".txt")
        with open(lists[name], "w") as f:
            f.write("\n".join(repeated) + "\n")

    floors = {}
    encodes = {}
    if floor_tool:
        for name, kind, width, height, *_ in inputs:
            for output in outputs:
                factor = reduction(kind, width, height, output[1], output[2], output[3])
                key = (name, factor)
                if key not in floors:
                    runs = "3" if kind.startswith("heic") or kind == "avif" else "9"
                    value = subprocess.run(["taskset", "-c", "0", floor_tool, "--reduce", str(factor), "--runs", runs]
                                           + files[name], check=True, capture_output=True, text=True).stdout
                    floors[key] = float(value.strip())
                size = output_size(width, height, output)
                if size not in encodes:
                    value = subprocess.run(["taskset", "-c", "0", floor_tool, "--encode", f"{size[0]}x{size[1]}"],
                                           check=True, capture_output=True, text=True).stdout
                    encodes[size] = float(value.strip())

    # libvips' own reading of each set: pyvips-binary's libheif reads HEIC headers but has
    # no HEVC decoder, so HEIC rows compare with the floor alone.
    vips_reads = {}
    for name, *_ in inputs:
        probe = subprocess.run([python, "-c", "import sys, pyvips; "
                                "pyvips.Image.thumbnail(sys.argv[1], 64).write_to_buffer('.jpg')", files[name][0]],
                               capture_output=True, text=True)
        vips_reads[name] = probe.returncode == 0
        if not vips_reads[name]:
            print(f"libvips cannot read {name}: {probe.stderr.strip().splitlines()[-1] if probe.stderr else '?'}",
                  file=sys.stderr)

    rows = [(i, o, c) for i in inputs for o in outputs for c in cores_list]
    per_core = {row: ([], []) for row in rows}
    ratios = {row: [] for row in rows}
    for round_index in range(args.rounds):
        for row in rows:
            (name, *_), output, cores = row
            runs = [("ours", lambda: ours(driver, lists[name], output, cores))]
            if vips_reads[name]:
                runs.append(("libvips", lambda: libvips(python, lists[name], output, cores)))
            if round_index % 2:
                runs.reverse()
            got = {engine: run() for engine, run in runs}
            times = {e: g["seconds"] * cores / g["images"] * 1000 for e, g in got.items()}
            per_core[row][0].append(times["ours"])
            if "libvips" in times:
                per_core[row][1].append(times["libvips"])
                ratios[row].append(times["ours"] / times["libvips"])
            vips_text = (f"libvips {times['libvips']:.2f} ms per image per core, {times['ours'] / times['libvips']:.2f}x"
                         if "libvips" in times else "libvips cannot read it")
            print(f"round {round_index + 1}: {name}, {output[0]}, {cores} core(s): ours {times['ours']:.2f} ms, "
                  f"{vips_text}", file=sys.stderr, flush=True)

    print(f"\nTime per image per core, ms: medians of {args.rounds} interleaved rounds; "
          "JPEG q80 out. Lower is better.\n")
    print("| input | output | cores | ours | libvips | ours / libvips | reduce | floor (decode + encode) | ours / floor |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        (name, kind, width, height, *_), output, cores = row
        factor = reduction(kind, width, height, output[1], output[2], output[3])
        decode = floors.get((name, factor))
        encode = encodes.get(output_size(width, height, output))
        floor = decode + encode if decode is not None and encode is not None else None
        if not per_core[row][0]:  # --rounds 0: the floors alone
            print(f"| {name} | {output[0]} | {cores} | - | - | - | 1/{factor} | {decode:.2f} + {encode:.2f} | - |")
            continue
        ours_ms = statistics.median(per_core[row][0])
        floor_text = f"{decode:.2f} + {encode:.2f} | {ours_ms / floor:.2f}" if floor else "- | -"
        vips_text = (f"{statistics.median(per_core[row][1]):.2f} | {statistics.median(ratios[row]):.2f}"
                     if ratios[row] else "cannot read | -")
        print(f"| {name} | {output[0]} | {cores} | {ours_ms:.2f} | {vips_text} | 1/{factor} | {floor_text} |")


if __name__ == "__main__":
    main()
