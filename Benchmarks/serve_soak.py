#!/usr/bin/env python3
"""serve_soak.py: the release `imageloader serve` under mixed traffic for a long while,
watched for growth.

    python3 Benchmarks/serve_soak.py [--minutes 30] [--binary PATH] [--work DIR]
                                     [--plot Benchmarks/serve_soak.png] [--json FILE]

What runs, all on loopback:
  origin    a threaded Python HTTP server in a process of its own (in the clients'
            process, a burst's threads starved it of Python's lock, and sources that
            took seconds to arrive made 504s that were the harness's): 24 JPEG and 12 PNG sources
            (ImageMagick plasma photos, 1200x900 and 800x600) with an ETag and
            Cache-Control: max-age=60 (so the service revalidates them with 304s);
            /missing/* answers 404; /slow/* answers after 8 s (past the service's
            --timeout 4); /truncated/* sends half the body its Content-Length promises
            and closes.
  service   imageloader serve with a key and salt (signed URLs), a disk cache, a result
            cache of 16 MiB (--result-cache-mb; the default 128 MiB takes this traffic
            about 15 minutes to fill, and a cache still filling is growth that is not a
            leak: full before the warm-up ends, what grows after it is news),
            --workers 2 --fetches-ahead 2 --queue 8 --timeout 4.
  clients   6 threads on keep-alive connections, each request drawn at random:
              distinct thumbnails (new size of a source)  30%  200
              repeats of 40 fixed URLs                     25%  200
              conditional repeats (If-None-Match)          10%  304
              malformed options, correctly signed           5%  400
              unsigned or wrongly signed                    5%  403
              sources that 404                              4%  404
              slow sources                                  3%  504
              truncated sources                             3%  502
              POST /info with an image, or with text        8%  200 or 415
              a client that closes as soon as it has sent   7%  (no answer read)
            and every 3 minutes a burst: 4x the service's capacity (workers + fetches
            ahead + queue = 12) in concurrent clients for 20 s asking distinct
            thumbnails: 200 or 503 with Retry-After.
Every 10 s it records the process's RSS (VmRSS), open descriptors (/proc/PID/fd),
threads, and the statuses answered since the last sample.

It fails (exit 1) when an answer falls outside the statuses expected for its kind, or
when, after the warm-up (the first 5 minutes; a third of a shorter run), the service
grows:
  RSS          any sample after the warm-up more than 10% above the warm-up's highest;
  threads      any sample after the warm-up above the warm-up's highest;
  descriptors  the samples after the warm-up split into halves: the median of the last
               half's steady samples above the first half's.
(The halves' RSS and thread peaks are reported too.)
Descriptors are mostly connections, whose number in flight moves by a few from one
sample to the next and by fifty in a burst: they are compared outside bursts (and the
20 s after one), by median, where a leak would move them and chance would not; the
peaks are reported too. `--judge FILE` judges a run recorded with `--json` again (`--replot` draws its plot again).
Each sample also records where the resident memory is (`memory_breakdown`: malloc's
main heap and thread arenas, other anonymous maps, mapped files) and the threads by name.

Installs ImageMagick with apt-get when missing, and matplotlib with pip into
.build/serve-soak/venv for the plot. Needs the release binary (scripts/build-release.sh).
"""
import argparse
import base64
import collections
import hashlib
import hmac
import http.client
import http.server
import json
import multiprocessing
import os
import random
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KEY = bytes.fromhex("943b421c9eb07c830af81030552c86009268de4e532ba2ee2eab8247c6da0881")
SALT = bytes.fromhex("520f986b998545b4785e0defbc4f3c1203f22de2374a3d53cb7a7fe9fea309c5")
WORKERS, AHEAD, QUEUE = 2, 2, 8
CAPACITY = WORKERS + AHEAD + QUEUE
SAMPLE_SECONDS = 10
BURST_EVERY = 180
BURST_SECONDS = 20

# Which statuses each kind of request may get. Whatever needs a worker may also be
# refused with 503 while a burst fills the service; URLs are judged before that.
EXPECTED = {
    "distinct": {200, 503},
    "repeat": {200, 503},
    "conditional": {304, 503},
    "malformed": {400},
    "unsigned": {403},
    "missing": {404, 503},
    "slow": {504, 503},
    "truncated": {502, 503},
    "info": {200, 503},
    "info-text": {415, 503},
    "burst": {200, 503},
}


def sh(command, **kwargs):
    return subprocess.run(command, check=True, **kwargs)


def ensure_tools(venv):
    if shutil.which("convert-im6.q16") is None:
        sh(["apt-get", "update", "-q"], stdout=subprocess.DEVNULL)
        sh(["apt-get", "install", "-y", "-q", "imagemagick"], stdout=subprocess.DEVNULL,
           env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        sh([sys.executable, "-m", "venv", venv])
    if subprocess.run([python, "-c", "import matplotlib"], stderr=subprocess.DEVNULL).returncode != 0:
        sh([os.path.join(venv, "bin", "pip"), "install", "-q", "matplotlib"])
    return python


def make_sources(directory):
    os.makedirs(directory, exist_ok=True)
    sources = {}
    for index in range(36):
        jpeg = index < 24
        name = f"s{index:02d}.{'jpg' if jpeg else 'png'}"
        path = os.path.join(directory, name)
        if not os.path.exists(path):
            size = "1200x900" if jpeg else "800x600"
            command = ["convert-im6.q16", "-seed", str(700 + index), "-size", size, "plasma:fractal",
                       "-blur", "0x1", "-attenuate", "0.3", "+noise", "Gaussian"]
            command += ["-quality", "88", path + ".part.jpg"] if jpeg else ["-depth", "8", "PNG24:" + path + ".part.png"]
            sh(command, env={**os.environ, "MAGICK_THREAD_LIMIT": "1"})
            os.rename(path + (".part.jpg" if jpeg else ".part.png"), path)
        with open(path, "rb") as handle:
            sources[name] = handle.read()
    return sources


class Origin(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    sources = {}

    def log_message(self, *args):
        pass

    def do_GET(self):
        # /KIND/NAME, or /KIND/ANYTHING/NAME (a distinct URL for the same source).
        parts = self.path.split("/")
        kind, name = (parts[1], parts[-1]) if len(parts) >= 3 else ("", "")
        body = self.sources.get(name)
        if kind == "missing" or body is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        content_type = "image/jpeg" if name.endswith(".jpg") else "image/png"
        tag = '"' + hashlib.sha1(body).hexdigest()[:16] + '"'
        if kind == "slow":
            time.sleep(8)
        if kind == "img" and self.headers.get("If-None-Match") == tag:
            self.send_response(304)
            self.send_header("ETag", tag)
            self.send_header("Cache-Control", "max-age=60")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", tag)
        self.send_header("Cache-Control", "max-age=60")
        self.end_headers()
        if kind == "truncated":
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


class ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # The service hangs up on slow sources once its timeout passes: expected, not news.
        pass


def run_origin(sources, ports):
    """The origin's process: serves until it is terminated."""
    Origin.sources = sources
    server = ThreadingServer(("127.0.0.1", 0), Origin)
    ports.put(server.server_address[1])
    server.serve_forever()


def signed(path):
    digest = hmac.new(KEY, SALT + path.encode(), hashlib.sha256).digest()
    return "/" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode() + path


def source_url(origin, kind, name):
    return f"http://127.0.0.1:{origin}/{kind}/{name}"


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = collections.Counter()
        self.unexpected = []
        self.total = collections.Counter()

    def add(self, kind, status):
        with self.lock:
            self.counts[status] += 1
            self.total[(kind, status)] += 1
            if status not in EXPECTED[kind] and len(self.unexpected) < 50:
                self.unexpected.append((kind, status))

    def take(self):
        with self.lock:
            counts, self.counts = self.counts, collections.Counter()
            return counts


class Client:
    """One keep-alive connection, reopened when the service or a timeout closes it."""

    def __init__(self, port):
        self.port = port
        self.connection = None

    def request(self, method, path, body=None, headers=None):
        for attempt in range(2):
            if self.connection is None:
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            try:
                self.connection.request(method, path, body=body, headers=headers or {})
                response = self.connection.getresponse()
                data = response.read()
                if response.getheader("Connection", "").lower() == "close":
                    self.close()
                return response.status, response, data
            except (http.client.HTTPException, ConnectionError, OSError):
                self.close()
                if attempt == 1:
                    raise
        raise RuntimeError("unreachable")

    def close(self):
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def traffic(port, origin, sources, tally, stop, seed):
    rng = random.Random(seed)
    names = sorted(sources)
    repeats = [signed(f"/rs:fit:{96 + 8 * (i % 5)}:{96 + 8 * (i % 5)}/plain/" + source_url(origin, "img", names[i % len(names)]))
               for i in range(40)]
    tags = {}
    client = Client(port)
    text = b"this is not an image " * 50
    while not stop.is_set():
        roll = rng.random()
        kind = "distinct"
        try:
            if roll < 0.30:
                name = rng.choice(names)
                path = signed(f"/rs:fit:{rng.randint(40, 600)}:{rng.randint(40, 600)}/plain/" + source_url(origin, "img", name))
                status, _, _ = client.request("GET", path)
                tally.add("distinct", status)
            elif roll < 0.55:
                kind = "repeat"
                path = rng.choice(repeats)
                status, response, _ = client.request("GET", path)
                if status == 200 and response.getheader("ETag"):
                    tags[path] = response.getheader("ETag")
                tally.add("repeat", status)
            elif roll < 0.65:
                kind = "conditional"
                if not tags:
                    continue
                path = rng.choice(sorted(tags))
                status, _, _ = client.request("GET", path, headers={"If-None-Match": tags[path]})
                tally.add("conditional", status)
            elif roll < 0.70:
                kind = "malformed"
                option = rng.choice(["rs:squash:10:10", "w:-5", "q:500", "nonsense:1", "g:xx", "dpr:99"])
                status, _, _ = client.request("GET", signed(f"/{option}/plain/" + source_url(origin, "img", rng.choice(names))))
                tally.add("malformed", status)
            elif roll < 0.75:
                kind = "unsigned"
                path = f"/rs:fit:100:100/plain/" + source_url(origin, "img", rng.choice(names))
                path = rng.choice(["/insecure" + path, "/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" + path])
                status, _, _ = client.request("GET", path)
                tally.add("unsigned", status)
            elif roll < 0.79:
                kind = "missing"
                path = signed(f"/w:{rng.randint(50, 300)}/plain/" + source_url(origin, "missing", f"m{rng.randint(0, 10**6)}.jpg"))
                status, _, _ = client.request("GET", path)
                tally.add("missing", status)
            elif roll < 0.82:
                kind = "slow"
                path = signed(f"/w:{rng.randint(50, 300)}/plain/" + source_url(origin, "slow", f"{rng.randint(0, 10**9)}/{rng.choice(names)}"))
                status, _, _ = client.request("GET", path)
                tally.add("slow", status)
            elif roll < 0.85:
                kind = "truncated"
                path = signed(f"/w:{rng.randint(50, 300)}/plain/" + source_url(origin, "truncated", f"{rng.randint(0, 10**9)}/{rng.choice(names)}"))
                status, _, _ = client.request("GET", path)
                tally.add("truncated", status)
            elif roll < 0.93:
                kind = "info"
                if rng.random() < 0.8:
                    status, _, _ = client.request("POST", "/info", body=sources[rng.choice(names)],
                                                  headers={"Content-Type": "application/octet-stream"})
                    tally.add("info", status)
                else:
                    kind = "info-text"
                    status, _, _ = client.request("POST", "/info", body=text,
                                                  headers={"Content-Type": "application/octet-stream"})
                    tally.add("info-text", status)
            else:
                # A client that leaves as soon as it has asked.
                with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
                    path = signed(f"/rs:fill:{rng.randint(50, 500)}:{rng.randint(50, 500)}/plain/" + source_url(origin, "img", rng.choice(names)))
                    raw.sendall(f"GET {path} HTTP/1.1\r\nHost: soak\r\n\r\n".encode())
                with tally.lock:
                    tally.total[("departed", 0)] += 1
        except (OSError, http.client.HTTPException) as error:
            tally.add(kind, f"error: {type(error).__name__}")
            client.close()
    client.close()


def burst(port, origin, sources, tally, seconds):
    stop = threading.Event()
    names = sorted(sources)

    def one(seed):
        rng = random.Random(seed)
        client = Client(port)
        while not stop.is_set():
            path = signed(f"/rs:fit:{rng.randint(40, 800)}:{rng.randint(40, 800)}/plain/" + source_url(origin, "img", rng.choice(names)))
            try:
                status, response, _ = client.request("GET", path)
                if status == 503 and response.getheader("Retry-After") is None:
                    status = "503 without Retry-After"
                tally.add("burst", status)
            except (OSError, http.client.HTTPException) as error:
                tally.add("burst", f"error: {type(error).__name__}")
                client.close()
        client.close()

    threads = [threading.Thread(target=one, args=(9000 + n,), daemon=True) for n in range(4 * CAPACITY)]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()


def process_figures(pid):
    status = {}
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            key, _, value = line.partition(":")
            status[key] = value.strip()
    rss = int(status["VmRSS"].split()[0]) / 1024
    threads = int(status["Threads"])
    descriptors = len(os.listdir(f"/proc/{pid}/fd"))
    return rss, descriptors, threads


ARENA_HEAP = 64 << 20   # glibc's HEAP_MAX_SIZE on 64-bit: a thread arena's heaps are this size and alignment


def memory_breakdown(pid):
    """Where the resident memory is, from /proc/PID/smaps: glibc's main heap, its thread
    arenas (anonymous mappings at a 64 MiB boundary whose pages, mapped and reserved,
    span 64 MiB), other anonymous memory (large blocks mapped on their own, stacks,
    Swift's and NIO's own maps) and files (the binary and its libraries), in MiB, with
    the number of arenas and the threads by name."""
    regions = []
    with open(f"/proc/{pid}/smaps") as handle:
        for line in handle:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                start, end = (int(x, 16) for x in head[0].split("-"))
                regions.append({"start": start, "end": end, "name": head[5] if len(head) > 5 else "", "rss": 0})
            elif head[0] == "Rss:":
                regions[-1]["rss"] = int(head[1])
    kinds = collections.Counter()
    arenas = 0
    index = 0
    while index < len(regions):
        region = regions[index]
        if region["name"] == "[heap]":
            kinds["mainHeap"] += region["rss"]
        elif region["name"].startswith("/"):
            kinds["files"] += region["rss"]
        elif region["name"] == "" and region["start"] % ARENA_HEAP == 0:
            # An arena heap is a read-write part and the reserved rest, together 64 MiB.
            span, rss, last = region["end"] - region["start"], region["rss"], index
            if span < ARENA_HEAP and index + 1 < len(regions) and regions[index + 1]["start"] == region["end"]:
                span += regions[index + 1]["end"] - regions[index + 1]["start"]
                rss += regions[index + 1]["rss"]
                last = index + 1
            if span == ARENA_HEAP:
                kinds["arenas"] += rss
                arenas += 1
                index = last + 1
                continue
            kinds["otherAnonymous"] += region["rss"]
        else:
            kinds["otherAnonymous"] += region["rss"]
        index += 1
    names = collections.Counter()
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/comm") as handle:
                names[handle.read().strip()] += 1
        except OSError:
            pass
    figures = {key: round(value / 1024, 1) for key, value in kinds.items()}
    figures["arenaHeaps"] = arenas
    figures["threadNames"] = dict(sorted(names.items()))
    return figures


def plot(python, samples, bursts, warmup, path, minutes):
    script = r'''
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
data = json.load(open(sys.argv[1]))
samples, bursts, warmup = data["samples"], data["bursts"], data["warmup"]
t = [s["t"] / 60 for s in samples]
fig, axes = plt.subplots(4, 1, figsize=(10, 10), sharex=True)
axes[0].plot(t, [s["rss"] for s in samples], color="tab:blue", label="RSS"); axes[0].set_ylabel("MiB")
if all("memory" in s for s in samples):
    heaps = [s["memory"].get("mainHeap", 0) + s["memory"].get("arenas", 0) for s in samples]
    axes[0].plot(t, heaps, color="tab:purple", label="of which malloc's heaps")
    axes[0].plot(t, [s["memory"].get("files", 0) for s in samples], color="tab:gray",
                 label="of which mapped files (the binary, libraries)")
axes[0].legend(fontsize=8, loc="lower right")
axes[1].plot(t, [s["fds"] for s in samples], color="tab:orange"); axes[1].set_ylabel("open descriptors")
axes[2].plot(t, [s["threads"] for s in samples], color="tab:green"); axes[2].set_ylabel("threads")
statuses = sorted({k for s in samples for k in s["statuses"]}, key=str)
bottom = [0] * len(samples)
for status in statuses:
    values = [s["statuses"].get(status, 0) / 10 for s in samples]
    axes[3].bar(t, values, width=10 / 60, bottom=bottom, label=str(status), align="edge")
    bottom = [b + v for b, v in zip(bottom, values)]
axes[3].set_ylabel("answers/s by status"); axes[3].legend(ncol=6, fontsize=8, loc="upper left")
for axis in axes:
    for start in bursts:
        axis.axvspan(start / 60, (start + 20) / 60, color="red", alpha=0.08)
    axis.axvline(warmup / 60, color="gray", linestyle="--", linewidth=0.8)
    axis.grid(alpha=0.3)
axes[3].set_xlabel("minutes (red: bursts at 4x capacity; dashed: end of warm-up)")
fig.suptitle(data["title"])
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=90)
'''
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump({"samples": samples, "bursts": bursts, "warmup": warmup,
                   "title": f"imageloader serve, {minutes} minutes of mixed traffic"}, handle)
        data = handle.name
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
        handle.write(script)
        program = handle.name
    sh([python, program, data, path])


def halves(samples, warmup):
    after = [s for s in samples if s["t"] >= warmup]
    return after[: len(after) // 2], after[len(after) // 2:]


def steady(samples, bursts):
    """The samples whose 10 s do not overlap a burst or the 20 s after it."""
    def quiet(sample):
        start = sample["t"] - SAMPLE_SECONDS
        return all(sample["t"] <= b or start >= b + BURST_SECONDS + 20 for b in bursts)
    return [s for s in samples if quiet(s)]


def figures(samples, bursts, warmup):
    first, last = halves(samples, warmup)
    if not first or not last:
        return None
    import statistics
    warm = [s for s in samples if s["t"] <= warmup]
    after = first + last
    return {
        # The rule: growth after the warm-up, against what the warm-up reached.
        "rssWarmupPeakThenPeak": [max(s["rss"] for s in warm), max(s["rss"] for s in after)],
        "threadsWarmupPeakThenPeak": [max(s["threads"] for s in warm), max(s["threads"] for s in after)],
        "rssPeak": [max(s["rss"] for s in first), max(s["rss"] for s in last)],
        "threadsPeak": [max(s["threads"] for s in first), max(s["threads"] for s in last)],
        "fdsSteadyMedian": [statistics.median(s["fds"] for s in steady(part, bursts)) for part in (first, last)],
        "fdsPeak": [max(s["fds"] for s in first), max(s["fds"] for s in last)],
        **thread_names(warm, after),
    }


def thread_names(warm, after):
    """Which threads grew: for each thread name, the warm-up's peak and the peak after it
    (only in runs recorded with the memory breakdown). libdispatch names the workers of
    Swift's global executor after its root queue ("com.apple.root.default-qos", of which
    their names show the last 15 characters): their number is libdispatch's to choose."""
    if not all("memory" in s for s in warm + after):
        return {}
    names = sorted({n for s in warm + after for n in s["memory"]["threadNames"]})
    peak = lambda part, name: max(s["memory"]["threadNames"].get(name, 0) for s in part)
    return {"threadsByNameWarmupPeakThenPeak": {n: [peak(warm, n), peak(after, n)] for n in names}}


def judge(samples, bursts, warmup):
    values = figures(samples, bursts, warmup)
    if values is None:
        return ["too short to compare halves"]
    failures = []
    rss, threads = values["rssWarmupPeakThenPeak"], values["threadsWarmupPeakThenPeak"]
    if rss[1] > 1.10 * rss[0]:
        failures.append(f"RSS grew after the warm-up: its peak {rss[0]} MiB, then {rss[1]} MiB")
    if threads[1] > threads[0]:
        grown = [f"{name} {a} to {b}" for name, (a, b) in values.get("threadsByNameWarmupPeakThenPeak", {}).items()
                 if b > a]
        failures.append(f"threads grew after the warm-up: {threads[0]} to {threads[1]}"
                        + (f" ({', '.join(grown)})" if grown else ""))
    if values["fdsSteadyMedian"][1] > values["fdsSteadyMedian"][0]:
        failures.append(f"descriptors grew: median {values['fdsSteadyMedian'][0]} to {values['fdsSteadyMedian'][1]}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--binary", default=os.path.join(ROOT, ".build-release", "release", "imageloader"))
    parser.add_argument("--work", default=os.path.join(ROOT, ".build", "serve-soak"))
    parser.add_argument("--plot", default=os.path.join(ROOT, "Benchmarks", "serve_soak.png"))
    parser.add_argument("--json", default=None)
    parser.add_argument("--result-cache-mb", type=int, default=16)
    parser.add_argument("--judge", metavar="FILE", help="judge a run recorded with --json again, and stop")
    parser.add_argument("--replot", action="store_true", help="with --judge: draw its plot again (to --plot)")
    arguments = parser.parse_args()
    if arguments.judge:
        with open(arguments.judge) as handle:
            recorded = json.load(handle)
        failures = judge(recorded["samples"], recorded["bursts"], recorded["warmupSeconds"])
        print(figures(recorded["samples"], recorded["bursts"], recorded["warmupSeconds"]))
        if arguments.replot:
            python = ensure_tools(os.path.join(arguments.work, "venv"))
            plot(python, recorded["samples"], recorded["bursts"], recorded["warmupSeconds"], arguments.plot,
                 recorded["minutes"])
        print("FAILED: " + "; ".join(failures) if failures else "passed")
        sys.exit(1 if failures else 0)
    if not os.path.exists(arguments.binary):
        sys.exit(f"serve_soak: no binary at {arguments.binary} (scripts/build-release.sh builds it)")
    os.makedirs(arguments.work, exist_ok=True)
    python = ensure_tools(os.path.join(arguments.work, "venv"))
    sources = make_sources(os.path.join(arguments.work, "sources"))

    ports = multiprocessing.Queue()
    origin = multiprocessing.Process(target=run_origin, args=(sources, ports), daemon=True)
    origin.start()
    origin_port = ports.get(timeout=30)

    cache = tempfile.mkdtemp(prefix="soak-cache-", dir=arguments.work)
    # The service's log (an access line a request) goes straight to a file. Through a
    # pipe drained by a thread of this process, a burst's client threads starved the
    # drain of Python's lock, the pipe filled, and the service's request tasks blocked in
    # write(2): a harness's stall, and one that makes libdispatch add a worker thread for
    # the blocked ones (it watches its workers and adds one when they sleep with work
    # queued), which the thread count then reports as growth.
    log_path = os.path.join(arguments.work, "serve.log")
    log = open(log_path, "w")
    server = subprocess.Popen(
        [arguments.binary, "serve", "--host", "127.0.0.1", "--port", "0", "--key", KEY.hex(), "--salt", SALT.hex(),
         "--allow-private-networks", "--cache-dir", cache, "--workers", str(WORKERS),
         "--fetches-ahead", str(AHEAD), "--queue", str(QUEUE), "--timeout", "4",
         "--result-cache-mb", str(arguments.result_cache_mb)],
        stdout=log, stderr=subprocess.STDOUT)
    port = None
    deadline = time.time() + 30
    while port is None and time.time() < deadline and server.poll() is None:
        with open(log_path) as written:
            for line in written:
                if "listening on http://127.0.0.1:" in line:
                    port = int(line.rsplit(":", 1)[1].strip())
        time.sleep(0.1)
    if port is None:
        server.kill()
        sys.exit("serve_soak: the service did not start")

    tally = Tally()
    stop = threading.Event()
    clients = [threading.Thread(target=traffic, args=(port, origin_port, sources, tally, stop, n), daemon=True)
               for n in range(6)]
    for client in clients:
        client.start()

    total = arguments.minutes * 60
    warmup = min(300, total / 3)
    start = time.time()
    samples, bursts = [], []
    next_sample, next_burst = start + SAMPLE_SECONDS, start + BURST_EVERY
    burst_thread = None
    while time.time() - start < total:
        now = time.time()
        if now >= next_burst and burst_thread is None:
            bursts.append(now - start)
            burst_thread = threading.Thread(target=burst, args=(port, origin_port, sources, tally, BURST_SECONDS))
            burst_thread.start()
            next_burst += BURST_EVERY
        if burst_thread is not None and not burst_thread.is_alive():
            burst_thread = None
        if now >= next_sample:
            rss, fds, threads = process_figures(server.pid)
            statuses = {str(k): v for k, v in tally.take().items()}
            samples.append({"t": round(now - start, 1), "rss": round(rss, 1), "fds": fds, "threads": threads,
                            "statuses": statuses, "memory": memory_breakdown(server.pid)})
            print(f"{(now - start) / 60:5.1f} min  RSS {rss:6.1f} MiB  fds {fds:4d}  threads {threads:3d}  "
                  f"{sum(statuses.values()) / SAMPLE_SECONDS:6.1f}/s  {statuses}", flush=True)
            next_sample += SAMPLE_SECONDS
        time.sleep(0.2)
    stop.set()
    if burst_thread is not None:
        burst_thread.join()
    for client in clients:
        client.join()
    server.send_signal(signal.SIGTERM)
    exit_status = server.wait(timeout=60)
    origin.terminate()

    failures = judge(samples, bursts, warmup)
    if tally.unexpected:
        failures.append(f"unexpected answers: {tally.unexpected[:10]}")
    if exit_status != 0:
        failures.append(f"the service exited {exit_status} on SIGTERM")
    peak = figures(samples, bursts, warmup)

    summary = {
        "minutes": arguments.minutes, "warmupSeconds": warmup, "samples": samples, "bursts": bursts,
        "answers": {f"{k[0]} {k[1]}": v for k, v in sorted(tally.total.items(), key=str)},
        "failures": failures,
    }
    if peak:
        summary["halves"] = peak
    if arguments.json:
        with open(arguments.json, "w") as handle:
            json.dump(summary, handle, indent=1)
    plot(python, samples, bursts, warmup, arguments.plot, arguments.minutes)
    print(f"\nanswers by kind and status: {summary['answers']}")
    if "halves" in summary:
        print(f"after the warm-up, first half -> last half: {summary['halves']}")
    print(f"plot: {arguments.plot}")
    if failures:
        print("FAILED: " + "; ".join(failures))
        sys.exit(1)
    print("passed")


if __name__ == "__main__":
    main()
