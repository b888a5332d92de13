#!/usr/bin/env python3
"""batch_compare.py: the main job, whole process, against download-then-vipsthumbnail.

    python3 Benchmarks/batch_compare.py [--runs N] [--inputs DIR] [--tool PATH]

The images of DIR/small (Benchmarks/kit/make-inputs.sh: 200 JPEGs and PNGs, 640x480 to
1600x1200) are served by a local HTTP server (Python's threaded http.server, in its
own process). Two ways to get 256 px JPEG thumbnails (quality 85) of all of them:

  imageloader   `imageloader batch LIST --size 256 --format jpg --quality 85`, LIST
                holding the 200 URLs, a new empty cache folder every run;
  curl + vips   `curl --parallel` downloads the 200 files, then two `vipsthumbnail
                --size 256` processes run at once, each given half of the files.

Method, as in the kit's compare.sh: N rounds; each round runs both once, in an order
rotated from round to round, so neighbouring runs share the machine's load; the ratio
is the median over rounds of (imageloader / curl + vips) in that round. Every run's
outputs are counted. Peak RSS comes from wait4's rusage: for curl + vips, the largest
of its processes.

Then memory against the number of images: the batch over 200, 600 and 1,000 distinct
URLs (the same files under ?copy=K), peak RSS of each. Only the standard library.
"""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run(command):
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = process.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    process.stderr.close()
    if status != 0:
        sys.exit(f"batch_compare: {command[0]} ... failed ({status}): {err.strip()[-2000:]}")
    return elapsed, usage.ru_maxrss / 1024


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(directory):
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", directory],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1).read()
            return server, port
        except OSError:
            time.sleep(0.05)
    server.kill()
    sys.exit("batch_compare: the HTTP server did not start")


def count(directory):
    return len([n for n in os.listdir(directory) if not n.startswith(".")]) if os.path.isdir(directory) else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--inputs", default=os.environ.get("BENCH_DIR", "/tmp/bench"))
    parser.add_argument("--tool", default=os.environ.get("IMAGELOADER", os.path.join(ROOT, ".build-release/release/imageloader")))
    args = parser.parse_args()
    if not os.access(args.tool, os.X_OK):
        sys.exit(f"batch_compare: {args.tool} is not an executable (see Benchmarks/README.md)")
    for tool in ("curl", "vipsthumbnail"):
        if shutil.which(tool) is None:
            sys.exit(f"batch_compare: {tool} not found (bash Benchmarks/kit/setup.sh installs it)")
    small = os.path.join(args.inputs, "small")
    names = sorted(n for n in os.listdir(small) if not n.startswith(".")) if os.path.isdir(small) else []
    if len(names) != 200:
        sys.exit(f"batch_compare: {small} should hold 200 images; run Benchmarks/kit/make-inputs.sh {args.inputs}")

    work = tempfile.mkdtemp(prefix="batch-compare-")
    server, port = start_server(small)
    try:
        base = f"http://127.0.0.1:{port}/"
        urls = [base + n for n in names]
        lists = {}
        for copies in (1, 3, 5):
            path = os.path.join(work, f"urls-{copies}.txt")
            with open(path, "w") as f:
                for k in range(copies):
                    for url in urls:
                        f.write(url + (f"?copy={k}" if copies > 1 else "") + "\n")
            lists[copies] = path

        def imageloader(round_dir, list_path=lists[1]):
            out = os.path.join(round_dir, "out")
            command = [args.tool, "batch", list_path, "--size", "256", "--format", "jpg", "--quality", "85",
                       "--out", out, "--cache-dir", os.path.join(round_dir, "cache")]
            return command, out

        half = len(names) // 2

        def curl_vips(round_dir):
            download, out = os.path.join(round_dir, "download"), os.path.join(round_dir, "out")
            os.makedirs(download)
            os.makedirs(out)
            files = [os.path.join(download, n) for n in names]
            q = lambda items: " ".join(f"'{i}'" for i in items)
            script = (
                "set -e\n"
                f"curl --parallel -sS --fail --output-dir '{download}' --remote-name-all {q(urls)}\n"
                f"vipsthumbnail --size 256 -o '{out}/%s.jpg[Q=85]' {q(files[:half])} & a=$!\n"
                f"vipsthumbnail --size 256 -o '{out}/%s.jpg[Q=85]' {q(files[half:])} & b=$!\n"
                "wait $a\nwait $b\n")
            return ["bash", "-c", script], out

        sides = [("imageloader batch", imageloader), ("curl --parallel + 2 x vipsthumbnail", curl_vips)]
        times = {label: [] for label, _ in sides}
        rss = {label: [] for label, _ in sides}
        for r in range(args.runs + 1):  # round 0 warms the page cache and the server
            order = sides[r % 2:] + sides[:r % 2]
            for label, make in order:
                round_dir = tempfile.mkdtemp(dir=work)
                command, out = make(round_dir)
                seconds, peak = run(command)
                made = count(out)
                if made != len(names):
                    sys.exit(f"batch_compare: {label} made {made} thumbnails, not {len(names)}")
                shutil.rmtree(round_dir)
                if r > 0:
                    times[label].append(seconds)
                    rss[label].append(peak)

        load = os.getloadavg()[0]
        print(f"Batch of {len(names)} images over HTTP to 256 px JPEG, whole process, {args.runs} interleaved rounds, "
              f"{os.cpu_count()} CPUs, load {load:.2f}\n")
        print("| command | median s | x curl + vips | images/s | peak RSS MiB | IQR |")
        print("|---|---:|---:|---:|---:|---:|")
        reference = times[sides[1][0]]
        for label, _ in sides:
            ratio = statistics.median(t / f for t, f in zip(times[label], reference))
            median = statistics.median(times[label])
            q = statistics.quantiles(times[label], n=4)
            print(f"| {label} | {median:.2f} | {ratio:.2f}x | {len(names) / median:.0f} | "
                  f"{statistics.median(rss[label]):.1f} | {(q[2] - q[0]) / median:.0%} |")

        print("\nPeak RSS of `imageloader batch` against the number of images (distinct URLs, cold cache):\n")
        print("| images | seconds | peak RSS MiB |")
        print("|---:|---:|---:|")
        for copies, path in lists.items():
            round_dir = tempfile.mkdtemp(dir=work)
            command, out = imageloader(round_dir, path)
            seconds, peak = run(command)
            made = count(out)
            if made != copies * len(names):
                sys.exit(f"batch_compare: {made} thumbnails for {copies * len(names)} URLs")
            shutil.rmtree(round_dir)
            print(f"| {copies * len(names)} | {seconds:.2f} | {peak:.1f} |")
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
