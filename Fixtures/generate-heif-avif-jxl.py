#!/usr/bin/env python3
"""generate-heif-avif-jxl.py: the HEIF, AVIF and JPEG XL fixtures and their references.

    python3 Fixtures/generate-heif-avif-jxl.py      # from the repository root

Writes Fixtures/modern/images/*, Fixtures/modern/expected/* and
Fixtures/modern/manifest.json (the same entries as Fixtures/manifest.json's, which the
decoder reference tests read too). Run once on a developer machine and commit the
output; the tests only read it.

The files are made by the formats' own tools: heif-enc (libheif 1.15, x265), avifenc
(libavif 0.11, aom) and cjxl (libjxl 0.7), and by pillow-heif (libheif 1.23) where
heif-enc cannot write what is needed (irot/imir, which pillow-heif writes from an EXIF
orientation). The references are decoded by independent decoders from PyPI: pillow-heif
(its own libheif 1.23 and libde265), Pillow's AVIF plugin (its own libavif and dav1d)
and pillow-jxl-plugin (its own libjxl), never by this project. Where a reference
decoder applies a transformation the project reports as metadata (irot/imir,
JPEG XL's orientation field), the expected pixels are the stored ones, taken from
the same file without the transformation, and the expected orientation is written
down from what the file was made with.

Needs: heif-enc, avifenc, cjxl (libheif-examples, libavif-bin, libjxl-tools), and in
a virtual environment: pillow, numpy, pillow-heif, pillow-avif-plugin (older Pillow
only), pillow-jxl-plugin.
"""
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image, ImageCms
import pillow_heif
import pillow_jxl  # noqa: F401  (registers JPEG XL)

pillow_heif.register_heif_opener()

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "modern")
IMAGES = os.path.join(ROOT, "images")
EXPECTED = os.path.join(ROOT, "expected")
TMP = tempfile.mkdtemp(prefix="fixtures-modern.")
MANIFEST = []
THUMBNAILS = []
W, H = 64, 48


def base_rgb(w=W, h=H, seed=1):
    """Gradients, two solid shapes and mild noise: wrong channels, rows or offsets show."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 // max(1, w - 1), y * 255 // max(1, h - 1), ((x + y) * 5) % 256], -1).astype(np.int32)
    img[h // 4:h // 2, w // 4:w // 2] = [250, 30, 40]
    img[(x - w * 3 // 4) ** 2 + (y - h * 3 // 4) ** 2 < (min(w, h) // 5) ** 2] = [20, 200, 60]
    img += rng.integers(-6, 7, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def base_alpha(w=W, h=H):
    y, x = np.mgrid[0:h, 0:w]
    d = np.sqrt((x - w / 2) ** 2 + (y - h / 2) ** 2) / np.sqrt((w / 2) ** 2 + (h / 2) ** 2)
    a = np.clip(255 * (1 - d) + 40, 0, 255).astype(np.uint8)
    a[:, : w // 8] = 0
    a[:, -(w // 8):] = 255
    return a


def rgba(rgb, alpha=None):
    a = np.full(rgb.shape[:2], 255, np.uint8) if alpha is None else alpha
    return np.dstack([rgb, a]).astype(np.uint8)


def png16(path, pixels8, seed):
    """A 16-bit PNG whose samples are v * 257 + d (|d| < 128): any correct rounding to 8 bits gives v."""
    rng = np.random.default_rng(seed)
    wide = np.clip(pixels8.astype(np.int64) * 257 + rng.integers(-100, 100, pixels8.shape), 0, 65535)
    import png  # pypng writes 16-bit RGB(A), which Pillow cannot
    h, w, c = wide.shape
    with open(path, "wb") as out:
        png.Writer(w, h, greyscale=False, alpha=(c == 4), bitdepth=16).write(out, wide.reshape(h, w * c).tolist())


def source_png(name, pixels, icc=None):
    path = os.path.join(TMP, name + ".png")
    Image.fromarray(pixels).save(path, icc_profile=icc) if icc else Image.fromarray(pixels).save(path)
    return path


def run(*args):
    subprocess.run(list(args), check=True, capture_output=True)


def reference(path, frame=None):
    im = Image.open(path)
    if frame is not None:
        im.seek(frame)
    return np.asarray(im.convert("RGBA"))


def record(name, path, fmt, frames, ref, tolerance, orientation=1, loop_count=1, durations=None, icc=None,
           synthesized_profile=False, has_alpha=None, frame_count=None):
    h, w = frames[0].shape[:2]
    expected = []
    for i, f in enumerate(frames):
        f = np.ascontiguousarray(f, dtype=np.uint8)
        assert f.shape == (h, w, 4), (name, f.shape)
        rel = f"modern/expected/{name}" + (f".f{i}" if len(frames) > 1 else "") + ".rgba"
        with open(os.path.join(ROOT, "..", rel), "wb") as out:
            out.write(f.tobytes())
        expected.append(rel)
    entry = {
        "name": name, "file": os.path.relpath(path, os.path.join(ROOT, "..")), "format": fmt,
        "width": w, "height": h, "frames": expected,
        "frameCount": frame_count if frame_count is not None else len(frames),
        "reference": ref, "tolerance": tolerance,
        "hasAlpha": bool(has_alpha) if has_alpha is not None else bool((frames[0][..., 3] < 255).any()),
        "alphaMode": "straight", "orientation": orientation, "loopCount": loop_count,
    }
    if durations is not None:
        entry["durationsMs"] = durations
    if icc is not None:
        rel = f"modern/expected/{name}.icc"
        with open(os.path.join(ROOT, "..", rel), "wb") as out:
            out.write(icc)
        entry["iccProfile"] = rel
    if synthesized_profile:
        entry["synthesizedProfile"] = True
    MANIFEST.append(entry)


def out(name, ext):
    return os.path.join(IMAGES, f"{name}.{ext}")


# ---------------------------------------------------------------- a Display P3 profile

def s15(v):
    return struct.pack(">i", int(round(v * 65536)))


def display_p3_icc():
    """A minimal ICC v2 display profile for Display P3 (P3 primaries, D65, the sRGB curve),
    written here from the published primaries with Bradford adaptation to D50, so that the
    reference conversion (Little CMS through Pillow) owes nothing to this project."""
    def xyz(x, y):
        return np.array([x / y, 1.0, (1 - x - y) / y])
    prim = [xyz(0.680, 0.320), xyz(0.265, 0.690), xyz(0.150, 0.060)]
    white = xyz(0.3127, 0.3290)
    m = np.stack(prim, 1)
    s = np.linalg.solve(m, white)
    m = m * s
    bradford = np.array([[0.8951, 0.2664, -0.1614], [-0.7502, 1.7135, 0.0367], [0.0389, -0.0685, 1.0296]])
    d50 = np.array([0.9642, 1.0, 0.8249])
    lms_src, lms_dst = bradford @ white, bradford @ d50
    adapt = np.linalg.inv(bradford) @ np.diag(lms_dst / lms_src) @ bradford
    m = adapt @ m
    tags = []
    desc_text = b"Display P3 (fixture)\0"
    desc = b"desc" + b"\0" * 4 + struct.pack(">I", len(desc_text)) + desc_text + b"\0" * 4 + b"\0" * 4 + b"\0" * 67
    tags.append((b"desc", desc))
    tags.append((b"wtpt", b"XYZ " + b"\0" * 4 + s15(d50[0]) + s15(d50[1]) + s15(d50[2])))
    for tag, column in ((b"rXYZ", 0), (b"gXYZ", 1), (b"bXYZ", 2)):
        tags.append((tag, b"XYZ " + b"\0" * 4 + s15(m[0, column]) + s15(m[1, column]) + s15(m[2, column])))
    # The sRGB curve as a 1024-entry table (v2 has no parametric curves).
    v = np.linspace(0, 1, 1024)
    lin = np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4)
    curve = b"curv" + b"\0" * 4 + struct.pack(">I", 1024) + b"".join(struct.pack(">H", int(round(x * 65535))) for x in lin)
    for tag in (b"rTRC", b"gTRC", b"bTRC"):
        tags.append((tag, curve))
    tags.append((b"cprt", b"text" + b"\0" * 4 + b"No copyright, fixture\0"))
    offset = 128 + 4 + 12 * len(tags)
    table = struct.pack(">I", len(tags))
    data = b""
    for tag, body in tags:
        while (offset + len(data)) % 4:
            data += b"\0"
        table += tag + struct.pack(">II", offset + len(data), len(body))
        data += body
    size = offset + len(data)
    header = struct.pack(">I", size) + b"lcms" + bytes([2, 0x10, 0, 0]) + b"mntrRGB XYZ " + struct.pack(">6H", 2024, 1, 1, 0, 0, 0)
    header += b"acsp" + b"APPL" + b"\0" * 4 + b"\0" * 4 + b"\0" * 4 + b"\0" * 8 + b"\0" * 4
    header += s15(d50[0]) + s15(d50[1]) + s15(d50[2]) + b"\0" * 4
    header = header.ljust(128, b"\0")
    return header + table + data


# ---------------------------------------------------------------- HEIF

def heif_fixtures():
    rgb = base_rgb(seed=11)
    src = source_png("heif-src", rgb)
    path = out("heif-8bit", "heic")
    run("heif-enc", "-q", "92", "-o", path, src)
    record("heif-8bit", path, "heif", [reference(path)], "pillow-heif", 1)

    for bits in (10, 12):
        src16 = os.path.join(TMP, f"heif-src{bits}.png")
        png16(src16, rgb, bits)
        path = out(f"heif-{bits}bit", "heic")
        run("heif-enc", "-q", "92", "-b", str(bits), "-o", path, src16)
        # pillow-heif's libheif 1.23 reduces to 8 bits its own way: within 3 of a rounding.
        record(f"heif-{bits}bit", path, "heif", [reference(path)], "pillow-heif", 3)

    src = source_png("heif-alpha-src", rgba(rgb, base_alpha()))
    path = out("heif-alpha", "heic")
    run("heif-enc", "-q", "92", "-o", path, src)
    record("heif-alpha", path, "heif", [reference(path)], "pillow-heif", 2)

    p3 = display_p3_icc()
    src = source_png("heif-icc-src", rgb, icc=p3)
    path = out("heif-icc-p3", "heic")
    run("heif-enc", "-q", "92", "-o", path, src)
    record("heif-icc-p3", path, "heif", [reference(path)], "pillow-heif", 1, icc=p3)
    thumbnail_against_profile("heif-icc-p3", path, p3)

    # heif-enc 1.15 writes no nclx box; pillow-heif does.
    path = out("heif-nclx-p3", "heic")
    Image.fromarray(rgb).save(path, quality=92, nclx_profile={
        "color_primaries": 12, "transfer_characteristics": 13, "matrix_coefficients": 6, "full_range_flag": 1})
    record("heif-nclx-p3", path, "heif", [reference(path)], "pillow-heif", 1, synthesized_profile=True)
    thumbnail_against_profile("heif-nclx-p3", path, p3)

    # irot/imir (and clap: 50x36 is coded as 64x64 with a clean aperture), written by
    # pillow-heif from an EXIF orientation. The EXIF it also writes says 1 afterwards.
    odd = base_rgb(50, 36, seed=12)
    stored = {}
    for orientation in range(1, 9):
        exif = Image.Exif()
        exif[0x0112] = orientation
        path = out(f"heif-orientation-{orientation}", "heic")
        Image.fromarray(odd).save(path, exif=exif.tobytes(), quality=95)
        # pillow-heif shows the file upright; the stored pixels are that undone.
        upright = Image.open(path).convert("RGBA")
        stored_pixels = np.asarray(undo_orientation(upright, orientation))
        stored[orientation] = stored_pixels
        record(f"heif-orientation-{orientation}", path, "heif", [stored_pixels], "pillow-heif (orientation undone)",
               2, orientation=orientation)

    # heif-enc copies a JPEG's EXIF (orientation 6 here) and writes a grid (one 64x64
    # tile cropped to 64x48); no irot: HEIF says the EXIF orientation is not applied.
    jpeg = os.path.join(TMP, "heif-exif.jpg")
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(rgb).save(jpeg, quality=95, exif=exif.tobytes())
    path = out("heif-exif-orientation-grid", "heic")
    run("heif-enc", "-q", "92", "-o", path, jpeg)
    record("heif-exif-orientation-grid", path, "heif", [reference(path)], "pillow-heif", 1, orientation=1)

    # A grid of hidden 64-pixel tiles laid out as an iPhone lays out its 512-pixel ones.
    path = out("heif-grid-3x2", "heic")
    subprocess.run([sys.executable, os.path.join(ROOT, "..", "make_heic_grid.py"),
                    source_png("heif-grid-src", base_rgb(180, 120, seed=13)), path,
                    "--width", "180", "--height", "120", "--tile", "64", "--quality", "92"],
                   check=True, capture_output=True)
    record("heif-grid-3x2", path, "heif", [reference(path)], "pillow-heif", 1)

    path = out("heif-thumbnail", "heic")
    run("heif-enc", "-q", "92", "-t", "32", "-o", path, source_png("heif-thumb-src", rgb))
    record("heif-thumbnail", path, "heif", [reference(path)], "pillow-heif", 1)


def undo_orientation(image, orientation):
    """The stored image for an upright one: the inverse of EXIF orientation `orientation`."""
    inverse = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180,
               4: Image.Transpose.FLIP_TOP_BOTTOM, 5: Image.Transpose.TRANSPOSE,
               6: Image.Transpose.ROTATE_90, 7: Image.Transpose.TRANSVERSE, 8: Image.Transpose.ROTATE_270}
    return image.transpose(inverse[orientation]) if orientation in inverse else image


def thumbnail_against_profile(name, path, profile):
    """A same-size 'thumbnail' converted to sRGB, against Little CMS (through Pillow)
    converting the reference decode with the profile."""
    im = Image.open(path).convert("RGB")
    srgb = ImageCms.createProfile("sRGB")
    converted = ImageCms.profileToProfile(
        im, ImageCms.ImageCmsProfile(io.BytesIO(profile)), srgb, renderingIntent=ImageCms.Intent.RELATIVE_COLORIMETRIC,
        flags=ImageCms.Flags.BLACKPOINTCOMPENSATION)
    expected = np.asarray(converted.convert("RGBA"))
    rel = f"modern/expected/thumb-{name}.rgba"
    with open(os.path.join(ROOT, "..", rel), "wb") as f:
        f.write(expected.tobytes())
    THUMBNAILS.append({
        "name": f"colour-{name}", "source": os.path.relpath(path, os.path.join(ROOT, "..")),
        "options": {"width": im.width, "height": im.height, "kernel": "box"},
        "width": im.width, "height": im.height, "frames": [rel],
        "reference": "pillow ImageCms, Display P3 to sRGB", "maxDifference": 6, "meanDifference": 1.0})


# ---------------------------------------------------------------- AVIF

def avif_fixtures():
    rgb = base_rgb(seed=21)
    src = source_png("avif-src", rgb)
    path = out("avif-8bit", "avif")
    run("avifenc", "-s", "6", "--min", "8", "--max", "12", src, path)
    record("avif-8bit", path, "avif", [reference(path)], "Pillow AVIF", 2)

    for bits in (10, 12):
        src16 = os.path.join(TMP, f"avif-src{bits}.png")
        png16(src16, rgb, bits)
        path = out(f"avif-{bits}bit", "avif")
        run("avifenc", "-s", "6", "-d", str(bits), "--min", "8", "--max", "12", src16, path)
        record(f"avif-{bits}bit", path, "avif", [reference(path)], "Pillow AVIF", 3)

    src = source_png("avif-alpha-src", rgba(rgb, base_alpha()))
    path = out("avif-alpha", "avif")
    run("avifenc", "-s", "6", "-l", src, path)
    record("avif-alpha", path, "avif", [reference(path)], "Pillow AVIF", 1)
    path = out("avif-premultiplied", "avif")
    run("avifenc", "-s", "6", "-p", "--min", "4", "--max", "8", src, path)
    record("avif-premultiplied", path, "avif", [reference(path)], "Pillow AVIF", 3)

    path = out("avif-lossless", "avif")
    run("avifenc", "-s", "6", "-l", src_png := source_png("avif-lossless-src", rgb), path)
    record("avif-lossless", path, "avif", [reference(path)], "Pillow AVIF", 0)

    p3 = display_p3_icc()
    path = out("avif-icc-p3", "avif")
    src = source_png("avif-src-opaque", rgb)
    run("avifenc", "-s", "6", "--min", "8", "--max", "12", "--icc", write_tmp("p3.icc", p3), src, path)
    record("avif-icc-p3", path, "avif", [reference(path)], "Pillow AVIF", 2, icc=p3)
    thumbnail_against_profile("avif-icc-p3", path, p3)

    path = out("avif-nclx-p3", "avif")
    run("avifenc", "-s", "6", "--min", "8", "--max", "12", "--cicp", "12/13/6", src, path)
    record("avif-nclx-p3", path, "avif", [reference(path)], "Pillow AVIF", 2, synthesized_profile=True)
    thumbnail_against_profile("avif-nclx-p3", path, p3)

    # irot/imir: every combination, and a clap crop. The reference decodes the file made
    # without them; the orientation is what HEIF says the boxes mean.
    plain = out("avif-transform-none", "avif")
    run("avifenc", "-s", "6", "-l", src_png, plain)
    stored = reference(plain)
    record("avif-transform-none", plain, "avif", [stored], "Pillow AVIF", 0)
    exif = {(0, None): 1, (1, None): 8, (2, None): 3, (3, None): 6, (0, 1): 2, (0, 0): 4, (2, 1): 4, (2, 0): 2,
            (3, 1): 5, (3, 0): 7, (1, 1): 7, (1, 0): 5}
    for (angle, mode), orientation in exif.items():
        if angle == 0 and mode is None:
            continue
        name = f"avif-irot{angle}" + (f"-imir{mode}" if mode is not None else "")
        path = out(name, "avif")
        args = ["avifenc", "-s", "6", "-l", "--irot", str(angle)]
        if mode is not None:
            args += ["--imir", str(mode)]
        run(*args, src_png, path)
        record(name, path, "avif", [stored], "Pillow AVIF of the file without irot/imir", 0, orientation=orientation)
    path = out("avif-clap", "avif")
    run("avifenc", "-s", "6", "-l", "-y", "444", "--crop", "8,6,40,30", src_png, path)
    record("avif-clap", path, "avif", [stored[6:36, 8:48]], "Pillow AVIF of the file without clap, cropped", 0)

    hdr_fixture()

    frames = [base_rgb(seed=s) for s in (31, 32, 33)]
    inputs = [source_png(f"avif-anim-{i}", f) for i, f in enumerate(frames)]
    path = out("avif-animation", "avif")
    run("avifenc", "-s", "8", "-l", "--timescale", "100", "--duration", "10", inputs[0], "--duration", "25",
        inputs[1], "--duration", "40", inputs[2], path)
    # avifenc writes an (opaque) alpha plane for a lossless sequence: the image has an alpha channel.
    record("avif-animation", path, "avif", [reference(path, i) for i in range(3)], "Pillow AVIF", 0,
           loop_count=0, durations=[100, 250, 400], has_alpha=True)


def hdr_fixture():
    """Grey patches at known luminances, PQ-coded in BT.2020, 10 bits; the expected
    thumbnail follows the method ColorSignal documents, written out here on its own:
    PQ to cd/m², over 203 (BT.2408 reference white), identity up to 0.75 then the
    exponential shoulder 0.75 + 0.25 (1 - exp(-(L - 0.75) / 0.25)), sRGB-encoded."""
    nits = [0, 5, 50, 100, 203, 400, 1000, 4000]
    m1, m2, c1, c2, c3 = 0.1593017578125, 78.84375, 0.8359375, 18.8515625, 18.6875

    def pq(n):
        y = (n / 10000) ** m1
        return ((c1 + c2 * y) / (1 + c3 * y)) ** m2

    def expected_srgb(n):
        code = round(pq(n) * 1023) / 1023          # the 10-bit code the file holds
        p = code ** (1 / m2)
        light = 10000 * (max(p - c1, 0) / (c2 - c3 * p)) ** (1 / m1) / 203
        mapped = light if light <= 0.75 else 0.75 + 0.25 * (1 - np.exp(-(light - 0.75) / 0.25))
        mapped = min(mapped, 1.0)
        v = 12.92 * mapped if mapped <= 0.0031308 else 1.055 * mapped ** (1 / 2.4) - 0.055
        return round(v * 255)

    w, h = 8 * len(nits), 8
    wide = np.zeros((h, w, 3), np.uint16)
    for i, n in enumerate(nits):
        wide[:, i * 8:(i + 1) * 8] = round(pq(n) * 1023) * 64   # 10-bit codes in the top bits
    import png
    src = os.path.join(TMP, "avif-pq-src.png")
    with open(src, "wb") as f:
        png.Writer(w, h, greyscale=False, bitdepth=16).write(f, wide.reshape(h, w * 3).tolist())
    path = out("avif-pq", "avif")
    run("avifenc", "-s", "6", "-l", "-d", "10", "-y", "444", "--cicp", "9/16/0", src, path)
    expected = np.zeros((h, w, 4), np.uint8)
    expected[..., 3] = 255
    for i, n in enumerate(nits):
        expected[:, i * 8:(i + 1) * 8, :3] = expected_srgb(n)
    rel = "modern/expected/thumb-avif-pq.rgba"
    with open(os.path.join(ROOT, "..", rel), "wb") as f:
        f.write(expected.tobytes())
    THUMBNAILS.append({
        "name": "colour-avif-pq", "source": os.path.relpath(path, os.path.join(ROOT, "..")),
        "options": {"width": w, "height": h, "kernel": "box"}, "width": w, "height": h, "frames": [rel],
        "reference": "the documented PQ mapping, computed by the generator", "maxDifference": 3,
        "meanDifference": 1.0})


def write_tmp(name, data):
    path = os.path.join(TMP, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


# ---------------------------------------------------------------- JPEG XL

def jxl_fixtures():
    rgb = base_rgb(seed=41)
    src = source_png("jxl-src", rgb)
    path = out("jxl-lossless", "jxl")
    run("cjxl", "-d", "0", src, path)
    record("jxl-lossless", path, "jxl", [reference(path)], "pillow-jxl-plugin", 0)
    path = out("jxl-lossy", "jxl")
    run("cjxl", "-d", "1", src, path)
    record("jxl-lossy", path, "jxl", [reference(path)], "pillow-jxl-plugin", 2)
    path = out("jxl-alpha", "jxl")
    run("cjxl", "-d", "0", source_png("jxl-alpha-src", rgba(rgb, base_alpha())), path)
    record("jxl-alpha", path, "jxl", [reference(path)], "pillow-jxl-plugin", 0)
    src16 = os.path.join(TMP, "jxl-src16.png")
    png16(src16, rgb, 16)
    path = out("jxl-16bit", "jxl")
    run("cjxl", "-d", "0", src16, path)
    record("jxl-16bit", path, "jxl", [reference(path)], "pillow-jxl-plugin", 1)
    jpeg = os.path.join(TMP, "jxl-src.jpg")
    Image.fromarray(base_rgb(64, 48, seed=42)).save(jpeg, quality=90)
    path = out("jxl-from-jpeg", "jxl")
    run("cjxl", jpeg, path)
    record("jxl-from-jpeg", path, "jxl", [reference(path)], "pillow-jxl-plugin", 4)

    frames = [rgba(base_rgb(seed=s)) for s in (51, 52, 53)]
    apng = os.path.join(TMP, "jxl-anim.png")
    Image.fromarray(frames[0]).save(apng, save_all=True, append_images=[Image.fromarray(f) for f in frames[1:]],
                                    duration=[100, 250, 400], loop=0)
    path = out("jxl-animation", "jxl")
    run("cjxl", "-d", "0", apng, path)
    # pillow-jxl-plugin shows one picture, the last frame: the lossless frames are the source's.
    assert (reference(path) == frames[-1]).all()
    record("jxl-animation", path, "jxl", frames, "source (lossless; pillow-jxl-plugin agrees on the last frame)", 0,
           loop_count=0, durations=[100, 250, 400], has_alpha=True)


# ---------------------------------------------------------------- conformance suites

CONFORMANCE = []
# A few files, about 2.5 MB with their references; scripts/conformance.py runs every file.
JXL_SUITE = ["alpha_premultiplied", "blendmodes", "upsampling", "patches_lossless", "lz77_flower",
             "bench_oriented_brg"]
AVIF_SUITE = ["Microsoft/Chimera_8bit_cropped_480x256.avif", "Microsoft/Monochrome.avif",
              "Microsoft/still_picture.avif", "Microsoft/Irvine_CA.avif"]


def git_show(repo, path):
    return subprocess.run(["git", "-C", repo, "show", f"HEAD:{path}"], check=True, capture_output=True).stdout


def clap_rect(data):
    """The primary item's clean aperture as (x, y, w, h), rounded as libheif rounds it, or None."""
    def boxes(start, end):
        o = start
        while o + 8 <= end:
            size, kind = struct.unpack(">I4s", data[o:o + 8])
            yield kind, o + 8, o + size
            o += size
    for kind, s, e in boxes(0, len(data)):
        if kind != b"meta":
            continue
        for k2, s2, e2 in boxes(s + 4, e):
            if k2 != b"iprp":
                continue
            for k3, s3, e3 in boxes(s2, e2):
                if k3 != b"ipco":
                    continue
                ispe = clap = None
                for k4, s4, e4 in boxes(s3, e3):
                    if k4 == b"ispe":
                        ispe = struct.unpack(">II", data[s4 + 4:s4 + 12])
                    if k4 == b"clap":
                        clap = struct.unpack(">IIIIiIiI", data[s4:s4 + 32])
                if ispe and clap:
                    (w, h), (wn, wd, hn, hd, ho, hod, vo, vod) = ispe, clap
                    cx, cy = ho / hod + (w - 1) / 2, vo / vod + (h - 1) / 2
                    left, right = round(cx - (wn / wd - 1) / 2), round(cx + (wn / wd - 1) / 2)
                    top, bottom = round(cy - (hn / hd - 1) / 2), round(cy + (hn / hd - 1) / 2)
                    return left, top, right - left + 1, bottom - top + 1
    return None


def conformance_fixtures():
    """A few files of JPEG XL's conformance suite (BSD, with their official reference PNGs,
    shown upright) and of the AVIF test files (Microsoft's, BSD; references by Pillow's
    AVIF plugin, which shows stored pixels without clap: the generator crops them). The
    whole suites, and HEIF's (Nokia's, not redistributed), run with scripts/conformance.py."""
    folder = os.path.join(ROOT, "conformance")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    jxl = os.environ.get("JXL_CONFORMANCE", "/work/.mirror/libjxl+conformance/repo")
    for name in JXL_SUITE:
        path = os.path.join(folder, f"jxl-{name}.jxl")
        with open(path, "wb") as f:
            f.write(git_show(jxl, f"testcases/{name}/input.jxl"))
        ref = os.path.join(folder, f"jxl-{name}.ref.png")
        with open(ref, "wb") as f:
            f.write(git_show(jxl, f"testcases/{name}/ref.png"))
        CONFORMANCE.append({"file": os.path.relpath(path, os.path.join(ROOT, "..")),
                            "reference": os.path.relpath(ref, os.path.join(ROOT, "..")),
                            "upright": True, "tolerance": 2, "source": "libjxl/conformance (official ref.png)"})
    avif = os.environ.get("AVIF_TESTFILES", "/work/.mirror/AOMediaCodec+av1-avif/repo")
    for name in AVIF_SUITE:
        data = git_show(avif, "testFiles/" + name)
        base = os.path.basename(name)[:-5]
        path = os.path.join(folder, f"avif-{base}.avif")
        with open(path, "wb") as f:
            f.write(data)
        im = Image.open(path).convert("RGBA")
        rect = clap_rect(data)
        if rect:
            x, y, w, h = rect
            im = im.crop((x, y, x + w, y + h))
        ref = os.path.join(folder, f"avif-{base}.ref.png")
        im.save(ref)
        CONFORMANCE.append({"file": os.path.relpath(path, os.path.join(ROOT, "..")),
                            "reference": os.path.relpath(ref, os.path.join(ROOT, "..")),
                            "upright": False, "tolerance": 4,
                            "source": "AOMediaCodec/av1-avif testFiles (Pillow AVIF, stored pixels" +
                                      (", clap applied here)" if rect else ")")})


# ---------------------------------------------------------------- hostile and large

def patched_ispe(source, target, width, height):
    """A copy of `source` whose every ispe box claims width x height (same length)."""
    data = bytearray(open(source, "rb").read())
    at = 0
    while (at := data.find(b"ispe", at)) > 0:
        data[at + 8:at + 16] = struct.pack(">II", width, height)
        at += 4
    with open(target, "wb") as f:
        f.write(data)


def hostile_and_large_fixtures():
    hostile = os.path.join(ROOT, "hostile")
    shutil.rmtree(hostile, ignore_errors=True)
    os.makedirs(hostile)
    patched_ispe(out("heif-8bit", "heic"), os.path.join(hostile, "heif-ispe-60000x60000.heic"), 60000, 60000)
    patched_ispe(out("avif-8bit", "avif"), os.path.join(hostile, "avif-ispe-60000x60000.avif"), 60000, 60000)
    patched_ispe(out("heif-8bit", "heic"), os.path.join(hostile, "heif-ispe-0x0.heic"), 0, 0)
    # A lossy JPEG XL large enough for its DC (1/8) to serve a thumbnail.
    src = source_png("jxl-large-src", base_rgb(1024, 768, seed=61))
    run("cjxl", "-d", "1", src, out("jxl-1024x768", "jxl"))


def main():
    for folder in (IMAGES, EXPECTED):
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
    heif_fixtures()
    avif_fixtures()
    jxl_fixtures()
    conformance_fixtures()
    hostile_and_large_fixtures()
    with open(os.path.join(ROOT, "manifest.json"), "w") as f:
        json.dump({"fixtures": MANIFEST, "thumbnails": THUMBNAILS, "conformance": CONFORMANCE}, f, indent=1)
        f.write("\n")
    shutil.rmtree(TMP)
    print(f"{len(MANIFEST)} fixtures, {len(THUMBNAILS)} thumbnails")


if __name__ == "__main__":
    main()
