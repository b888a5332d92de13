#!/usr/bin/env python3
"""object_storage_compare.py: the same images as s3:// sources and as http:// sources,
through one `imageloader serve`, side by side: what reading from a bucket costs.

    python3 Benchmarks/object_storage_compare.py [--duration 15] [--rounds 4] [--connections 2,16]
                                                 [--binary PATH] [--work DIR]

Method: nginx serves the inputs of serve_compare.py (100 JPEG q90 photos of 2000x1500,
and 320x240 copies) at /photos/K/SIZE/pNNN.jpg, for any K, so every request names a
distinct source and nothing is cached anywhere (disk cache and result cache off). The
service reads the same files two ways: as http://127.0.0.1:PORT/photos/K/... and as
s3://photos/K/... with --s3-endpoint pointing at the same nginx (path style), so each
S3 read is a request signed with Signature Version 4 (SHA-256 of the canonical
request, four HMACs) that nginx answers without checking: the difference between the
two rows is the object storage path itself, signing included, not a storage server's
speed. Requests: fit into 512x512 as JPEG q80 (the service's own size), and fit 320x240
sources into 64x64 (where fetching is most of the work). wrk with 2 and 16
connections; rounds interleave the two kinds, each first in half of the rounds (the
first of a pair runs measurably faster on a busy two-core machine: use an even number
of rounds); the table gives medians over rounds and the ratio s3/http of each round's
rates, medianed.

Installs nginx, wrk and ImageMagick with apt-get when missing. Needs the release binary
(scripts/build-release.sh).
"""
import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import serve_compare as sc  # noqa: E402


def make_small(inputs, count):
    small = os.path.join(inputs, "small")
    os.makedirs(small, exist_ok=True)
    for i in range(count):
        out = os.path.join(small, f"p{i:03d}.jpg")
        if not os.path.exists(out):
            sc.sh(["convert-im6.q16", os.path.join(inputs, "jpeg", f"p{i:03d}.jpg"), "-resize", "320x240",
                   "-quality", "90", out])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--connections", default="2,16")
    parser.add_argument("--photos", type=int, default=100)
    parser.add_argument("--sizes", default="512,64", help="which rows: 512 (2000x1500 to 512), 64 (320x240 to 64)")
    parser.add_argument("--binary", default=os.path.join(sc.ROOT, ".build-release/release/imageloader"))
    parser.add_argument("--work", default=os.path.join(sc.ROOT, ".build", "serve-bench"))
    args = parser.parse_args()
    if not os.path.exists(args.binary):
        sys.exit(f"object_storage_compare: {args.binary} missing: run scripts/build-release.sh")
    for tool, package in (("nginx", "nginx"), ("wrk", "wrk"), ("convert", "imagemagick")):
        if not sc.shutil.which(tool) and not os.path.exists("/usr/sbin/" + tool):
            sc.sh(["apt-get", "install", "-y", "-q", package])
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    inputs = os.path.join(work, "inputs")
    sc.make_inputs(inputs, args.photos)
    make_small(inputs, args.photos)
    connections = [int(c) for c in args.connections.split(",")]
    sizes = [s for s in ("512", "64") if s in args.sizes.split(",")]
    origin_port = sc.free_port()
    origin = sc.start_nginx(work, origin_port,
                            f"location ~ ^/photos/\\d+/(jpeg|small)/(p\\d+\\.jpg)$ {{ alias {inputs}/$1/$2; }}")
    sc.wait_for(f"http://127.0.0.1:{origin_port}/photos/0/jpeg/p000.jpg")
    port = sc.free_port()
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "AKIDBENCHMARK", "AWS_SECRET_ACCESS_KEY": "benchmark-secret",
           "AWS_EC2_METADATA_DISABLED": "true"}
    server = sc.Server("imageloader-s3", [args.binary, "serve", "--host", "127.0.0.1", "--port", str(port), "--allow-unsigned",
                                          "--allow-private-networks", "--disk-cache-mb", "0", "--result-cache-mb", "0",
                                          "--queue", "4096", "--log-level", "warning", "--use-s3", "--s3-endpoint",
                                          f"http://127.0.0.1:{origin_port}", "--s3-region", "us-east-1"], port, env=env)
    src = f"http://127.0.0.1:{origin_port}"
    patterns = {
        ("512", "http"): f"/insecure/rs:fit:512:512/q:80/plain/{src}/photos/{{K}}/jpeg/p{{I}}.jpg@jpg",
        ("512", "s3"): "/insecure/rs:fit:512:512/q:80/plain/s3://photos/{K}/jpeg/p{I}.jpg@jpg",
        ("64", "http"): f"/insecure/rs:fit:64:64/q:80/plain/{src}/photos/{{K}}/small/p{{I}}.jpg@jpg",
        ("64", "s3"): "/insecure/rs:fit:64:64/q:80/plain/s3://photos/{K}/small/p{I}.jpg@jpg",
    }
    results = {}
    try:
        # Warm both paths (credentials read, connections made) before measuring.
        for (size, _), pattern in patterns.items():
            if size not in sizes:
                continue
            sc.wrk(f"http://127.0.0.1:{port}", pattern, args.photos, 2, 2, work, "warm")
        for round_index in range(args.rounds):
            kinds = ["http", "s3"] if round_index % 2 == 0 else ["s3", "http"]
            for size in sizes:
                for c in connections:
                    for kind in kinds:
                        r = sc.wrk(f"http://127.0.0.1:{port}", patterns[(size, kind)], args.photos, c, args.duration,
                                   work, f"os-{size}-{kind}-{c}")
                        if r["non2xx"] or r["socket"]:
                            print(f"warning: {size} {kind} c={c}: {r['non2xx']} non-2xx, socket errors {r['socket']}")
                        results.setdefault((size, c, kind), []).append(r)
                        print(f"round {round_index + 1} {size:>3} c={c:<2} {kind:<4} {r['rate']:8.1f}/s "
                              f"p50 {r['p50']:.1f} ms p99 {r['p99']:.1f} ms", flush=True)
    finally:
        server.stop()
        sc.stop_nginx(origin)
    print()
    print("| request | connections | http:// req/s | s3:// req/s | s3/http (median of rounds) | p50 http / s3 (ms) |")
    print("|---|---|---|---|---|---|")
    for size in sizes:
        for c in connections:
            http, s3 = results[(size, c, "http")], results[(size, c, "s3")]
            ratio = statistics.median(b["rate"] / a["rate"] for a, b in zip(http, s3))
            name = "2000x1500 JPEG, fit 512" if size == "512" else "320x240 JPEG, fit 64"
            print(f"| {name} | {c} | {statistics.median(r['rate'] for r in http):.1f} | "
                  f"{statistics.median(r['rate'] for r in s3):.1f} | {ratio:.3f} | "
                  f"{statistics.median(r['p50'] for r in http):.1f} / {statistics.median(r['p50'] for r in s3):.1f} |")


if __name__ == "__main__":
    main()
