#!/usr/bin/env python3
"""options_compare.py: what the processing options cost, and that today's requests did not slow down.

    python3 Benchmarks/options_compare.py [--duration 15] [--rounds 3] [--photos 40]
                                          [--binary PATH] [--baseline PATH] [--work DIR]
                                          [--only jpeg,png,webp,cached,...]

Two `imageloader serve` binaries side by side on loopback (unsigned URLs, no result
cache, no disk cache, workers = cores), the sources served by nginx as in
serve_compare.py (2000x1500 JPEG q90 and PNG photos made by ImageMagick, a new URL for
every request so nothing is cached), wrk with as many connections as cores:

  today's requests   fit into 512x512 as JPEG q80, PNG and WebP q75, on --baseline
                     (the binary before the options) and on --binary: the rates must
                     not move beyond the noise between rounds;
  smart crop         rs:fill:512:512 with g:ce (one pass: only the kept window is
                     resampled) against g:sm (the whole source scaled, then the
                     attention window), on --binary: the ratio of their rates;
  effects            rs:fill:512:512/sh:0.5/bg:ffffff (fill, sharpen, background);
  animation          an animated GIF (24 frames of 480x360, ImageMagick) to an
                     animated WebP fitting 256x256, with --max-animation-frames 100;
  cached             40 fixed URLs answered from the result cache (--result-cache-mb
                     256, warmed first), 16 connections, on both binaries.

Each row is a fresh server; rounds alternate the order of the binaries; the table
gives medians over rounds of requests/s and wrk's p50 and p99, and the largest peak
RSS (VmHWM) seen for the row. Needs nginx, wrk and ImageMagick (installed with apt-get
when missing) and release binaries (scripts/build-release.sh); --baseline may be left
out, and then only --binary runs.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import serve_compare as sc

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--photos", type=int, default=40)
    parser.add_argument("--binary", default=os.path.join(ROOT, ".build-release/release/imageloader"))
    parser.add_argument("--baseline", default=None)
    parser.add_argument("--work", default=os.path.join(ROOT, ".build", "serve-bench"))
    parser.add_argument("--only", default=None, help="comma-separated row names to run (default: all)")
    args = parser.parse_args()
    for binary in [args.binary] + ([args.baseline] if args.baseline else []):
        if not os.path.exists(binary):
            sys.exit(f"options_compare: {binary} missing: run scripts/build-release.sh")
    missing = [p for p, t in [("nginx", "nginx"), ("wrk", "wrk"), ("imagemagick", "convert-im6.q16")]
               if subprocess.run(["which", t], capture_output=True).returncode != 0
               and not os.path.exists("/usr/sbin/" + t)]
    if missing:
        subprocess.run(["apt-get", "install", "-y", "-q", *missing], check=True, stdout=subprocess.DEVNULL)
    os.makedirs(args.work, exist_ok=True)
    work = os.path.abspath(args.work)
    inputs = os.path.join(work, "inputs")
    sc.make_inputs(inputs, args.photos)
    animation = sc.make_animation(inputs)

    origin_port = sc.free_port()
    origin = sc.start_nginx(
        work, origin_port,
        f"location ~ ^/(jpeg|png)/\\d+/(p\\d+\\.(jpg|png))$ {{ alias {inputs}/$1/$2; }}\n"
        f"location ~ ^/anim/\\d+/a\\.gif$ {{ alias {animation}; }}")
    sc.wait_for(f"http://127.0.0.1:{origin_port}/jpeg/0/p000.jpg")
    src = f"http://127.0.0.1:{origin_port}"
    rows = [
        ("jpeg", "today", f"/insecure/rs:fit:512:512/q:80/plain/{src}/jpeg/{{K}}/p{{I}}.jpg@jpg", ()),
        ("png", "today", f"/insecure/rs:fit:512:512/plain/{src}/png/{{K}}/p{{I}}.png@png", ()),
        ("webp", "today", f"/insecure/rs:fit:512:512/q:75/plain/{src}/jpeg/{{K}}/p{{I}}.jpg@webp", ()),
        ("fill g:ce", "new", f"/insecure/rs:fill:512:512/g:ce/q:80/plain/{src}/jpeg/{{K}}/p{{I}}.jpg@jpg", ()),
        ("fill g:sm", "new", f"/insecure/rs:fill:512:512/g:sm/q:80/plain/{src}/jpeg/{{K}}/p{{I}}.jpg@jpg", ()),
        ("effects", "new",
         f"/insecure/rs:fill:512:512/sh:0.5/bg:ffffff/q:80/plain/{src}/png/{{K}}/p{{I}}.png@jpg", ()),
        ("gif>webp", "new", f"/insecure/rs:fit:256:256/q:75/plain/{src}/anim/{{K}}/a.gif@webp",
         ("--max-animation-frames", "100")),
        ("cached", "today", f"/insecure/rs:fit:512:512/q:80/plain/{src}/jpeg/0/p{{I}}.jpg@jpg",
         ("--result-cache-mb", "256")),
    ]
    if args.only:
        rows = [row for row in rows if row[0] in args.only.split(",")]
    binaries = [("new", args.binary)] + ([("baseline", args.baseline)] if args.baseline else [])
    results, peaks = {}, {}
    connections = sc.CORES
    try:
        for round_index in range(args.rounds):
            order = binaries if round_index % 2 == 0 else list(reversed(binaries))
            for label, binary in order:
                for name, which, pattern, extra in rows:
                    if which == "new" and label != "new":
                        continue
                    port = sc.free_port()
                    cache = () if "--result-cache-mb" in extra else ("--result-cache-mb", "0")
                    server = sc.imageloader(binary, port, *cache, "--queue", "4096", *extra)
                    try:
                        count = 1 if "anim" in pattern else args.photos
                        clients = connections
                        if name == "cached":
                            clients = 16
                            for i in range(count):
                                url = f"http://127.0.0.1:{port}" + pattern.replace("{I}", f"{i:03d}")
                                with sc.urllib.request.urlopen(url) as response:
                                    response.read()
                        r = sc.wrk(f"http://127.0.0.1:{port}", pattern, count, clients, args.duration, work,
                                   f"options-{label}-{name.replace(' ', '-').replace(':', '').replace('>', '-')}")
                        time.sleep(min(10.0, r["max"] / 1000 + 0.3))
                        peak = sc.peak_rss_mib(server.pids())
                    finally:
                        server.stop()
                    results.setdefault((label, name), []).append(r)
                    peaks[(label, name)] = max(peaks.get((label, name), 0), peak)
                    print(f"round {round_index + 1} {label:8s} {name:10s} {r['rate']:7.1f}/s p50 {r['p50']:7.1f} ms "
                          f"p99 {r['p99']:7.1f} ms non-2xx {r['non2xx']} RSS {peak:.0f} MiB", flush=True)
    finally:
        sc.stop_nginx(origin)

    med = lambda rs, k: statistics.median(r[k] for r in rs)
    print(f"\n## Medians over {args.rounds} rounds, {connections} connections, {args.duration} s each\n")
    print("| request | binary | req/s | p50 / p99 ms | peak RSS MiB |")
    print("|---|---|---:|---:|---:|")
    for name, _, _, _ in rows:
        for label, _ in binaries:
            rs = results.get((label, name))
            if rs:
                print(f"| {name} | {label} | {med(rs, 'rate'):.1f} | {med(rs, 'p50'):.0f} / {med(rs, 'p99'):.0f} | "
                      f"{peaks[(label, name)]:.0f} |")
    if args.baseline:
        print("\nnew / baseline, median of the per-round ratios:")
        for name in ("jpeg", "png", "webp", "cached"):
            if ("new", name) not in results or ("baseline", name) not in results:
                continue
            pairs = zip(results[("new", name)], results[("baseline", name)])
            print(f"  {name}: {statistics.median(n['rate'] / b['rate'] for n, b in pairs):.3f}")
    if ("new", "fill g:ce") in results and ("new", "fill g:sm") in results:
        centre, smart = results[("new", "fill g:ce")], results[("new", "fill g:sm")]
        ratio = statistics.median(c["rate"] / s["rate"] for c, s in zip(centre, smart))
        print(f"\nsmart crop time / centre crop time (rate ratio), median over rounds: {ratio:.3f}")


if __name__ == "__main__":
    main()
