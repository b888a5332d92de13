#!/usr/bin/env python3
"""The container image's end-to-end test: run localhost/imageloader:latest as a deployment
would (environment variables only, a read-only root file system, the cache on a volume),
and check that it runs as a non-root user, that its HEALTHCHECK and `imageloader health`
pass, that every format (JPEG, PNG, GIF, WebP, TIFF, HEIC, AVIF, JPEG XL, SVG) becomes a
thumbnail inside it (so every library opened at run time is in the image), that HEAD
/health answers, that its JSON log lines parse, and that SIGTERM drains (/health 503
while images are still served) and exits 0. Prints the image's size.

Usage: python3 deploy/container/test.py [--image NAME] (build.sh makes the image).
Only the standard library: it runs where the image was built."""
import argparse
import base64
import hashlib
import hmac
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEY, SALT = "736563726574", "68656c6c6f"  # "secret", "hello" in hexadecimal
FORMATS = {  # a source of each format from the fixtures
    "jpeg": "images/jpeg-800x600.jpg", "png": "images/png-gray8.png", "gif": "images/gif-still.gif",
    "webp": None, "tiff": "images/tiff-gray8.tif", "heic": "modern/images/heif-8bit.heic",
    "avif": "modern/images/avif-8bit.avif", "jxl": "modern/images/jxl-1024x768.jxl",
    "svg": "formats/shapes.svg",
}
failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what, flush=True)
    if not condition:
        failures.append(what)


def engine():
    return shutil.which("podman") or "docker"


def sh(*arguments, check_status=True, **options):
    result = subprocess.run(arguments, capture_output=True, text=True, **options)
    if check_status and result.returncode != 0:
        raise SystemExit(f"{' '.join(arguments)}: {result.returncode}\n{result.stdout}{result.stderr}")
    return result


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def signed(path):
    digest = hmac.new(bytes.fromhex(KEY), bytes.fromhex(SALT) + path.encode(), hashlib.sha256).digest()
    return "/" + base64.urlsafe_b64encode(digest).decode().rstrip("=") + path


def request(port, path, method="GET", timeout=30):
    try:
        with urllib.request.urlopen(
            urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method), timeout=timeout
        ) as answer:
            return answer.status, answer.headers, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def png_size(data):
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return struct.unpack(">II", data[16:24])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--image", default="localhost/imageloader:latest")
    image = parser.parse_args().image
    run = engine()
    if run.endswith("podman") and not os.environ.get("CONTAINERS_CONF") and not os.path.exists(
        "/etc/containers/containers.conf"
    ):
        os.environ["CONTAINERS_CONF"] = os.path.join(ROOT, "deploy/container/containers.conf")
    size = int(sh(run, "image", "inspect", image, "--format", "{{.Size}}").stdout.strip())
    print(f"image {image}: {size / 1e6:.1f} MB")

    sources = tempfile.mkdtemp()
    for name, relative in FORMATS.items():
        if relative is None:  # WebP: the JPEG, converted by the service itself below
            continue
        shutil.copy(os.path.join(ROOT, "Fixtures", relative), os.path.join(sources, name + os.path.splitext(relative)[1]))
    os.chmod(sources, 0o755)
    for entry in os.listdir(sources):
        os.chmod(os.path.join(sources, entry), 0o644)
    # The disk cache on a folder of the user's own, as an emptyDir is in Kubernetes.
    cache = tempfile.mkdtemp()
    os.chown(cache, 10001, 10001) if os.geteuid() == 0 else os.chmod(cache, 0o777)
    port = free_port()
    name = f"imageloader-test-{os.getpid()}"
    sh(
        run, "run", "-d", "--name", name, "--network", "host", "--read-only",
        "-v", f"{cache}:/var/cache/imageloader", "-v", f"{sources}:/images:ro",
        "-e", f"IMGPROXY_BIND=127.0.0.1:{port}", "-e", f"IMGPROXY_KEY={KEY}", "-e", f"IMGPROXY_SALT={SALT}",
        "-e", "IMGPROXY_LOCAL_FILESYSTEM_ROOT=/images", "-e", "IMGPROXY_LOG_FORMAT=json",
        "-e", "IMAGELOADER_DRAIN_DELAY=3", "-e", "IMGPROXY_GRACEFUL_STOP_TIMEOUT=10",
        "-e", "IMGPROXY_MAX_ANIMATION_FRAMES=1", image,
    )
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if request(port, "/health", timeout=2)[0] == 200:
                    break
            except OSError:
                time.sleep(0.2)
        else:
            raise SystemExit("the container did not answer /health:\n" + sh(run, "logs", name).stderr)
        user = sh(run, "exec", name, "id", "-u").stdout.strip()
        check(user != "0", f"runs as a non-root user (uid {user})")
        check(sh(run, "exec", name, "imageloader", "health", check_status=False).returncode == 0, "imageloader health")
        if run.endswith("podman"):
            healthcheck = sh(run, "healthcheck", "run", name, check_status=False)
            check(healthcheck.returncode == 0, "the image's HEALTHCHECK " + healthcheck.stdout.strip())
        status, _, body = request(port, "/health", method="HEAD")
        check(status == 200 and body == b"", "HEAD /health is 200 without a body")

        for fmt in FORMATS:
            source = "jpeg.jpg" if fmt == "webp" else next(f for f in os.listdir(sources) if f.startswith(fmt + "."))
            if fmt == "webp":  # a WebP made by the service, then thumbnailed by it
                status, _, webp = request(port, signed("/rs:fit:200:200/plain/local:///jpeg.jpg@webp"))
                check(status == 200 and webp[8:12] == b"WEBP", "JPEG to WebP")
                with open(os.path.join(sources, "webp.webp"), "wb") as file:
                    file.write(webp)
                os.chmod(os.path.join(sources, "webp.webp"), 0o644)
                source = "webp.webp"
            status, headers, body = request(port, signed(f"/rs:fit:32:32/plain/local:///{source}@png"))
            size = png_size(body) if status == 200 else None
            check(
                size is not None and max(size) == 32,
                f"{fmt} ({source}) becomes a 32 px PNG thumbnail: {status} {size} "
                + (body[:200].decode("utf-8", "replace") if status != 200 else ""),
            )
        # Results in the formats the service writes with libraries opened at run time.
        for fmt, magic in (("avif", b"ftypavif"), ("heic", b"ftypheic"), ("jxl", b"\xff\x0a"), ("tiff", b"II*\x00")):
            status, _, body = request(port, signed(f"/rs:fit:64:64/plain/local:///jpeg.jpg@{fmt}"))
            check(status == 200 and magic in body[:16], f"a {fmt} result: {status}")

        logs = sh(run, "logs", name).stdout.splitlines()
        objects = []
        for line in logs:
            try:
                objects.append(json.loads(line))
            except json.JSONDecodeError:
                pass
        access = [entry for entry in objects if entry.get("method") == "GET" and isinstance(entry.get("status"), int)]
        check(
            len(objects) > 0 and len(access) > 0 and all(isinstance(e.get("ms"), (int, float)) for e in access),
            f"JSON log lines: {len(objects)} of {len(logs)} lines parse, {len(access)} access lines with numbers",
        )

        # SIGTERM: /health 503 for the drain delay while images are still served, then exit 0.
        sh(run, "kill", "--signal", "TERM", name) if run.endswith("podman") else sh(run, "kill", "-s", "TERM", name)
        time.sleep(0.5)
        health, _, _ = request(port, "/health")
        image_status, _, _ = request(port, signed("/rs:fit:32:32/plain/local:///png.png@png"))
        check(health == 503 and image_status == 200, f"draining: /health {health}, an image {image_status}")
        sh(run, "wait", name, check_status=False, timeout=60)
        code = sh(run, "inspect", name, "--format", "{{.State.ExitCode}}").stdout.strip()
        check(code == "0", f"exit status after SIGTERM: {code}")
    finally:
        if failures:
            print(sh(run, "logs", name, check_status=False).stdout[-4000:])
        sh(run, "rm", "-f", name, check_status=False)
        shutil.rmtree(sources, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)
    print(f"{len(failures)} failed" if failures else "container test passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
