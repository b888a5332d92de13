#!/usr/bin/env python3
"""serve_compare.py: `imageloader serve` against thumbor 7.8, as HTTP services, on loopback.

    python3 Benchmarks/serve_compare.py [--duration 60] [--rounds 1] [--connections 2,16]
                                        [--binary PATH] [--work DIR]
                                        [--baseline PATH] [--formats jpeg,png] [--no-thumbor]

`--baseline PATH` runs a second imageloader binary (an earlier build) in the same
rounds, interleaved, and adds its rates and the ratio new/baseline to the table: the
check that a change did not move the processing rates. `--formats` limits the outputs,
`--no-thumbor` leaves thumbor out (and the cached and overload parts with it).

Method, after imgproxy's image-servers-benchmark:
  inputs    100 JPEG (q90) and 100 PNG (RGB) photo-like images of 2000x1500, made with
            ImageMagick as Benchmarks/kit/make-inputs.sh makes its photos (plasma, blur,
            noise), kept in DIR/inputs;
  origin    nginx serves them as static files; /jpeg/K/pNNN.jpg is pNNN.jpg for any K,
            so every request names a distinct source URL and nothing is cached anywhere;
  requests  fit into 512x512: JPEG sources to JPEG q80, PNG sources to PNG; also JPEG
            sources to WebP q75 and to AVIF q60, and HEIC and AVIF sources (the first 20
            JPEGs coded by heif-enc -q 80 and avifenc -s 6, in DIR/inputs/heic and /avif)
            to JPEG q80, JPEG sources to HEIC q50 (x265), SVG sources (20 drawings of a few
            hundred shapes and gradients, DIR/inputs/svg) rasterised to PNG and passed
            through sanitised as SVG, a typical effects URL (PNG sources filled to 512x512, sharpened,
            flattened on white, as JPEG) and an animated GIF (24 frames of 480x360) to an
            animated WebP fitting 256x256 (imageloader only: thumbor 7.8's PIL engine is its
            peer for JPEG and PNG); wrk with 2 and 16 connections, a Lua script writing a
            new URL for every request;
  servers   imageloader serve (unsigned URLs, no result cache, no disk cache, workers =
            cores) and thumbor 7.8.0 from PyPI in its own virtual environment (PIL
            engine, no storage, no result storage): one single-process instance per
            core behind nginx (least_conn, keep-alive), as thumbor's docs deploy it.
Each round runs every (format, connections) pair on both servers, in an order rotated
from round to round; the tables give medians over rounds of requests/s and wrk's p50 and
p99 latency. Peak RSS is each server's VmHWM (for thumbor, the sum over its instances;
the nginx in front of them is not counted).

Then two more:
  cached    100 fixed URLs answered from the service's result cache, against nginx
            serving the same thumbnail bytes as static files (16 connections);
  overload  4x the sustainable JPEG rate (64 connections pausing between requests)
            against --workers = --fetches-ahead = cores, --queue 4 per core: how many
            503s, the longest wait (against the 10 s timeout), peak RSS.

Installs nginx, wrk and ImageMagick with apt-get when missing, and thumbor with pip
into .build/serve-bench/venv. Needs the release binary (scripts/build-release.sh).
"""
import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CORES = os.cpu_count() or 2
MODERN_SOURCES = 20
# Outputs from JPEG sources (and PNG from PNG), then HEIC and AVIF sources to JPEG, then a
# typical effects URL (fill, sharpen, background) and an animated GIF to animated WebP.
FORMATS = ("jpeg", "png", "webp", "avif", "heic", "heic>jpeg", "avif>jpeg", "svg>png", "svg", "effects", "gif>webp")


def sh(command, **kwargs):
    return subprocess.run(command, check=True, **kwargs)


def ensure_tools(venv):
    missing = [p for p, t in [("nginx", "nginx"), ("wrk", "wrk"), ("imagemagick", "convert-im6.q16")]
               if shutil.which(t) is None and not os.path.exists("/usr/sbin/" + t)]
    if missing:
        sh(["apt-get", "update", "-q"], stdout=subprocess.DEVNULL)
        sh(["apt-get", "install", "-y", "-q", *missing], stdout=subprocess.DEVNULL,
           env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    thumbor = os.path.join(venv, "bin", "thumbor")
    if not os.path.exists(thumbor):
        sh([sys.executable, "-m", "venv", venv])
        sh([os.path.join(venv, "bin", "pip"), "install", "-q", "thumbor==7.8.0"])
    return thumbor


def make_inputs(directory, count):
    """count JPEGs and count PNGs, 2000x1500, deterministic; existing ones are kept."""
    os.makedirs(os.path.join(directory, "jpeg"), exist_ok=True)
    os.makedirs(os.path.join(directory, "png"), exist_ok=True)
    jobs = []
    for i in range(count):
        for kind in ("jpeg", "png"):
            out = os.path.join(directory, kind, f"p{i:03d}.{'jpg' if kind == 'jpeg' else 'png'}")
            if os.path.exists(out):
                continue
            base = ["convert-im6.q16", "-seed", str(5000 + i), "-size", "2000x1500", "plasma:fractal",
                    "-blur", "0x1", "-attenuate", "0.3", "+noise", "Gaussian"]
            tmp = os.path.join(os.path.dirname(out), ".part-" + os.path.basename(out))
            if kind == "jpeg":
                command = base + ["-sampling-factor", "2x2", "-quality", "90", tmp]
            else:
                command = base + ["-depth", "8", "-define", "png:exclude-chunks=date,time", "PNG24:" + tmp]
            jobs.append((command, tmp, out))
    running = []
    env = {**os.environ, "MAGICK_THREAD_LIMIT": "1"}
    while jobs or running:
        while jobs and len(running) < CORES:
            command, tmp, out = jobs.pop()
            running.append((subprocess.Popen(command, env=env), tmp, out))
        process, tmp, out = running.pop(0)
        if process.wait() != 0:
            sys.exit(f"serve_compare: ImageMagick failed for {out}")
        os.rename(tmp, out)
    # HEIC and AVIF sources, from the first JPEGs (x265 and libaom are slow to start: a few).
    for kind, ext, command in [("heic", "heic", ["heif-enc", "-q", "80", "-o", "{out}", "{src}"]),
                               ("avif", "avif", ["avifenc", "-s", "6", "-j", "2", "{src}", "{out}"])]:
        os.makedirs(os.path.join(directory, kind), exist_ok=True)
        for i in range(min(count, MODERN_SOURCES)):
            out = os.path.join(directory, kind, f"p{i:03d}.{ext}")
            if os.path.exists(out):
                continue
            src = os.path.join(directory, "jpeg", f"p{i:03d}.jpg")
            tmp = os.path.join(directory, kind, f".part-p{i:03d}.{ext}")
            subprocess.run([c.replace("{out}", tmp).replace("{src}", src) for c in command], check=True,
                           capture_output=True)
            os.rename(tmp, out)


def make_svgs(directory, count):
    """count SVG drawings: a few hundred circles, paths and gradient-filled rectangles each."""
    os.makedirs(os.path.join(directory, "svg"), exist_ok=True)
    for i in range(count):
        out = os.path.join(directory, "svg", f"p{i:03d}.svg")
        if os.path.exists(out):
            continue
        shapes = []
        for k in range(300):
            x, y, r = (37 * k + 11 * i) % 1600, (53 * k + 7 * i) % 1200, 10 + (k * 13 + i) % 60
            colour = f"#{(k * 40503 + i * 977) % 0xFFFFFF:06x}"
            if k % 3 == 0:
                shapes.append(f'<circle cx="{x}" cy="{y}" r="{r}" fill="{colour}" fill-opacity="0.7"/>')
            elif k % 3 == 1:
                shapes.append(f'<rect x="{x}" y="{y}" width="{2 * r}" height="{r}" fill="url(#g{k % 4})"/>')
            else:
                shapes.append(f'<path d="M{x},{y} q{r},{-r} {2 * r},0 t{2 * r},0" stroke="{colour}" '
                              f'stroke-width="4" fill="none"/>')
        gradients = "".join(
            f'<linearGradient id="g{g}" x2="1" y2="1"><stop offset="0" stop-color="#{(g * 3355443) % 0xFFFFFF:06x}"/>'
            f'<stop offset="1" stop-color="#{(g * 1118481 + 4473924) % 0xFFFFFF:06x}"/></linearGradient>' for g in range(4))
        with open(out, "w") as handle:
            handle.write(f'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="1600" height="1200" '
                         f'viewBox="0 0 1600 1200"><defs>{gradients}</defs>{"".join(shapes)}</svg>\n')


def make_animation(directory):
    """24 frames of 480x360 plasma, 80 ms each, looping: an animated GIF."""
    out = os.path.join(directory, "anim", "a.gif")
    if os.path.exists(out):
        return out
    os.makedirs(os.path.dirname(out), exist_ok=True)
    frames = []
    for i in range(24):
        frame = os.path.join(directory, "anim", f"f{i:02d}.png")
        subprocess.run(["convert-im6.q16", "-seed", str(900 + i), "-size", "480x360", "plasma:fractal",
                        "-blur", "0x2", frame], check=True)
        frames.append(frame)
    tmp = out + ".part.gif"
    subprocess.run(["convert-im6.q16", "-delay", "8", "-loop", "0", *frames, "-layers", "optimize", tmp], check=True)
    os.rename(tmp, out)
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except Exception:
            time.sleep(0.1)
    sys.exit(f"serve_compare: no answer from {url}")


def start_nginx(work, port, locations, upstreams=""):
    conf = os.path.join(work, f"nginx-{port}.conf")
    os.makedirs(os.path.join(work, "tmp"), exist_ok=True)
    user = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
    with open(conf, "w") as f:
        f.write(f"""user {user};
worker_processes {CORES};
pid {work}/nginx-{port}.pid;
error_log {work}/nginx-{port}-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    client_body_temp_path {work}/tmp/body; proxy_temp_path {work}/tmp/proxy;
    fastcgi_temp_path {work}/tmp/fastcgi; uwsgi_temp_path {work}/tmp/uwsgi; scgi_temp_path {work}/tmp/scgi;
    types {{ image/jpeg jpg; image/png png; image/webp webp; }}
    {upstreams}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        {locations}
    }}
}}
""")
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    sh([nginx, "-c", conf, "-p", work], stderr=subprocess.DEVNULL)
    return os.path.join(work, f"nginx-{port}.pid")


def stop_nginx(pidfile):
    try:
        with open(pidfile) as f:
            os.kill(int(f.read().strip()), signal.SIGQUIT)
    except (OSError, ValueError):
        pass


def peak_rss_mib(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def descendants(pid):
    found = [pid]
    try:
        children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    except OSError:
        children = []
    for child in children:
        found += descendants(int(child))
    return found


LUA = """
counter = 0
setup = function(thread)
    thread_count = (thread_count or 0) + 1
    thread:set("wrk_id", thread_count)
end
request = function()
    counter = counter + 1
    local photo = string.format("%03d", counter % COUNT)
    local path = string.gsub(PATTERN, "{K}", tostring(counter * 64 + (wrk_id or 0)))
    path = string.gsub(path, "{I}", photo)
    return wrk.format("GET", path, {["Accept"] = "*/*"})
end
"""


def wrk(url_base, pattern, count, connections, duration, work, name, delay_ms=None):
    """wrk on a path pattern: {I} becomes a photo's number, {K} a number new for every
    request. With delay_ms, each connection waits that long before each request, which
    caps the offered rate at connections x 1000 / delay_ms per second."""
    script = os.path.join(work, f"{name}.lua")
    with open(script, "w") as f:
        f.write(LUA.replace("PATTERN", '"' + pattern + '"').replace("COUNT", str(count)))
        if delay_ms is not None:
            f.write(f"delay = function() return {delay_ms:.1f} end\n")
    threads = min(connections, CORES)
    out = subprocess.run(["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration}s", "--timeout", "30s",
                          "--latency", "-s", script, url_base], capture_output=True, text=True).stdout
    return parse_wrk(out)


def parse_wrk(out):
    def ms(text):
        value, unit = float(re.match(r"([\d.]+)", text).group(1)), re.sub(r"[\d.]", "", text)
        return value * {"us": 0.001, "ms": 1, "s": 1000, "m": 60000}[unit]
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = ms(re.search(r"\s50%\s+(\S+)", out).group(1))
    p99 = ms(re.search(r"\s99%\s+(\S+)", out).group(1))
    longest = ms(re.search(r"Latency\s+\S+\s+\S+\s+(\S+)", out).group(1))
    total = int(re.search(r"(\d+) requests in", out).group(1))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    return {"rate": rate, "p50": p50, "p99": p99, "max": longest, "total": total,
            "non2xx": int(bad.group(1)) if bad else 0, "socket": errors.group(1) if errors else ""}


class Server:
    def __init__(self, name, command, port, env=None, cwd=None):
        self.name, self.port = name, port
        self.log = open(os.path.join(tempfile.gettempdir(), f"serve-compare-{name}.log"), "w")
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                        start_new_session=True)
        wait_for(f"http://127.0.0.1:{port}/healthcheck" if name.startswith("thumbor")
                 else f"http://127.0.0.1:{port}/health")

    def pids(self):
        return descendants(self.process.pid)

    def stop(self):
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except OSError:
            pass
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.log.close()


def imageloader(binary, port, *extra):
    return Server("imageloader", [binary, "serve", "--host", "127.0.0.1", "--port", str(port), "--allow-unsigned",
                                  "--allow-private-networks", "--disk-cache-mb", "0", "--log-level", "warning",
                                  *extra], port)


def thumbor(executable, port, work):
    conf = os.path.join(work, "thumbor.conf")
    with open(conf, "w") as f:
        f.write("""ALLOW_UNSAFE_URL = True
LOADER = 'thumbor.loaders.http_loader'
STORAGE = 'thumbor.storages.no_storage'
RESULT_STORAGE = None
ENGINE = 'thumbor.engines.pil'
QUALITY = 80
AUTO_WEBP = False
RESPECT_ORIENTATION = True
HTTP_LOADER_MAX_CLIENTS = 64
""")
    return ThumborCluster(executable, port, work, conf)


class ThumborCluster:
    """thumbor as its documentation deploys it: one single-process instance per core, each
    on its own port, behind nginx sending each request to the least busy. With
    `thumbor --processes N` the processes share one listening socket and whichever
    accepts first may take every connection: in earlier runs of this benchmark about
    half the rounds ran thumbor on one core, which made the ratios a coin toss."""

    def __init__(self, executable, port, work, conf):
        ports = [free_port() for _ in range(CORES)]
        self.instances = []
        for index, instance_port in enumerate(ports):
            self.instances.append(Server(f"thumbor{index}", [executable, "--port", str(instance_port), "--conf",
                                                             conf, "--processes", "1", "--log-level", "error"],
                                         instance_port))
        servers = " ".join(f"server 127.0.0.1:{p};" for p in ports)
        self.balancer = start_nginx(
            work, port,
            "location / { proxy_pass http://thumbor; proxy_http_version 1.1; proxy_set_header Connection \"\"; }",
            upstreams=f"upstream thumbor {{ least_conn; {servers} keepalive 64; }}")
        wait_for(f"http://127.0.0.1:{port}/healthcheck")

    def pids(self):
        return [pid for server in self.instances for pid in server.pids()]

    def stop(self):
        stop_nginx(self.balancer)
        for server in self.instances:
            server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--connections", default="2,16")
    parser.add_argument("--binary", default=os.path.join(ROOT, ".build-release/release/imageloader"))
    parser.add_argument("--work", default=os.path.join(ROOT, ".build", "serve-bench"))
    parser.add_argument("--photos", type=int, default=100)
    parser.add_argument("--baseline", help="an earlier imageloader binary, run side by side")
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--no-thumbor", action="store_true")
    args = parser.parse_args()
    formats = [f for f in FORMATS if f in args.formats.split(",")]
    if not os.path.exists(args.binary):
        sys.exit(f"serve_compare: {args.binary} missing: run scripts/build-release.sh")
    os.makedirs(args.work, exist_ok=True)
    work = os.path.abspath(args.work)
    thumbor_bin = None if args.no_thumbor else ensure_tools(os.path.join(ROOT, ".build", "serve-bench", "venv"))
    if args.no_thumbor:
        for tool, package in (("nginx", "nginx"), ("wrk", "wrk"), ("convert", "imagemagick")):
            if not shutil.which(tool):
                sh(["apt-get", "install", "-y", "-q", package])
    inputs = os.path.join(work, "inputs")
    make_inputs(inputs, args.photos)
    make_svgs(inputs, min(args.photos, MODERN_SOURCES))
    connections = [int(c) for c in args.connections.split(",")]

    origin_port = free_port()
    animation = make_animation(inputs)
    origin = start_nginx(work, origin_port,
                         f"location ~ ^/(jpeg|png|heic|avif|svg)/\\d+/(p\\d+\\.(jpg|png|heic|avif|svg))$ {{ alias {inputs}/$1/$2; }}\n"
                         f"location ~ ^/anim/\\d+/a\\.gif$ {{ alias {animation}; }}")
    wait_for(f"http://127.0.0.1:{origin_port}/jpeg/0/p000.jpg")
    src = f"http://127.0.0.1:{origin_port}"
    ours_port, thumbor_port = free_port(), free_port()
    patterns = {
        ("imageloader", "jpeg"): f"/insecure/rs:fit:512:512/q:80/plain/{src}/jpeg/{{K}}/p{{I}}.jpg@jpg",
        ("imageloader", "png"): f"/insecure/rs:fit:512:512/plain/{src}/png/{{K}}/p{{I}}.png@png",
        ("imageloader", "webp"): f"/insecure/rs:fit:512:512/q:75/plain/{src}/jpeg/{{K}}/p{{I}}.jpg@webp",
        ("imageloader", "avif"): f"/insecure/rs:fit:512:512/q:60/plain/{src}/jpeg/{{K}}/p{{I}}.jpg@avif",
        ("imageloader", "heic"): f"/insecure/rs:fit:512:512/q:50/plain/{src}/jpeg/{{K}}/p{{I}}.jpg@heic",
        ("imageloader", "heic>jpeg"): f"/insecure/rs:fit:512:512/q:80/plain/{src}/heic/{{K}}/p{{I}}.heic@jpg",
        ("imageloader", "svg>png"): f"/insecure/rs:fit:512:512/plain/{src}/svg/{{K}}/p{{I}}.svg@png",
        ("imageloader", "svg"): f"/insecure/plain/{src}/svg/{{K}}/p{{I}}.svg",
        ("imageloader", "avif>jpeg"): f"/insecure/rs:fit:512:512/q:80/plain/{src}/avif/{{K}}/p{{I}}.avif@jpg",
        ("imageloader", "effects"):
            f"/insecure/rs:fill:512:512/sh:0.5/bg:ffffff/q:80/plain/{src}/png/{{K}}/p{{I}}.png@jpg",
        ("imageloader", "gif>webp"): f"/insecure/rs:fit:256:256/q:75/plain/{src}/anim/{{K}}/a.gif@webp",
        ("thumbor", "jpeg"): f"/unsafe/fit-in/512x512/filters:quality(80):format(jpeg)/127.0.0.1:{origin_port}/jpeg/{{K}}/p{{I}}.jpg",
        ("thumbor", "png"): f"/unsafe/fit-in/512x512/filters:format(png)/127.0.0.1:{origin_port}/png/{{K}}/p{{I}}.png",
    }
    for fmt in FORMATS:
        if ("imageloader", fmt) in patterns:
            patterns[("baseline", fmt)] = patterns[("imageloader", fmt)]
    servers = ["imageloader"] + (["baseline"] if args.baseline else []) + ([] if args.no_thumbor else ["thumbor"])
    results = {}
    peaks = {name: 0.0 for name in servers}
    try:
        for round_index in range(args.rounds):
            # Rotated from round to round, so no server always runs first.
            order = servers[round_index % len(servers):] + servers[:round_index % len(servers)]
            for name in order:
                if name == "thumbor":
                    server = thumbor(thumbor_bin, thumbor_port, work)
                else:
                    binary = args.binary if name == "imageloader" else args.baseline
                    server = imageloader(binary, ours_port, "--result-cache-mb", "0", "--queue", "4096",
                                         "--max-animation-frames", "100")
                port = thumbor_port if name == "thumbor" else ours_port
                try:
                    for fmt in formats:
                        if (name, fmt) not in patterns:
                            continue
                        count = (1 if fmt == "gif>webp" else min(args.photos, MODERN_SOURCES)
                                 if ">" in fmt or fmt == "svg" else args.photos)
                        for c in connections:
                            r = wrk(f"http://127.0.0.1:{port}", patterns[(name, fmt)], count, c,
                                    args.duration, work, f"{name}-{fmt}-{c}")
                            results.setdefault((name, fmt, c), []).append(r)
                            # wrk stops with requests still in flight; the server finishes them
                            # (a departed client is noticed only when the answer is written), so
                            # wait about as long as the slowest took before the next run starts.
                            time.sleep(min(15.0, r["max"] / 1000 + 0.5))
                            print(f"round {round_index + 1} {name:11s} {fmt:4s} c={c:<3d} {r['rate']:7.1f}/s "
                                  f"p50 {r['p50']:7.1f} ms p99 {r['p99']:7.1f} ms non-2xx {r['non2xx']} "
                                  f"{r['socket']}", flush=True)
                    peaks[name] = max(peaks[name], peak_rss_mib(server.pids()))
                finally:
                    server.stop()

        if args.baseline:
            print("\n## This build against the baseline, medians over rounds\n")
            print("| output | connections | this req/s | baseline req/s | ratio (this / baseline, per round) |")
            print("|---|---:|---:|---:|---:|")
            for fmt in formats:
                for c in connections:
                    ours, base = results.get(("imageloader", fmt, c)), results.get(("baseline", fmt, c))
                    if not ours or not base:
                        continue
                    ratio = statistics.median(o["rate"] / b["rate"] for o, b in zip(ours, base))
                    print(f"| {fmt} | {c} | {statistics.median(r['rate'] for r in ours):.1f} | "
                          f"{statistics.median(r['rate'] for r in base):.1f} | {ratio:.3f}x |")
        if args.no_thumbor:
            return
        print("\n## Processing (no result caches), medians over rounds\n")
        print("| output | connections | imageloader req/s | p50 / p99 ms | thumbor req/s | p50 / p99 ms | ratio |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for fmt in formats:
            for c in connections:
                ours = results.get(("imageloader", fmt, c))
                theirs = results.get(("thumbor", fmt, c))
                if not ours:
                    continue
                med = lambda rs, k: statistics.median(r[k] for r in rs)
                row = f"| {fmt} | {c} | {med(ours, 'rate'):.1f} | {med(ours, 'p50'):.0f} / {med(ours, 'p99'):.0f} |"
                if theirs:
                    ratio = statistics.median(o["rate"] / t["rate"] for o, t in zip(ours, theirs))
                    row += f" {med(theirs, 'rate'):.1f} | {med(theirs, 'p50'):.0f} / {med(theirs, 'p99'):.0f} | {ratio:.2f}x |"
                else:
                    row += " - | - | - |"
                print(row)
        print(f"\nPeak RSS: imageloader {peaks['imageloader']:.0f} MiB, thumbor {peaks['thumbor']:.0f} MiB "
              f"({CORES} processes)")

        # Cached: the service's result cache against nginx static files of the same bytes.
        server = imageloader(args.binary, ours_port, "--result-cache-mb", "256")
        static = os.path.join(work, "static")
        os.makedirs(static, exist_ok=True)
        fixed = f"/insecure/rs:fit:512:512/q:80/plain/{src}/jpeg/0/p{{I}}.jpg@jpg"
        for i in range(args.photos):
            with urllib.request.urlopen(f"http://127.0.0.1:{ours_port}" + fixed.replace("{I}", f"{i:03d}")) as response:
                with open(os.path.join(static, f"t{i:03d}.jpg"), "wb") as f:
                    f.write(response.read())
        static_port = free_port()
        static_nginx = start_nginx(work, static_port, f"location /t/ {{ alias {static}/; }}")
        wait_for(f"http://127.0.0.1:{static_port}/t/t000.jpg")
        cached = {"imageloader": [], "nginx": []}
        try:
            for round_index in range(max(1, args.rounds)):
                for name in (["imageloader", "nginx"] if round_index % 2 == 0 else ["nginx", "imageloader"]):
                    if name == "imageloader":
                        r = wrk(f"http://127.0.0.1:{ours_port}", fixed, args.photos, 16, min(args.duration, 20),
                                work, "cached-ours")
                    else:
                        r = wrk(f"http://127.0.0.1:{static_port}", "/t/t{I}.jpg", args.photos, 16,
                                min(args.duration, 20), work, "cached-nginx")
                    cached[name].append(r)
            ours_rate = statistics.median(r["rate"] for r in cached["imageloader"])
            nginx_rate = statistics.median(r["rate"] for r in cached["nginx"])
            print("\n## Cached results (16 connections)\n")
            print("| server | req/s | p50 ms | p99 ms |\n|---|---:|---:|---:|")
            for name in ("imageloader", "nginx"):
                rs = cached[name]
                print(f"| {name} | {statistics.median(r['rate'] for r in rs):.0f} | "
                      f"{statistics.median(r['p50'] for r in rs):.2f} | {statistics.median(r['p99'] for r in rs):.2f} |")
            print(f"\nimageloader / nginx static: {ours_rate / nginx_rate:.2f}x")
        finally:
            stop_nginx(static_nginx)
            server.stop()

        # Overload: 4x the sustainable rate (the 2-connection JPEG rate above), offered
        # by 64 connections each pausing between requests.
        sustainable = statistics.median(x["rate"] for x in results[("imageloader", "jpeg", connections[0])])
        offered = 4 * sustainable
        server = imageloader(args.binary, ours_port, "--result-cache-mb", "0", "--workers", str(CORES),
                             "--fetches-ahead", str(CORES), "--queue", str(4 * CORES))
        try:
            seconds = min(args.duration, 30)
            r = wrk(f"http://127.0.0.1:{ours_port}", patterns[("imageloader", "jpeg")], args.photos, 64, seconds,
                    work, "overload", delay_ms=64 * 1000 / offered)
            peak = peak_rss_mib(server.pids())
        finally:
            server.stop()
        print("\n## Overload: 4x the sustainable rate, --workers %d --fetches-ahead %d --queue %d\n"
              % (CORES, CORES, 4 * CORES))
        print(f"offered about {offered:.0f}/s (4 x {sustainable:.0f}/s) over 64 connections for {seconds} s: "
              f"{r['total']} answers ({r['rate']:.0f}/s), served {r['total'] - r['non2xx']} "
              f"({(r['total'] - r['non2xx']) / seconds:.0f}/s), 503s {r['non2xx']}; "
              f"p50 {r['p50']:.1f} ms, p99 {r['p99']:.1f} ms, longest {r['max'] / 1000:.2f} s (timeout 10 s); "
              f"peak RSS {peak:.0f} MiB")
    finally:
        stop_nginx(origin)


if __name__ == "__main__":
    main()
