#!/usr/bin/env python3
"""modern_compare.py: HEIF, AVIF and JPEG XL, side by side, medians of interleaved rounds.

    python3 Benchmarks/modern_compare.py [--runs N] [--inputs DIR] [--tool PATH] [--only SECTION]

Inputs: a 12-megapixel crop (4000x3000) of the kit's photo.jpg (Benchmarks/kit/
make-inputs.sh, default /tmp/bench), encoded by the formats' own tools into
photo.heic (heif-enc -q 80), photo.avif (avifenc -s 6 --min 20 --max 30), photo.jxl
(cjxl -d 1) and photo-lossless.jxl (cjxl -d 0); a 48-megapixel HEIC grid of 512-pixel
tiles like an iPhone's (8000x6000, built from tiles heif-enc coded, by
Fixtures/make_heic_grid.py) for peak memory.

Sections:
  decode     whole-process full decodes: `imageloader decode IN` against heif-convert
             (to a y4m file, the cheapest output it has: YCbCr, so it skips the
             conversion to RGB that we do), avifdec -j 1 (y4m, the same) and djxl
             --num_threads=1 (to a PPM; djxl's 0 means all cores), output to /dev/shm.
  thumbnail  256 px thumbnails, one at a time on one core, whole processes:
             `imageloader thumbnail` against pyvips (libvips 8.18, AVIF only: it reads
             no HEVC and no JPEG XL), and JPEG XL through its DC against a full decode
             followed by a resize (`imageloader thumbnail --full-decode`).
  encode     512 px thumbnails of the kit's photo written as WebP q75, JPEG q80, AVIF
             (speed 9, quality 60) and JPEG XL (effort 4, quality 75), each from the
             same decoded pixels; time per image, bytes, and SSIMULACRA2 against the
             512 px PNG (higher is better).
  memory     peak RSS of a 256 px thumbnail of the 48-megapixel HEIC grid.

"x ref" is the median over rounds of (our time / the reference's time in that round).
Needs: heif-enc, heif-convert, avifenc, avifdec, cjxl, djxl; for `thumbnail` pyvips with
pyvips-binary (--python), for `encode` pip's ssimulacra2 (--venv: a virtual environment
that has it).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


def run(command, env=None):
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    err = process.stderr.read().decode(errors="replace")
    process.stderr.close()
    if status != 0:
        sys.exit(f"modern_compare: {' '.join(command)} failed: {err.strip()[-400:]}")
    return elapsed * 1000, usage.ru_maxrss / 1024


def prepare(inputs, work):
    photo = os.path.join(inputs, "photo.jpg")
    if not os.path.exists(photo):
        sys.exit(f"modern_compare: {photo} missing (run Benchmarks/kit/make-inputs.sh {inputs})")
    png = os.path.join(work, "photo12.png")
    if not os.path.exists(png):
        subprocess.run(["convert-im6.q16", photo, "-crop", "4000x3000+1000+500", "+repage", png], check=True)
    made = {"png": png}
    for name, command in [
        ("photo.heic", ["heif-enc", "-q", "80", "-o", "{out}", png]),
        ("photo.avif", ["avifenc", "-s", "6", "-j", "2", "--min", "20", "--max", "30", png, "{out}"]),
        ("photo.jxl", ["cjxl", "-d", "1", png, "{out}"]),
        ("photo-lossless.jxl", ["cjxl", "-d", "0", "-e", "3", png, "{out}"]),
    ]:
        out = os.path.join(work, name)
        if not os.path.exists(out):
            subprocess.run([c.replace("{out}", out) for c in command], check=True, capture_output=True)
        made[name] = out
    grid = os.path.join(work, "grid48.heic")
    if not os.path.exists(grid):
        subprocess.run([sys.executable, os.path.join(ROOT, "Fixtures", "make_heic_grid.py"), photo, grid],
                       check=True)
    made["grid"] = grid
    return made


def rounds(cases, runs, label):
    """cases: [(row name, command, reference command or None)]; interleaved, rotated."""
    times = {name: [] for name, _, _ in cases}
    refs = {name: [] for name, _, _ in cases}
    rss = {name: [] for name, _, _ in cases}
    commands = []
    for name, ours, reference in cases:
        commands.append((name, "ours", ours))
        if reference:
            commands.append((name, "ref", reference))
    for r in range(runs):
        order = commands[r % len(commands):] + commands[:r % len(commands)]
        for name, kind, command in order:
            ms, peak = run(command)
            (times if kind == "ours" else refs)[name].append(ms)
            if kind == "ours":
                rss[name].append(peak)
    print(f"\n{label}: {runs} interleaved rounds, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}\n")
    print("| row | ours ms (median) | reference ms | x ref | our peak RSS MiB |")
    print("|---|---:|---:|---:|---:|")
    for name, _, reference in cases:
        ours = statistics.median(times[name])
        if reference:
            ref = statistics.median(refs[name])
            ratio = statistics.median(a / b for a, b in zip(times[name], refs[name]))
            print(f"| {name} | {ours:.0f} | {ref:.0f} | {ratio:.2f} | {max(rss[name]):.0f} |")
        else:
            print(f"| {name} | {ours:.0f} | - | - | {max(rss[name]):.0f} |")


def single_core(command):
    return ["taskset", "-c", "0"] + command


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--inputs", default=os.environ.get("BENCH_DIR", "/tmp/bench"))
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "modern-bench"))
    parser.add_argument("--tool", default=os.environ.get(
        "IMAGELOADER", os.path.join(ROOT, ".build-release/release/imageloader")))
    parser.add_argument("--python", default=sys.executable, help="a Python with pyvips, for the thumbnail rows")
    parser.add_argument("--venv", help="a virtual environment whose bin/ has ssimulacra2")
    parser.add_argument("--only", choices=["decode", "thumbnail", "encode", "memory"])
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    made = prepare(args.inputs, args.work)
    tool = args.tool
    out = lambda name: os.path.join(SCRATCH, name)

    if args.only in (None, "decode"):
        rounds([
            ("HEIC 12 MP", [tool, "decode", made["photo.heic"]],
             ["heif-convert", made["photo.heic"], out("d.y4m")]),
            ("AVIF 12 MP", [tool, "decode", made["photo.avif"]], ["avifdec", "-j", "1", made["photo.avif"], out("d.y4m")]),
            ("JPEG XL 12 MP lossy", [tool, "decode", made["photo.jxl"]],
             ["djxl", made["photo.jxl"], out("d.ppm"), "--num_threads=1"]),
            ("JPEG XL 12 MP lossless", [tool, "decode", made["photo-lossless.jxl"]],
             ["djxl", made["photo-lossless.jxl"], out("d.ppm"), "--num_threads=1"]),
        ], args.runs, "Full decodes, whole process (references write their cheapest output to /dev/shm)")

    if args.only in (None, "thumbnail"):
        vips = [args.python, "-c",
                "import sys, pyvips; pyvips.Image.thumbnail(sys.argv[1], 256).write_to_file(sys.argv[2])"]
        rounds([
            ("AVIF 256 px (vs pyvips)", single_core([tool, "thumbnail", made["photo.avif"], "--size", "256", "-o", out("t.png")]),
             single_core(vips + [made["photo.avif"], out("v.png")])),
            ("JPEG XL 256 px from the DC (vs full decode + resize)",
             single_core([tool, "thumbnail", made["photo.jxl"], "--size", "256", "-o", out("t.png")]),
             single_core([tool, "thumbnail", made["photo.jxl"], "--size", "256", "--full-decode", "-o", out("f.png")])),
            ("HEIC 256 px", single_core([tool, "thumbnail", made["photo.heic"], "--size", "256", "-o", out("t.png")]), None),
        ], args.runs, "256 px thumbnails, one core (taskset), whole process")

    if args.only in (None, "encode"):
        encode_table(tool, made, args)

    if args.only in (None, "memory"):
        rounds([("48 MP HEIC grid, 256 px thumbnail",
                 [tool, "thumbnail", made["grid"], "--size", "256", "-o", out("g.png")], None)],
               max(3, args.runs // 3), "Peak memory of a 48-megapixel HEIC grid (8000x6000, 192 tiles of 512 px)")


def encode_table(tool, made, args):
    """512 px thumbnails in each format: time of the whole `thumbnail` command and its
    excess over JPEG's (the cheapest encoder), bytes, SSIMULACRA2, and bytes at equal quality."""
    python = os.path.join(args.venv, "bin", "python") if args.venv else sys.executable
    ssim = [python, "-c", "import sys, ssimulacra2; print(ssimulacra2.compute_ssimulacra2(sys.argv[1], sys.argv[2]))"]
    reference = os.path.join(args.work, "ref512.png")
    subprocess.run([tool, "thumbnail", made["png"], "--size", "512", "-o", reference], check=True)
    rows = [("WebP q75", "webp", 75), ("JPEG q80", "jpg", 80), ("AVIF q60 (speed 9)", "avif", 60),
            ("JPEG XL q75 (effort 4)", "jxl", 75)]
    times = {name: [] for name, _, _ in rows}
    for r in range(args.runs):
        for name, ext, quality in rows[r % len(rows):] + rows[:r % len(rows)]:
            ms, _ = run(single_core([tool, "thumbnail", reference, "--size", "512", "--quality", str(quality),
                                     "-o", os.path.join(args.work, f"enc.{ext}")]))
            times[name].append(ms)
    jpeg = statistics.median(times["JPEG q80"])
    print(f"\nEncoding a 512x384 thumbnail, one core, {args.runs} rounds: the whole `thumbnail` command"
          f" (decode the 512 px PNG, resample, encode), and its time over the JPEG one's\n")
    print("| format | command ms | over JPEG's ms | bytes | SSIMULACRA2 (higher is better) |")
    print("|---|---:|---:|---:|---:|")
    for name, ext, _ in rows:
        path = os.path.join(args.work, f"enc.{ext}")
        decoded = os.path.join(args.work, f"enc-{ext}.png")
        subprocess.run([tool, "decode", path, "-o", decoded], check=True, capture_output=True)
        score = subprocess.run(ssim + [reference, decoded], capture_output=True, text=True)
        value = f"{float(score.stdout.split()[-1]):.1f}" if score.returncode == 0 and score.stdout.strip() else "n/a"
        total = statistics.median(times[name])
        print(f"| {name} | {total:.1f} | {total - jpeg:+.1f} | {os.path.getsize(path):,} | {value} |")

    # Bytes at equal quality: the lowest quality of each encoder whose SSIMULACRA2 reaches
    # WebP q75's (bisection over 1...100).
    def score(ext, quality):
        path = os.path.join(args.work, f"eq.{ext}")
        subprocess.run([tool, "thumbnail", reference, "--size", "512", "--quality", str(quality), "-o", path],
                       check=True, capture_output=True)
        decoded = os.path.join(args.work, f"eq-{ext}.png")
        subprocess.run([tool, "decode", path, "-o", decoded], check=True, capture_output=True)
        result = subprocess.run(ssim + [reference, decoded], capture_output=True, text=True, check=True)
        return float(result.stdout.split()[-1]), os.path.getsize(path)

    target, webp_bytes = score("webp", 75)
    print(f"\nAt WebP q75's SSIMULACRA2 ({target:.1f}): the lowest quality that reaches it\n")
    print("| format | quality | bytes | x WebP's bytes |")
    print("|---|---:|---:|---:|")
    print(f"| WebP | 75 | {webp_bytes:,} | 1.00 |")
    for name, ext in [("JPEG", "jpg"), ("AVIF (speed 9)", "avif"), ("JPEG XL (effort 4)", "jxl")]:
        low, high = 1, 100
        while low < high:
            middle = (low + high) // 2
            if score(ext, middle)[0] >= target:
                high = middle
            else:
                low = middle + 1
        value, size = score(ext, low)
        print(f"| {name} | {low} | {size:,} | {size / webp_bytes:.2f} |")


if __name__ == "__main__":
    main()
