#!/usr/bin/env python3
"""memory_after_burst.py: resident memory of `imageloader serve` idle, at the peak of a
burst, and after the burst once idle, for two configurations side by side.

    python3 Benchmarks/memory_after_burst.py [--binary PATH] [--baseline PATH] [--rounds 3]
                                             [--idle 15] [--requests 240] [--clients 16]

Each round starts each server in turn (interleaved; the other is not running), sends one
request (the idle figure is read after it), then a burst of `--requests` requests from
`--clients` threads, every one a thumbnail of another size of one of 24 JPEGs of
2000x1500 and 3000x2000 (made by the imageloader binary itself from noise, in
DIR/inputs), then waits `--idle` seconds and reads the resident memory again (VmRSS),
and the peak (VmHWM). Without `--baseline`, the second configuration is the same binary
with `--free-memory-interval 0` (memory never returned: the behaviour before it). The
table gives medians over rounds, in MiB."""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def memory(pid, field):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    return 0.0


def make_inputs(binary, folder):
    os.makedirs(folder, exist_ok=True)
    if len([f for f in os.listdir(folder) if f.endswith(".jpg")]) >= 24:
        return
    # A noise PNG from /dev/urandom, turned into JPEGs of two sizes by the binary.
    import struct
    import zlib

    for index in range(24):
        width, height = (2000, 1500) if index % 2 == 0 else (3000, 2000)
        raw = b"".join(b"\x00" + os.urandom(width * 3) for _ in range(height))
        chunk = lambda kind, data: struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
               + chunk(b"IDAT", zlib.compress(raw, 1)) + chunk(b"IEND", b""))
        source = os.path.join(folder, f"n{index}.png")
        with open(source, "wb") as file:
            file.write(png)
        subprocess.run([binary, "thumbnail", source, "--size", str(max(width, height)), "-o",
                        os.path.join(folder, f"p{index}.jpg")], check=True, capture_output=True)
        os.remove(source)


def run(binary, extra, inputs, requests, clients, idle):
    port = free_port()
    process = subprocess.Popen(
        [binary, "serve", "--host", "127.0.0.1", "--port", str(port), "--allow-unsigned", "--local-root", inputs,
         "--result-cache-mb", "0", "--disk-cache-mb", "0", "--log-level", "warning"] + extra,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                urllib.request.urlopen(base + "/health", timeout=1).read()
                break
            except OSError:
                time.sleep(0.05)
        urllib.request.urlopen(base + "/insecure/rs:fit:300:300/plain/local:///p0.jpg@jpg", timeout=60).read()
        at_rest = memory(process.pid, "VmRSS:")
        counter = iter(range(requests))
        lock = threading.Lock()

        def client():
            while True:
                with lock:
                    index = next(counter, None)
                if index is None:
                    return
                width = 200 + (index * 37) % 1400
                url = f"{base}/insecure/rs:fit:{width}:{width}/plain/local:///p{index % 24}.jpg@jpg"
                urllib.request.urlopen(url, timeout=120).read()

        threads = [threading.Thread(target=client) for _ in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        after_burst = memory(process.pid, "VmRSS:")
        time.sleep(idle)
        return at_rest, memory(process.pid, "VmHWM:"), after_burst, memory(process.pid, "VmRSS:")
    finally:
        process.terminate()
        process.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=os.path.join(ROOT, ".build-release/release/imageloader"))
    parser.add_argument("--baseline", help="an earlier binary; default: --binary with --free-memory-interval 0")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle", type=float, default=15)
    parser.add_argument("--requests", type=int, default=240)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--work", default=os.path.join(ROOT, ".build", "memory-bench"))
    args = parser.parse_args()
    inputs = os.path.join(args.work, "inputs")
    make_inputs(args.binary, inputs)
    configurations = [("this binary", args.binary, [])]
    if args.baseline:
        configurations.append(("baseline", args.baseline, []))
    else:
        configurations.append(("--free-memory-interval 0", args.binary, ["--free-memory-interval", "0"]))
    results = {name: [] for name, _, _ in configurations}
    for round_index in range(args.rounds):
        order = configurations if round_index % 2 == 0 else list(reversed(configurations))
        for name, binary, extra in order:
            figures = run(binary, extra, inputs, args.requests, args.clients, args.idle)
            results[name].append(figures)
            print(f"round {round_index + 1} {name}: at rest {figures[0]:.1f}, peak {figures[1]:.1f}, "
                  f"after the burst {figures[2]:.1f}, after {args.idle:.0f} s idle {figures[3]:.1f} MiB",
                  file=sys.stderr, flush=True)
    print(f"| configuration | at rest | peak | after the burst | after {args.idle:.0f} s idle |")
    print("|---|---:|---:|---:|---:|")
    for name, _, _ in configurations:
        medians = [statistics.median(r[i] for r in results[name]) for i in range(4)]
        print(f"| {name} | " + " | ".join(f"{m:.1f} MiB" for m in medians) + " |")


if __name__ == "__main__":
    main()
