#!/usr/bin/env python3
"""cpu_per_request.py: the server's CPU time per processed request, two binaries side by side.

    python3 Benchmarks/cpu_per_request.py --binary NEW --baseline OLD [--rounds 4] [--requests 300]
                                          [--photos 40] [--work DIR]

Throughput on a shared 2-core machine moves 10-30% between rounds of the same binary;
the CPU time the server process itself spends (user + system, from /proc) moves far
less, so a change of a few percent in the cost of a request shows here first. Each
server (`imageloader serve`, one worker, no result cache, unsigned URLs) reads the
photos serve_compare.py makes (2000x1500, JPEG q90 and PNG) as local:/// sources, is
warmed with every photo once, then answers REQUESTS sequential requests fitting each
photo into 512x512 in its own format; rounds alternate the order of the binaries. The
clock tick is 10 ms, so keep REQUESTS x the cost of a request well above a second.
"""
import argparse
import os
import socket
import statistics
import subprocess
import time
import urllib.request

import serve_compare as sc


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_per_request(binary, root, kind, photos, requests):
    port = free_port()
    server = subprocess.Popen(
        [binary, "serve", "--host", "127.0.0.1", "--port", str(port), "--local-root", root, "--allow-unsigned", "--result-cache-mb", "0",
         "--workers", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ext = "png" if kind == "png" else "jpg"

    def get(i):
        url = f"http://127.0.0.1:{port}/insecure/rs:fit:512:512/plain/local:///{kind}/p{i % photos:03d}.{ext}@{ext}"
        with urllib.request.urlopen(url) as response:
            response.read()

    try:
        for _ in range(200):
            try:
                get(0)
                break
            except OSError:
                time.sleep(0.05)
        for i in range(photos):
            get(i)
        start = cpu_seconds(server.pid)
        for i in range(requests):
            get(i)
        return (cpu_seconds(server.pid) - start) / requests * 1000
    finally:
        server.terminate()
        server.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--baseline", required=True)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--photos", type=int, default=40)
    parser.add_argument("--work", default="/tmp/imageloader-cpu-per-request")
    args = parser.parse_args()
    if subprocess.run(["which", "convert-im6.q16"], capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "install", "-y", "-q", "imagemagick"], check=True, stdout=subprocess.DEVNULL)
    inputs = os.path.join(os.path.abspath(args.work), "inputs")
    sc.make_inputs(inputs, args.photos)
    binaries = [("new", args.binary), ("baseline", args.baseline)]
    results = {}
    for round_index in range(args.rounds):
        for label, binary in binaries if round_index % 2 == 0 else reversed(binaries):
            for kind in ("jpeg", "png"):
                ms = cpu_per_request(binary, inputs, kind, args.photos, args.requests)
                results.setdefault((label, kind), []).append(ms)
                print(f"round {round_index + 1} {label:8s} {kind:4s} {ms:6.2f} ms of CPU a request", flush=True)
    print(f"\n## CPU time a request, medians over {args.rounds} rounds of {args.requests} requests\n")
    print("| request | new ms | baseline ms | new / baseline (median of the rounds' ratios) |")
    print("|---|---:|---:|---:|")
    for kind in ("jpeg", "png"):
        new, old = results[("new", kind)], results[("baseline", kind)]
        ratio = statistics.median(a / b for a, b in zip(new, old))
        print(f"| {kind} | {statistics.median(new):.2f} | {statistics.median(old):.2f} | {ratio:.3f} |")


if __name__ == "__main__":
    main()
