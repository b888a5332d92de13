#!/usr/bin/env python3
"""generate.py: writes the decoder fixtures and their expected pixels.

    python3 Fixtures/generate.py          # from the repository root

Writes Fixtures/images/*, Fixtures/expected/*.rgba (raw 8-bit RGBA, straight alpha
unless the manifest says otherwise), Fixtures/hostile/* and Fixtures/manifest.json.
Run once on a developer machine and commit the output; the tests only read it.
Needs: Pillow, numpy, pypng, tifffile (pip); tiffcp (libtiff-tools), ImageMagick 6,
gcc, libjpeg, liblcms2, and the profiles of Debian's icc-profiles-free.

Thumbnails (manifest "thumbnails"): Pillow makes the references with the same
algorithm the library documents: premultiplied alpha (Pillow's resize premultiplies
RGBA), box reduction by floor(scale / 2) then the kernel (reducing_gap=2.0), JPEG
DCT scaling through draft(), orientation through ImageOps.exif_transpose, colour
through ImageCms (Little CMS), relative colorimetric with black point compensation.

Where the references come from (never from this project's decoders):
  * "pillow": Pillow decodes the fixture (its wheels bundle their own libjpeg-turbo,
    libwebp, libtiff and zlib builds) and converts it to RGBA.
  * "imagemagick": ImageMagick 6 decodes it, where Pillow rounds differently from
    browsers (16-bit BMP channels).
  * "source": the pixels the fixture was built from, for what Pillow cannot stand
    for: 16-bit samples (Pillow keeps the high byte; the expected values are the
    8-bit source, and the 16-bit samples are v * 257 + d with |d| < 128, so any
    correct rounding gives v back), GIF animations composited as browsers show
    them, TIFF associated alpha kept premultiplied. For every lossless fixture
    the generator also checks that Pillow and the source agree where both apply.
"""
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import png
import tifffile
from PIL import Image, ImageCms, ImageOps

ROOT = os.path.dirname(os.path.abspath(__file__))
IMAGES = os.path.join(ROOT, "images")
EXPECTED = os.path.join(ROOT, "expected")
HOSTILE = os.path.join(ROOT, "hostile")
PROFILES = os.path.join(ROOT, "profiles")
THUMBNAILS = []
TMP = tempfile.mkdtemp(prefix="fixtures.")
MANIFEST = []

W, H = 48, 32  # most fixtures; a few use odd sizes to reach partial blocks and tiles


# ---------------------------------------------------------------- source pixels

def base_rgb(w=W, h=H, seed=1):
    """Gradients, two solid shapes and noise: wrong channels, rows or offsets show."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 // max(1, w - 1), y * 255 // max(1, h - 1), ((x + y) * 7) % 256], -1).astype(np.int32)
    img[h // 4:h // 2, w // 4:w // 2] = [250, 30, 40]
    img[(x - w * 3 // 4) ** 2 + (y - h * 3 // 4) ** 2 < (min(w, h) // 5) ** 2] = [20, 200, 60]
    img += rng.integers(-12, 13, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def base_alpha(w=W, h=H):
    """Radial alpha with a fully transparent and a fully opaque column band."""
    y, x = np.mgrid[0:h, 0:w]
    d = np.sqrt((x - w / 2) ** 2 + (y - h / 2) ** 2) / np.sqrt((w / 2) ** 2 + (h / 2) ** 2)
    a = np.clip(255 * (1 - d) + 40, 0, 255).astype(np.uint8)
    a[:, : max(1, w // 8)] = 0
    a[:, -max(1, w // 8):] = 255
    return a


def rgba(rgb, alpha=None):
    a = np.full(rgb.shape[:2], 255, np.uint8) if alpha is None else alpha
    return np.dstack([rgb, a]).astype(np.uint8)


def gray_to_rgba(g, alpha=None):
    return rgba(np.dstack([g, g, g]), alpha)


def widen16(v8, seed):
    """16-bit samples that round back to v8: v * 257 + d, d in [-128, 127]."""
    rng = np.random.default_rng(seed)
    d = rng.integers(-128, 128, v8.shape)
    return np.clip(v8.astype(np.int64) * 257 + d, 0, 65535).astype(np.uint16)


def pillow_rgba(path, frame=None):
    im = Image.open(path)
    if frame is not None:
        im.seek(frame)
    return np.asarray(im.convert("RGBA"))


def imagemagick_rgba(path):
    """ImageMagick 6 (convert-im6.q16) as a second independent decoder."""
    im = Image.open(path)
    raw = subprocess.run(["convert-im6.q16", path, "-depth", "8", "rgba:-"], check=True, capture_output=True).stdout
    return np.frombuffer(raw, np.uint8).reshape(im.height, im.width, 4)


# ---------------------------------------------------------------- bookkeeping

def record(name, path, fmt, frames, reference, tolerance=0, has_alpha=None, orientation=1, loop_count=1,
           durations=None, icc=None, frame_count=None, alpha_mode="straight", check_source=None, **extra):
    """Saves the expected frames and a manifest entry; checks Pillow against the source when asked."""
    frames = [np.ascontiguousarray(f, dtype=np.uint8) for f in frames]
    h, w = frames[0].shape[:2]
    expected = []
    for i, f in enumerate(frames):
        assert f.shape == (h, w, 4), (name, f.shape)
        rel = f"expected/{name}" + (f".f{i}" if len(frames) > 1 else "") + ".rgba"
        with open(os.path.join(ROOT, rel), "wb") as out:
            out.write(f.tobytes())
        expected.append(rel)
    if check_source is not None:
        diff = np.abs(check_source.astype(int) - frames[0].astype(int)).max()
        if diff != 0:
            sys.exit(f"{name}: Pillow and the source disagree (max difference {diff})")
    entry = {
        "name": name,
        "file": os.path.relpath(path, ROOT),
        "format": fmt,
        "width": w,
        "height": h,
        "frames": expected,
        "frameCount": frame_count if frame_count is not None else len(frames),
        "reference": reference,
        "tolerance": tolerance,
        "hasAlpha": bool(has_alpha) if has_alpha is not None else bool((frames[0][..., 3] < 255).any()),
        "alphaMode": alpha_mode,
        "orientation": orientation,
        "loopCount": loop_count,
    }
    if durations is not None:
        entry["durationsMs"] = durations
    if icc is not None:
        rel = f"expected/{name}.icc"
        with open(os.path.join(ROOT, rel), "wb") as out:
            out.write(icc)
        entry["iccProfile"] = rel
    entry.update(extra)
    MANIFEST.append(entry)


def image_path(name, ext):
    return os.path.join(IMAGES, f"{name}.{ext}")


def srgb_profile():
    """Little CMS's sRGB profile with a fixed creation date (bytes 24-35) and no
    profile ID (bytes 84-99, optional), so the fixtures are the same on every run."""
    icc = bytearray(ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes())
    icc[24:36] = struct.pack(">6H", 2024, 1, 1, 0, 0, 0)
    icc[84:100] = bytes(16)
    return bytes(icc)


def exif_with_orientation(value):
    exif = Image.Exif()
    exif[0x0112] = value
    return exif.tobytes()


# ---------------------------------------------------------------- PNG

def png_fixtures():
    rgb = base_rgb(seed=11)
    alpha = base_alpha()
    gray = rgb[..., 1]

    def write(name, rows, w, h, **kw):
        path = image_path(name, "png")
        with open(path, "wb") as f:
            kw.setdefault("greyscale", False)
            png.Writer(w, h, **kw).write(f, rows)
        return path

    # Gray at every depth: values spread over the whole range of the depth.
    for bits in (1, 2, 4, 8):
        levels = (gray.astype(int) * ((1 << bits) - 1) + 127) // 255
        path = write(f"png-gray{bits}", levels.tolist(), W, H, greyscale=True, bitdepth=bits)
        scaled = (levels * 255 // ((1 << bits) - 1)).astype(np.uint8)
        record(f"png-gray{bits}", path, "png", [pillow_rgba(path)], "pillow", check_source=gray_to_rgba(scaled))

    path = write("png-graya8", np.dstack([gray, alpha]).reshape(H, -1).tolist(), W, H, greyscale=True, alpha=True)
    record("png-graya8", path, "png", [pillow_rgba(path)], "pillow", check_source=gray_to_rgba(gray, alpha))
    path = write("png-rgb8", rgb.reshape(H, -1).tolist(), W, H)
    record("png-rgb8", path, "png", [pillow_rgba(path)], "pillow", check_source=rgba(rgb))
    path = write("png-rgba8", rgba(rgb, alpha).reshape(H, -1).tolist(), W, H, alpha=True)
    record("png-rgba8", path, "png", [pillow_rgba(path)], "pillow", check_source=rgba(rgb, alpha))

    # 16 bits: the expected pixels are the 8-bit source (see the module comment).
    g16 = widen16(gray, 1)
    path = write("png-gray16", g16.tolist(), W, H, greyscale=True, bitdepth=16)
    record("png-gray16", path, "png", [gray_to_rgba(gray)], "source")
    path = write("png-graya16", np.dstack([g16, widen16(alpha, 2)]).reshape(H, -1).tolist(), W, H,
                 greyscale=True, alpha=True, bitdepth=16)
    record("png-graya16", path, "png", [gray_to_rgba(gray, alpha)], "source")
    path = write("png-rgb16", widen16(rgb, 3).reshape(H, -1).tolist(), W, H, bitdepth=16)
    record("png-rgb16", path, "png", [rgba(rgb)], "source")
    path = write("png-rgba16", widen16(rgba(rgb, alpha), 4).reshape(H, -1).tolist(), W, H, alpha=True, bitdepth=16)
    record("png-rgba16", path, "png", [rgba(rgb, alpha)], "source")

    # Palettes at every depth, and one with alpha entries (tRNS).
    rng = np.random.default_rng(5)
    for bits in (1, 2, 4, 8):
        count = 1 << bits
        palette = [tuple(int(v) for v in rng.integers(0, 256, 3)) for _ in range(count)]
        index = (gray.astype(int) * count) // 256
        path = write(f"png-palette{bits}", index.tolist(), W, H, palette=palette, bitdepth=bits)
        source = np.array(palette, np.uint8)[index]
        record(f"png-palette{bits}", path, "png", [pillow_rgba(path)], "pillow", check_source=rgba(source))
    palette = [(int(r), int(g), int(b), int(a)) for r, g, b, a in rng.integers(0, 256, (256, 4))]
    palette[0] = (9, 9, 9, 0)
    index = gray.astype(int)
    path = write("png-palette8-trns", index.tolist(), W, H, palette=palette, bitdepth=8)
    record("png-palette8-trns", path, "png", [pillow_rgba(path)], "pillow",
           check_source=np.array(palette, np.uint8)[index])

    # Colour-key transparency (tRNS on gray and RGB).
    key = int(gray[0, 0])
    path = write("png-gray8-trns", gray.tolist(), W, H, greyscale=True, transparent=key)
    record("png-gray8-trns", path, "png", [pillow_rgba(path)], "pillow",
           check_source=gray_to_rgba(gray, np.where(gray == key, 0, 255).astype(np.uint8)))
    keyed = rgb.copy()
    keyed[4:10, 4:10] = [1, 2, 3]
    path = write("png-rgb8-trns", keyed.reshape(H, -1).tolist(), W, H, transparent=(1, 2, 3))
    mask = np.all(keyed == [1, 2, 3], -1)
    record("png-rgb8-trns", path, "png", [pillow_rgba(path)], "pillow",
           check_source=rgba(keyed, np.where(mask, 0, 255).astype(np.uint8)))

    # Adam7, on odd sizes so passes have partial rows and columns.
    w, h = 37, 23
    rgb_odd, alpha_odd = base_rgb(w, h, 12), base_alpha(w, h)
    path = write("png-rgba8-interlaced", rgba(rgb_odd, alpha_odd).reshape(h, -1).tolist(), w, h, alpha=True,
                 interlace=True)
    record("png-rgba8-interlaced", path, "png", [pillow_rgba(path)], "pillow", check_source=rgba(rgb_odd, alpha_odd))
    index = (rgb_odd[..., 0].astype(int) * 16) // 256
    palette = [tuple(int(v) for v in rng.integers(0, 256, 3)) for _ in range(16)]
    path = write("png-palette4-interlaced", index.tolist(), w, h, palette=palette, bitdepth=4, interlace=True)
    record("png-palette4-interlaced", path, "png", [pillow_rgba(path)], "pillow",
           check_source=rgba(np.array(palette, np.uint8)[index]))
    path = write("png-gray16-interlaced", widen16(rgb_odd[..., 2], 7).tolist(), w, h, greyscale=True, bitdepth=16,
                 interlace=True)
    record("png-gray16-interlaced", path, "png", [gray_to_rgba(rgb_odd[..., 2])], "source")

    # Metadata: eXIf orientation and an iCCP profile.
    icc = srgb_profile()
    path = image_path("png-exif-icc", "png")
    Image.fromarray(rgb).save(path, exif=exif_with_orientation(6), icc_profile=icc)
    record("png-exif-icc", path, "png", [pillow_rgba(path)], "pillow", orientation=6, icc=icc,
           check_source=rgba(rgb))


# ---------------------------------------------------------------- JPEG

JPEG_TOLERANCE = 2  # Pillow's libjpeg-turbo 3.x against the system's 2.1: same IDCT, allow rounding slack


def jpeg_fixtures():
    rgb = base_rgb(seed=21)
    im = Image.fromarray(rgb)
    for name, kw in [
        ("jpeg-420", dict(subsampling=2)),
        ("jpeg-422", dict(subsampling=1)),
        ("jpeg-444", dict(subsampling=0)),
        ("jpeg-progressive", dict(subsampling=2, progressive=True)),
        ("jpeg-restart", dict(subsampling=2, restart_marker_blocks=1)),
    ]:
        path = image_path(name, "jpg")
        im.save(path, quality=90, **kw)
        record(name, path, "jpeg", [pillow_rgba(path)], "pillow", tolerance=JPEG_TOLERANCE, has_alpha=False)

    odd = Image.fromarray(base_rgb(37, 23, 22))
    path = image_path("jpeg-420-odd", "jpg")
    odd.save(path, quality=90, subsampling=2)
    record("jpeg-420-odd", path, "jpeg", [pillow_rgba(path)], "pillow", tolerance=JPEG_TOLERANCE, has_alpha=False)

    path = image_path("jpeg-gray", "jpg")
    im.convert("L").save(path, quality=90)
    record("jpeg-gray", path, "jpeg", [pillow_rgba(path)], "pillow", tolerance=JPEG_TOLERANCE, has_alpha=False)

    # CMYK: Pillow writes Adobe (inverted) CMYK; its RGB conversion is (255 - C)(255 - K) / 255.
    cmyk = np.dstack([255 - rgb, np.random.default_rng(3).integers(0, 80, rgb.shape[:2])]).astype(np.uint8)
    path = image_path("jpeg-cmyk", "jpg")
    Image.fromarray(cmyk, "CMYK").save(path, quality=92)
    record("jpeg-cmyk", path, "jpeg", [pillow_rgba(path)], "pillow", tolerance=JPEG_TOLERANCE, has_alpha=False)

    # YCCK: written by a small libjpeg program (no Python writer makes YCCK).
    helper = os.path.join(TMP, "ycck")
    subprocess.run(["gcc", "-O2", "-o", helper, os.path.join(ROOT, "tools", "ycck.c"), "-ljpeg"], check=True)
    raw = os.path.join(TMP, "in.cmyk")
    cmyk.tofile(raw)
    path = image_path("jpeg-ycck", "jpg")
    subprocess.run([helper, raw, str(W), str(H), path], check=True)
    assert Image.open(path).mode == "CMYK"
    record("jpeg-ycck", path, "jpeg", [pillow_rgba(path)], "pillow", tolerance=JPEG_TOLERANCE, has_alpha=False)

    # Orientation 1 to 8 in EXIF (APP1).
    for value in range(1, 9):
        path = image_path(f"jpeg-orientation{value}", "jpg")
        im.save(path, quality=90, exif=exif_with_orientation(value))
        record(f"jpeg-orientation{value}", path, "jpeg", [pillow_rgba(path)], "pillow", tolerance=JPEG_TOLERANCE,
               has_alpha=False, orientation=value)

    # An ICC profile too large for one APP2 marker: split across chunks.
    big = bytes(np.random.default_rng(9).integers(0, 256, 150_000, dtype=np.uint8))
    path = image_path("jpeg-icc-multichunk", "jpg")
    im.save(path, quality=90, icc_profile=big)
    record("jpeg-icc-multichunk", path, "jpeg", [pillow_rgba(path)], "pillow", tolerance=JPEG_TOLERANCE,
           has_alpha=False, icc=big)


# ---------------------------------------------------------------- GIF

def lzw_encode(indices, min_code_size):
    """GIF's variable-width LZW, codes packed LSB first."""
    clear, end = 1 << min_code_size, (1 << min_code_size) + 1
    out, acc, nbits = bytearray(), 0, 0

    def emit(code, width):
        nonlocal acc, nbits
        acc |= code << nbits
        nbits += width
        while nbits >= 8:
            out.append(acc & 0xFF)
            acc >>= 8
            nbits -= 8

    def reset():
        return {bytes([i]): i for i in range(clear)}, end + 1, min_code_size + 1

    table, next_code, width = reset()
    emit(clear, width)
    word = b""
    for k in indices:
        candidate = word + bytes([k])
        if candidate in table:
            word = candidate
            continue
        emit(table[word], width)
        if next_code < 4095:
            table[candidate] = next_code
            next_code += 1
            # The decoder adds its entry one code later, hence "greater than".
            if next_code > (1 << width) and width < 12:
                width += 1
        else:
            emit(clear, width)
            table, next_code, width = reset()
        word = bytes([k])
    emit(table[word], width)
    emit(end, width)
    if nbits:
        out.append(acc & 0xFF)
    return bytes(out)


def gif_file(width, height, global_palette, frames, loop=None, background=0):
    """frames: dicts with indices (2-D), left, top, palette (local) or None, disposal, delay (cs),
    transparent (index or None), interlace."""
    def table(palette):
        size = max(2, 1 << (len(palette) - 1).bit_length())
        data = bytearray()
        for i in range(size):
            data += bytes(palette[i] if i < len(palette) else (0, 0, 0))
        return data, (size.bit_length() - 2)

    out = bytearray(b"GIF89a")
    gct, gct_bits = table(global_palette)
    out += struct.pack("<HHBBB", width, height, 0x80 | 0x70 | gct_bits, background, 0)
    out += gct
    if loop is not None:
        out += b"\x21\xFF\x0BNETSCAPE2.0\x03\x01" + struct.pack("<H", loop) + b"\x00"
    for f in frames:
        transparent = f.get("transparent")
        packed = (f.get("disposal", 0) << 2) | (1 if transparent is not None else 0)
        out += b"\x21\xF9\x04" + struct.pack("<BHB", packed, f.get("delay", 0), transparent or 0) + b"\x00"
        idx = np.asarray(f["indices"], np.uint8)
        h, w = idx.shape
        local = f.get("palette")
        flags = 0x40 if f.get("interlace") else 0
        if local is not None:
            lct, lct_bits = table(local)
            flags |= 0x80 | lct_bits
        out += b"\x2C" + struct.pack("<HHHHB", f["left"], f["top"], w, h, flags)
        if local is not None:
            out += lct
        rows = list(range(h))
        if f.get("interlace"):
            rows = [y for start, step in ((0, 8), (4, 8), (2, 4), (1, 2)) for y in range(start, h, step)]
        data = lzw_encode(idx[rows].reshape(-1).tolist(), 8)
        out += b"\x08"
        for i in range(0, len(data), 255):
            chunk = data[i:i + 255]
            out += bytes([len(chunk)]) + chunk
        out += b"\x00"
    out += b"\x3B"
    return bytes(out)


def composite_gif(width, height, global_palette, frames):
    """The frames as browsers show them: the canvas starts transparent; disposal 2 clears
    the frame's area to transparent, 3 restores what was under it; pixels off the canvas are dropped."""
    canvas = np.zeros((height, width, 4), np.uint8)
    shown, pending = [], None
    for f in frames:
        if pending is not None:
            kind, (x0, y0, x1, y1), saved = pending
            if kind == 2:
                canvas[y0:y1, x0:x1] = 0
            elif kind == 3:
                canvas[y0:y1, x0:x1] = saved
        idx = np.asarray(f["indices"], np.uint8)
        h, w = idx.shape
        x0, y0 = min(f["left"], width), min(f["top"], height)
        x1, y1 = min(f["left"] + w, width), min(f["top"] + h, height)
        pending = (f.get("disposal", 0), (x0, y0, x1, y1), canvas[y0:y1, x0:x1].copy())
        palette = np.array(f.get("palette") or global_palette, np.uint8)
        region = idx[: y1 - y0, : x1 - x0]
        colors = palette[np.minimum(region, len(palette) - 1)]
        draw = region != (f["transparent"] if f.get("transparent") is not None else -1)
        target = canvas[y0:y1, x0:x1]
        target[draw, :3] = colors[draw]
        target[draw, 3] = 255
        shown.append(canvas.copy())
    return shown


def gif_fixtures():
    rng = np.random.default_rng(31)
    palette = [tuple(int(v) for v in c) for c in rng.integers(0, 256, (256, 3))]

    def indices(w, h, seed):
        return np.random.default_rng(seed).integers(0, 256, (h, w)).astype(np.uint8)

    def write(name, width, height, frames, loop=None, compare_pillow=True):
        path = image_path(name, "gif")
        with open(path, "wb") as out:
            out.write(gif_file(width, height, palette, frames, loop))
        shown = composite_gif(width, height, palette, frames)
        if compare_pillow:  # the GIF writer and compositor, checked against an independent decoder
            for i, expected in enumerate(shown):
                got = pillow_rgba(path, i)
                opaque = expected[..., 3] == 255
                if not np.array_equal(got[opaque], expected[opaque]):
                    sys.exit(f"{name}: frame {i} differs from Pillow's decode")
        return path, shown

    path, shown = write("gif-still", W, H, [dict(indices=indices(W, H, 1), left=0, top=0)])
    record("gif-still", path, "gif", shown, "source+pillow", has_alpha=False)

    frame = indices(W, H, 2)
    frame[5:12, 5:20] = 7
    path, shown = write("gif-transparent", W, H, [dict(indices=frame, left=0, top=0, transparent=7, interlace=True)])
    record("gif-transparent", path, "gif", shown, "source+pillow", has_alpha=True)

    # Every disposal, a local colour table, interlacing, delays, a loop count.
    local = [tuple(int(v) for v in c) for c in rng.integers(0, 256, (16, 3))]
    small = indices(20, 12, 4)
    small[0:4, 0:4] = 3
    frames = [
        dict(indices=indices(W, H, 3), left=0, top=0, disposal=1, delay=10),
        dict(indices=small, left=6, top=4, disposal=2, delay=20, transparent=3),
        dict(indices=indices(16, 16, 5) % 16, left=20, top=10, disposal=3, delay=30, palette=local, interlace=True),
        dict(indices=indices(10, 10, 6), left=30, top=2, disposal=0, delay=40),
        dict(indices=indices(8, 8, 7), left=2, top=20, disposal=1, delay=0),
    ]
    # Pillow fills a disposed area with the background colour; browsers clear it, as the
    # compositor here does, so this one is not compared with Pillow.
    path, shown = write("gif-animation", W, H, frames, loop=3, compare_pillow=False)
    record("gif-animation", path, "gif", shown, "source", has_alpha=True, loop_count=3,
           durations=[100, 200, 300, 400, 0])

    # Frames that overrun the canvas on the right and at the bottom.
    frames = [
        dict(indices=indices(W, H, 8), left=0, top=0, disposal=1, delay=5),
        dict(indices=indices(30, 20, 9), left=W - 10, top=H - 8, disposal=1, delay=5),
        dict(indices=indices(12, 12, 10), left=W + 5, top=0, disposal=1, delay=5),
    ]
    # Pillow grows the canvas to fit such frames; browsers clip them.
    path, shown = write("gif-overrun", W, H, frames, loop=0, compare_pillow=False)
    record("gif-overrun", path, "gif", shown, "source", has_alpha=False, loop_count=0, durations=[50, 50, 50])

    # An animation without NETSCAPE2.0: plays once.
    frames = [dict(indices=indices(W, H, 11), left=0, top=0, delay=7),
              dict(indices=indices(W, H, 12), left=0, top=0, delay=8)]
    path, shown = write("gif-no-loop", W, H, frames, loop=None)
    record("gif-no-loop", path, "gif", shown, "source+pillow", has_alpha=False, loop_count=1, durations=[70, 80])


# ---------------------------------------------------------------- TIFF

def tiffcp(source, name, *args):
    path = image_path(name, "tif")
    subprocess.run(["tiffcp", *args, source, path], check=True)
    return path


def tiff_fixtures():
    rgb = base_rgb(seed=41)
    alpha = base_alpha()
    gray = rgb[..., 0]

    base = os.path.join(TMP, "rgb.tif")
    tifffile.imwrite(base, rgb, photometric="rgb", rowsperstrip=8)
    for name, args in [
        ("tiff-rgb-none", ["-c", "none", "-r", "8"]),
        ("tiff-rgb-lzw", ["-c", "lzw:2", "-r", "8"]),
        ("tiff-rgb-deflate", ["-c", "zip:2", "-r", "8"]),
        ("tiff-rgb-packbits", ["-c", "packbits", "-r", "8"]),
        ("tiff-rgb-onestrip", ["-c", "lzw", "-r", str(H)]),
    ]:
        path = tiffcp(base, name, *args)
        record(name, path, "tiff", [pillow_rgba(path)], "pillow", check_source=rgba(rgb))
    path = tiffcp(base, "tiff-rgb-jpeg", "-c", "jpeg:90", "-r", "16")
    record("tiff-rgb-jpeg", path, "tiff", [pillow_rgba(path)], "pillow", tolerance=JPEG_TOLERANCE, has_alpha=False)

    path = image_path("tiff-rgba", "tif")
    tifffile.imwrite(path, rgba(rgb, alpha), photometric="rgb", extrasamples=["unassalpha"], compression="zlib",
                     rowsperstrip=5)
    record("tiff-rgba", path, "tiff", [pillow_rgba(path)], "pillow", check_source=rgba(rgb, alpha))

    # Associated alpha stays premultiplied: the expected values are the stored ones.
    premultiplied = rgba((rgb.astype(int) * alpha[..., None] // 255).astype(np.uint8), alpha)
    path = image_path("tiff-rgba-associated", "tif")
    tifffile.imwrite(path, premultiplied, photometric="rgb", extrasamples=["assocalpha"])
    record("tiff-rgba-associated", path, "tiff", [premultiplied], "source", alpha_mode="premultiplied")

    path = image_path("tiff-gray8", "tif")
    tifffile.imwrite(path, gray, photometric="minisblack", compression="zlib")
    record("tiff-gray8", path, "tiff", [pillow_rgba(path)], "pillow", check_source=gray_to_rgba(gray))
    path = image_path("tiff-gray8-miniswhite", "tif")
    tifffile.imwrite(path, 255 - gray, photometric="miniswhite")
    record("tiff-gray8-miniswhite", path, "tiff", [pillow_rgba(path)], "pillow", check_source=gray_to_rgba(gray))

    path = image_path("tiff-gray16", "tif")
    tifffile.imwrite(path, widen16(gray, 1), photometric="minisblack", compression="zlib")
    record("tiff-gray16", path, "tiff", [gray_to_rgba(gray)], "source")
    path = image_path("tiff-rgb16", "tif")
    tifffile.imwrite(path, widen16(rgb, 2), photometric="rgb")
    record("tiff-rgb16", path, "tiff", [rgba(rgb)], "source")
    path = image_path("tiff-rgba16", "tif")
    tifffile.imwrite(path, widen16(rgba(rgb, alpha), 3), photometric="rgb", extrasamples=["unassalpha"],
                     compression="zlib")
    record("tiff-rgba16", path, "tiff", [rgba(rgb, alpha)], "source")

    rng = np.random.default_rng(42)
    palette = rng.integers(0, 256, (256, 3)).astype(np.uint8)
    path = image_path("tiff-palette8", "tif")
    tifffile.imwrite(path, gray, photometric="palette", colormap=(palette.T.astype(np.uint16) * 257))
    record("tiff-palette8", path, "tiff", [pillow_rgba(path)], "pillow", check_source=rgba(palette[gray]))
    index4 = (gray >> 4).astype(np.uint8)
    path = image_path("tiff-palette4", "tif")
    im = Image.fromarray(index4, "P")
    im.putpalette(palette[:16].reshape(-1).tolist())
    im.save(path, bits=4)
    record("tiff-palette4", path, "tiff", [pillow_rgba(path)], "pillow", check_source=rgba(palette[index4]))

    bilevel = (gray > 128)
    path = image_path("tiff-bilevel-g4", "tif")
    Image.fromarray(bilevel).save(path, compression="group4")
    record("tiff-bilevel-g4", path, "tiff", [pillow_rgba(path)], "pillow",
           check_source=gray_to_rgba(np.where(bilevel, 255, 0).astype(np.uint8)))

    cmyk = np.dstack([255 - rgb, rng.integers(0, 80, rgb.shape[:2])]).astype(np.uint8)
    path = image_path("tiff-cmyk", "tif")
    tifffile.imwrite(path, cmyk, photometric="separated")
    record("tiff-cmyk", path, "tiff", [pillow_rgba(path)], "pillow", has_alpha=False)

    # Tiles whose edges overhang the image, and separate planes.
    w, h = 40, 28
    rgb_odd, alpha_odd = base_rgb(w, h, 43), base_alpha(w, h)
    path = image_path("tiff-tiled", "tif")
    tifffile.imwrite(path, rgb_odd, photometric="rgb", tile=(16, 16), compression="zlib")
    record("tiff-tiled", path, "tiff", [pillow_rgba(path)], "pillow", check_source=rgba(rgb_odd))
    path = image_path("tiff-tiled-rgba16", "tif")
    tifffile.imwrite(path, widen16(rgba(rgb_odd, alpha_odd), 4), photometric="rgb", tile=(16, 16),
                     extrasamples=["unassalpha"])
    record("tiff-tiled-rgba16", path, "tiff", [rgba(rgb_odd, alpha_odd)], "source")
    path = image_path("tiff-planar", "tif")
    tifffile.imwrite(path, np.moveaxis(rgba(rgb, alpha), -1, 0), photometric="rgb", planarconfig="separate",
                     extrasamples=["unassalpha"], rowsperstrip=7)
    record("tiff-planar", path, "tiff", [pillow_rgba(path)], "pillow", check_source=rgba(rgb, alpha))
    path = tiffcp(image_path("tiff-tiled", "tif"), "tiff-tiled-planar-lzw", "-p", "separate", "-c", "lzw",
                  "-t", "-w", "16", "-l", "16")
    record("tiff-tiled-planar-lzw", path, "tiff", [pillow_rgba(path)], "pillow", check_source=rgba(rgb_odd))

    path = image_path("tiff-orientation6", "tif")
    tifffile.imwrite(path, rgb, photometric="rgb", extratags=[(274, "H", 1, 6, True)])
    # Pillow applies the orientation tag while decoding; the stored pixels are the source.
    record("tiff-orientation6", path, "tiff", [rgba(rgb)], "source", orientation=6)

    # Pages: three of one size (frames with .all), and pages of different sizes.
    pages = [base_rgb(seed=50 + i) for i in range(3)]
    path = image_path("tiff-multipage", "tif")
    with tifffile.TiffWriter(path) as writer:
        for page in pages:
            writer.write(page, photometric="rgb", compression="zlib")
    record("tiff-multipage", path, "tiff", [pillow_rgba(path, i) for i in range(3)], "pillow", frame_count=3)
    sizes = [(W, H), (24, 40), (16, 8)]
    path = image_path("tiff-pages-sizes", "tif")
    with tifffile.TiffWriter(path) as writer:
        for i, (w, h) in enumerate(sizes):
            writer.write(base_rgb(w, h, 60 + i), photometric="rgb")
    for i in range(len(sizes)):
        record(f"tiff-pages-sizes-p{i}", path, "tiff", [pillow_rgba(path, i)], "pillow", frame_count=len(sizes),
               page=i, check_source=rgba(base_rgb(*sizes[i], 60 + i)))


# ---------------------------------------------------------------- WebP

WEBP_LOSSY_TOLERANCE = 3  # Pillow's libwebp 1.6 against the system's 1.2


def webp_fixtures():
    rgb = base_rgb(seed=61)
    alpha = base_alpha()
    path = image_path("webp-lossy", "webp")
    Image.fromarray(rgb).save(path, quality=80)
    record("webp-lossy", path, "webp", [pillow_rgba(path)], "pillow", tolerance=WEBP_LOSSY_TOLERANCE, has_alpha=False)
    path = image_path("webp-lossy-alpha", "webp")
    Image.fromarray(rgba(rgb, alpha)).save(path, quality=80)
    record("webp-lossy-alpha", path, "webp", [pillow_rgba(path)], "pillow", tolerance=WEBP_LOSSY_TOLERANCE,
           has_alpha=True)
    path = image_path("webp-lossless", "webp")
    Image.fromarray(rgba(rgb, alpha)).save(path, lossless=True, exact=True)
    record("webp-lossless", path, "webp", [pillow_rgba(path)], "pillow", has_alpha=True,
           check_source=rgba(rgb, alpha))
    icc = srgb_profile()
    path = image_path("webp-exif-icc", "webp")
    Image.fromarray(rgb).save(path, lossless=True, exif=exif_with_orientation(8), icc_profile=icc)
    record("webp-exif-icc", path, "webp", [pillow_rgba(path)], "pillow", has_alpha=False, orientation=8, icc=icc,
           check_source=rgba(rgb))

    frames = [Image.fromarray(rgba(base_rgb(seed=70 + i), np.roll(alpha, i * 5, axis=1))) for i in range(4)]
    path = image_path("webp-animation", "webp")
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=[100, 150, 200, 250], loop=0,
                   lossless=True, exact=True)
    record("webp-animation", path, "webp", [pillow_rgba(path, i) for i in range(4)], "pillow", has_alpha=True,
           loop_count=0, durations=[100, 150, 200, 250])


# ---------------------------------------------------------------- BMP

def bmp_file(width, height, bits, rows, *, header=40, compression=0, palette=None, masks=None, top_down=False,
             pixel_bytes=None, icc=None):
    """rows: stored rows (bytes, unpadded) in display order; written bottom-up unless top_down."""
    if pixel_bytes is None:
        stride = (width * bits + 31) // 32 * 4
        ordered = rows if top_down else rows[::-1]
        pixel_bytes = b"".join(r + b"\x00" * (stride - len(r)) for r in ordered)
    entry = 3 if header == 12 else 4
    pal = b""
    if palette is not None:
        pal = b"".join(bytes([b, g, r]) + (b"\x00" if entry == 4 else b"") for r, g, b in palette)
    extra_masks = b""
    if header == 12:
        dib = struct.pack("<IHHHH", 12, width, height, 1, bits)
    else:
        dib = struct.pack("<IiiHHIIiiII", header, width, -height if top_down else height, 1, bits, compression,
                          len(pixel_bytes), 2835, 2835, len(palette or []), 0)
        if header == 40 and masks is not None:
            extra_masks = struct.pack("<III", *masks[:3])
        elif header >= 52:
            m = list(masks or (0, 0, 0, 0)) + [0] * 4
            dib += struct.pack("<IIII", *m[:4])[: header - 40] if header < 108 else struct.pack("<IIII", *m[:4])
        if header >= 108:
            cs_type = 0x4D424544 if icc else 0x73524742  # 'MBED' or 'sRGB'
            dib += struct.pack("<I", cs_type) + b"\x00" * 36 + b"\x00" * 12
        if header == 124:
            dib += struct.pack("<IIII", 4, 0, 0, 0)
    offset = 14 + len(dib) + len(extra_masks) + len(pal)
    profile = b""
    if icc and header == 124:
        # The profile goes after the pixels; its offset counts from the DIB header.
        profile_offset = len(dib) + len(extra_masks) + len(pal) + len(pixel_bytes)
        dib = dib[:112] + struct.pack("<II", profile_offset, len(icc)) + dib[120:]
        profile = icc
    data = dib + extra_masks + pal + pixel_bytes + profile
    return b"BM" + struct.pack("<IHHI", 14 + len(data), 0, 0, offset) + data


def pack_bits(indices, bits):
    out = bytearray()
    per = 8 // bits
    for i in range(0, len(indices), per):
        byte = 0
        for j in range(per):
            v = indices[i + j] if i + j < len(indices) else 0
            byte |= (v & ((1 << bits) - 1)) << (8 - bits * (j + 1))
        out.append(byte)
    return bytes(out)


def rle_encode(rows, four):
    """RLE8/RLE4 with runs, literal stretches, end-of-line and end-of-bitmap (bottom-up)."""
    out = bytearray()
    for row in rows[::-1]:
        i = 0
        n = len(row)
        while i < n:
            run = 1
            while i + run < n and run < 255 and (row[i + run] == row[i] if not four else
                                                  row[i + run] == row[i + (run % 2)]):
                run += 1
            if run >= 3 or n - i < 3:
                value = row[i] if not four else (row[i] << 4) | (row[i + 1] if i + 1 < n else 0)
                out += bytes([run, value])
                i += run
            else:
                literal = min(255, n - i)
                j = i
                while j < i + literal and not (j + 2 < n and row[j] == row[j + 1] == row[j + 2]):
                    j += 1
                literal = max(3, j - i) if n - i >= 3 else n - i
                chunk = row[i:i + literal]
                data = bytes(chunk) if not four else pack_bits(chunk, 4)
                out += bytes([0, literal]) + data + (b"\x00" if len(data) % 2 else b"")
                i += literal
        out += b"\x00\x00"
    out += b"\x00\x01"
    return bytes(out)


def bmp_fixtures():
    rgb = base_rgb(seed=81)
    alpha = base_alpha()
    gray = rgb[..., 1]
    rng = np.random.default_rng(82)

    def write(name, data, source, reference="pillow", **kw):
        path = image_path(name, "bmp")
        with open(path, "wb") as out:
            out.write(data)
        if reference == "pillow":
            record(name, path, "bmp", [pillow_rgba(path)], "pillow", check_source=source, **kw)
        elif reference == "imagemagick":
            record(name, path, "bmp", [imagemagick_rgba(path)], reference, **kw)
        else:
            record(name, path, "bmp", [source], reference, **kw)

    for bits in (1, 4, 8):
        count = 1 << bits
        palette = [tuple(int(v) for v in c) for c in rng.integers(0, 256, (count, 3))]
        index = (gray.astype(int) * count) // 256
        rows = [pack_bits(r, bits) if bits < 8 else bytes(r) for r in index.tolist()]
        write(f"bmp-{bits}bit", bmp_file(W, H, bits, rows, palette=palette), rgba(np.array(palette, np.uint8)[index]))

    palette = [tuple(int(v) for v in c) for c in rng.integers(0, 256, (256, 3))]
    rows = [bytes(r) for r in gray.tolist()]
    write("bmp-8bit-os2", bmp_file(W, H, 8, rows, header=12, palette=palette), rgba(np.array(palette, np.uint8)[gray]))

    # 16 bits: 5-5-5 by default, 5-6-5 through bit fields. Decoders disagree on widening
    # 5 bits to 8 (Pillow truncates v * 255 / 31); the reference is ImageMagick's, which
    # replicates the high bits as browsers do.
    r5, g5, b5 = (rgb[..., 0] >> 3).astype(int), (rgb[..., 1] >> 3).astype(int), (rgb[..., 2] >> 3).astype(int)
    word = (r5 << 10) | (g5 << 5) | b5
    rows = [struct.pack(f"<{W}H", *r) for r in word.tolist()]
    write("bmp-16bit-555", bmp_file(W, H, 16, rows), None, reference="imagemagick")
    g6 = (rgb[..., 1] >> 2).astype(int)
    word = (r5 << 11) | (g6 << 5) | b5
    rows = [struct.pack(f"<{W}H", *r) for r in word.tolist()]
    write("bmp-16bit-565", bmp_file(W, H, 16, rows, compression=3, masks=(0xF800, 0x07E0, 0x001F)), None,
          reference="imagemagick")

    rows = [bytes(r[:, ::-1].reshape(-1)) for r in rgb]
    write("bmp-24bit", bmp_file(W, H, 24, rows), rgba(rgb))
    write("bmp-24bit-topdown", bmp_file(W, H, 24, rows, top_down=True), rgba(rgb))
    write("bmp-24bit-os2", bmp_file(W, H, 24, rows, header=12), rgba(rgb))
    odd = base_rgb(37, 23, 83)
    write("bmp-24bit-odd", bmp_file(37, 23, 24, [bytes(r[:, ::-1].reshape(-1)) for r in odd]), rgba(odd))

    bgra = np.dstack([rgb[..., 2], rgb[..., 1], rgb[..., 0], alpha])
    rows = [bytes(r.reshape(-1)) for r in bgra]
    # BI_RGB 32-bit: the fourth byte is padding, the image is opaque.
    write("bmp-32bit-bgrx", bmp_file(W, H, 32, rows), rgba(rgb))
    masks = (0x00FF0000, 0x0000FF00, 0x000000FF, 0xFF000000)
    write("bmp-32bit-v4-alpha", bmp_file(W, H, 32, rows, header=108, compression=3, masks=masks),
          rgba(rgb, alpha))
    icc = srgb_profile()
    write("bmp-32bit-v5-alpha", bmp_file(W, H, 32, rows, header=124, compression=3, masks=masks, icc=icc),
          rgba(rgb, alpha), icc=icc)
    write("bmp-32bit-bitfields-topdown",
          bmp_file(W, H, 32, rows, header=56, compression=3, masks=masks, top_down=True), rgba(rgb, alpha))

    # Run-length: long runs and literal stretches, full rows (no skipped pixels).
    count = 256
    palette = [tuple(int(v) for v in c) for c in rng.integers(0, 256, (count, 3))]
    index = np.repeat(gray[:, ::4], 4, axis=1)[:, :W].astype(int) // 16 * 16
    index[::3, 10:20] = rng.integers(0, 256, (len(index[::3]), 10))
    data = rle_encode(index.tolist(), four=False)
    write("bmp-rle8", bmp_file(W, H, 8, None, compression=1, palette=palette, pixel_bytes=data),
          rgba(np.array(palette, np.uint8)[index]))
    palette = palette[:16]
    index4 = np.repeat(gray[:, ::4] >> 4, 4, axis=1)[:, :W].astype(int)
    index4[::4, 5:15] = rng.integers(0, 16, (len(index4[::4]), 10))
    data = rle_encode(index4.tolist(), four=True)
    write("bmp-rle4", bmp_file(W, H, 4, None, compression=2, palette=palette, pixel_bytes=data),
          rgba(np.array(palette, np.uint8)[index4]))

    # A delta escape skips pixels: those stay transparent (Pillow leaves them as index 0,
    # so the expected image is the source).
    rows = [[5] * W for _ in range(H)]
    data = bytearray()
    for y in range(H):  # bottom-up
        if y == 10:
            data += bytes([10, 7]) + b"\x00\x02" + bytes([6, 0])  # 10 pixels, skip 6 right, then 10 more
            data += bytes([W - 16, 7]) + b"\x00\x00"
            continue
        data += bytes([W, 5]) + b"\x00\x00"
    data += b"\x00\x01"
    palette = [tuple(int(v) for v in c) for c in rng.integers(0, 256, (256, 3))]
    expected = np.zeros((H, W, 4), np.uint8)
    expected[:, :, :3] = palette[5]
    expected[:, :, 3] = 255
    row = H - 1 - 10
    expected[row, :10, :3] = palette[7]
    expected[row, 10:16] = 0
    expected[row, 16:, :3] = palette[7]
    write("bmp-rle8-delta", bmp_file(W, H, 8, None, compression=1, palette=palette, pixel_bytes=bytes(data)),
          expected, reference="source", has_alpha=True)


# ---------------------------------------------------------------- hostile files

def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def hostile_fixtures():
    def write(name, data):
        with open(os.path.join(HOSTILE, name), "wb") as out:
            out.write(data)

    # A PNG whose IHDR claims 30000x30000 (CRC recomputed, so only the size is wrong).
    small = open(image_path("png-rgb8", "png"), "rb").read()
    ihdr = bytearray(small[16:29])
    ihdr[0:8] = struct.pack(">II", 30000, 30000)
    write("png-30000x30000.png", small[:8] + png_chunk(b"IHDR", bytes(ihdr)) + small[33:])

    # A 64x64 JPEG whose SOF claims 50000x50000.
    path = os.path.join(TMP, "64.jpg")
    Image.fromarray(base_rgb(64, 64, 90)).save(path, quality=80)
    data = bytearray(open(path, "rb").read())
    sof = data.index(b"\xFF\xC0")
    data[sof + 5:sof + 9] = struct.pack(">HH", 50000, 50000)
    write("jpeg-50000x50000.jpg", bytes(data))

    # A GIF with a 65535x65535 logical screen and a small frame.
    write("gif-65535x65535.gif", gif_file(65535, 65535, [(0, 0, 0), (255, 255, 255)],
                                          [dict(indices=np.zeros((4, 4), np.uint8), left=0, top=0)]))

    # TIFFs whose strips claim absurd sizes and rows. libtiff recomputes the byte counts
    # of uncompressed strips from the image size (and decodes them correctly); compressed
    # strips, or strips that start past the end, cannot be repaired.
    for name, compression, absurd_offsets in [
        ("tiff-absurd-strips.tif", "zlib", False),
        ("tiff-absurd-strip-offsets.tif", None, True),
        ("tiff-absurd-strips-uncompressed.tif", None, False),
    ]:
        path = os.path.join(TMP, name)
        tifffile.imwrite(path, base_rgb(16, 16, 91), photometric="rgb", rowsperstrip=4, compression=compression)
        data = bytearray(open(path, "rb").read())
        with tifffile.TiffFile(path) as tif:
            tags = tif.pages[0].tags
            counts, offsets, rows = tags["StripByteCounts"], tags["StripOffsets"], tags["RowsPerStrip"]
        for i in range(len(counts.value)):
            struct.pack_into("<I", data, counts.valueoffset + 4 * i, 0xFFFFFF00)
            if absurd_offsets:
                struct.pack_into("<I", data, offsets.valueoffset + 4 * i, 0xFFFFFF00 - i)
        struct.pack_into("<I", data, rows.valueoffset, 0xFFFFFFFF)
        write(name, bytes(data))

    # BMPs with a width of 2^31 (negative as a signed field) and of 2^31 - 1.
    rows = [b"\x00\x00\x00" * 4] * 4
    data = bytearray(bmp_file(4, 4, 24, rows))
    struct.pack_into("<I", data, 18, 0x80000000)
    write("bmp-width-2^31.bmp", bytes(data))
    struct.pack_into("<I", data, 18, 0x7FFFFFFF)
    write("bmp-width-2^31-1.bmp", bytes(data))

    # A lossless WebP whose bitstream header claims 16383x16383 over a few bytes of data.
    bits = 0x2F | ((16383 - 1) << 8) | ((16383 - 1) << 22)  # signature, width - 1, height - 1 (14 bits each)
    vp8l = struct.pack("<Q", bits)[:5] + bytes(64)
    body = b"WEBP" + b"VP8L" + struct.pack("<I", len(vp8l)) + vp8l
    write("webp-16383x16383.webp", b"RIFF" + struct.pack("<I", len(body)) + body)


# ---------------------------------------------------------------- thumbnails

def make_profiles():
    """Our own test profiles (Fixtures/tools/profiles.c) plus two from icc-profiles-free
    (zlib licence): compatibleWithAdobeRGB1998.icc and Gray.icc."""
    helper = os.path.join(TMP, "profiles")
    subprocess.run(["gcc", "-O2", "-o", helper, os.path.join(ROOT, "tools", "profiles.c"), "-llcms2"], check=True)
    subprocess.run([helper, PROFILES], check=True)
    for name in ("compatibleWithAdobeRGB1998.icc", "Gray.icc"):
        shutil.copy(os.path.join("/usr/share/color/icc", name), PROFILES)


def profile_bytes(name):
    return open(os.path.join(PROFILES, name), "rb").read()


def pillow_resize(rgba_array, size, resample=Image.Resampling.LANCZOS, gap=2.0):
    """Pillow's resize premultiplies RGBA and, with a reducing gap, box-reduces first."""
    im = Image.fromarray(np.ascontiguousarray(rgba_array), "RGBA")
    return np.asarray(im.resize(size, resample, reducing_gap=gap))


def srgb_to_linear(v):
    c = v / 255.0
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def linear_to_srgb(v):
    c = np.where(v <= 0.0031308, v * 12.92, 1.055 * np.power(np.clip(v, 0, None), 1 / 2.4) - 0.055)
    return np.clip(np.floor(c * 255 + 0.5), 0, 255).astype(np.uint8)


def pillow_resize_linear(rgba_array, size):
    """Linear light: premultiplied linear floats, each plane resized by Pillow in mode F."""
    a = rgba_array[..., 3].astype(np.float64) / 255
    planes = [srgb_to_linear(rgba_array[..., c].astype(np.float64)) * a for c in range(3)] + [a]
    out = []
    for plane in planes:
        im = Image.fromarray(plane.astype(np.float32), "F")
        factor = int(min(im.width / size[0], im.height / size[1]) // 2)
        box = (0, 0, im.width, im.height)
        if factor > 1:  # reduce() has no F mode: the same box average by hand
            h, w = plane.shape
            trimmed = plane[: h // factor * factor, : w // factor * factor]
            reduced = trimmed.reshape(h // factor, factor, w // factor, factor).mean(axis=(1, 3))
            im = Image.fromarray(reduced.astype(np.float32), "F")
            box = (0, 0, w / factor, h / factor)
        out.append(np.asarray(im.resize(size, Image.Resampling.LANCZOS, box=box), np.float64))
    alpha = np.clip(out[3], 0, 1)
    safe = np.where(alpha > 0, alpha, 1)
    rgb = [linear_to_srgb(np.where(alpha > 0, np.clip(out[c] / safe, 0, 1), 0)) for c in range(3)]
    return np.dstack(rgb + [np.clip(np.floor(alpha * 255 + 0.5), 0, 255).astype(np.uint8)])


def thumb(name, source, options, frames, reference, max_diff, mean_diff, **extra):
    """A thumbnail expectation: decode `source` with `options`, compare with `frames`
    (premultiplied). Pillow rounds and clamps to 8 bits between its horizontal and
    vertical passes, the library keeps floats: on high-contrast noise that alone moves
    a few pixels by up to 6-8 levels, hence the separate limits on the maximum and the mean."""
    frames = [np.ascontiguousarray(f, dtype=np.uint8) for f in frames]
    expected = []
    for i, f in enumerate(frames):
        rel = f"expected/thumb-{name}" + (f".f{i}" if len(frames) > 1 else "") + ".rgba"
        with open(os.path.join(ROOT, rel), "wb") as out:
            out.write(f.tobytes())
        expected.append(rel)
    entry = {"name": name, "source": os.path.relpath(source, ROOT), "options": options, "width": frames[0].shape[1],
             "height": frames[0].shape[0], "frames": expected, "reference": reference, "maxDifference": max_diff,
             "meanDifference": mean_diff}
    entry.update(extra)
    THUMBNAILS.append(entry)


def thumbnail_fixtures():
    make_profiles()
    srgb = ImageCms.createProfile("sRGB")
    intent = ImageCms.Intent.RELATIVE_COLORIMETRIC
    bpc = ImageCms.Flags.BLACKPOINTCOMPENSATION

    # A photo-like RGB image with fine detail, and the same with alpha.
    w, h = 400, 300
    rgb = base_rgb(w, h, 100)
    y, x = np.mgrid[0:h, 0:w]
    rgb[(x // 3 + y // 3) % 2 == 0, 2] //= 3  # a fine checker the kernel must not alias badly
    alpha = base_alpha(w, h)
    path = image_path("png-photo", "png")
    Image.fromarray(rgb).save(path)
    path_alpha = image_path("png-photo-alpha", "png")
    Image.fromarray(rgba(rgb, alpha)).save(path_alpha)
    # (Thumbnail sources only: their full-size pixels are not stored as references.)

    thumb("lanczos3", path, {"maxPixelSize": 100}, [pillow_resize(rgba(rgb), (100, 75))], "pillow LANCZOS", 3, 0.6)
    thumb("lanczos3-alpha", path_alpha, {"maxPixelSize": 100}, [pillow_resize(rgba(rgb, alpha), (100, 75))],
          "pillow LANCZOS (premultiplied)", 4, 0.7)
    thumb("bilinear", path, {"maxPixelSize": 100, "kernel": "bilinear"},
          [pillow_resize(rgba(rgb), (100, 75), Image.Resampling.BILINEAR)], "pillow BILINEAR", 3, 0.6)
    thumb("box", path, {"maxPixelSize": 100, "kernel": "box"},
          [pillow_resize(rgba(rgb), (100, 75), Image.Resampling.BOX, None)], "pillow BOX", 2, 0.6)
    thumb("linear-light", path_alpha, {"maxPixelSize": 100, "linearLight": True},
          [pillow_resize_linear(rgba(rgb, alpha), (100, 75))], "pillow LANCZOS on linear floats", 4, 0.8)
    filled = pillow_resize(rgba(rgb), (133, 100))[:, 16:116]
    thumb("fill", path, {"width": 100, "height": 100, "fit": "fill"}, [filled], "pillow LANCZOS, centre crop", 6, 0.6)
    thumb("no-upscaling", image_path("png-rgb8", "png"), {"maxPixelSize": 500},
          [pillow_rgba(image_path("png-rgb8", "png"))], "the decoded image", 0, 0)

    # Alpha fringes: transparent pixels are loud red; visible ones never are.
    w, h = 200, 160
    fringe = np.zeros((h, w, 4), np.uint8)
    fringe[..., 0] = 255  # transparent red
    fringe[:, w // 2:] = [0, 200, 0, 255]
    y, x = np.mgrid[0:h, 0:w]
    fringe[(x - w // 4) ** 2 + (y - h // 2) ** 2 < 30 ** 2] = [0, 0, 220, 255]
    path = image_path("png-fringe", "png")
    Image.fromarray(fringe).save(path)
    record("png-fringe", path, "png", [fringe], "source")
    thumb("alpha-fringe", path, {"maxPixelSize": 50}, [pillow_resize(fringe, (50, 40))],
          "pillow LANCZOS (premultiplied)", 8, 0.5, maxVisibleRed=2)

    # JPEG with DCT scaling on load: Pillow's draft() picks the same 1/4 scale.
    big = base_rgb(800, 600, 101)
    path = image_path("jpeg-800x600", "jpg")
    Image.fromarray(big).save(path, quality=90)
    im = Image.open(path)
    im.draft("RGB", (200, 150))
    assert im.size == (200, 150), im.size
    reduced = np.asarray(im.convert("RGBA"))
    thumb("jpeg-dct-scaled", path, {"maxPixelSize": 100}, [pillow_resize(reduced, (100, 75))],
          "pillow draft(1/4) + LANCZOS", 4, 0.8)

    # Every EXIF orientation, turned upright after shrinking.
    for value in range(1, 9):
        source = image_path(f"jpeg-orientation{value}", "jpg")
        upright = ImageOps.exif_transpose(Image.open(source)).convert("RGBA")
        size = (24, 16) if upright.width > upright.height else (16, 24)
        thumb(f"orientation{value}", source, {"maxPixelSize": 24}, [pillow_resize(np.asarray(upright), size)],
              "pillow exif_transpose + LANCZOS", 6, 1.0)
    for name, ext in (("png-exif-icc", "png"), ("webp-exif-icc", "webp"), ("tiff-orientation6", "tif")):
        source = image_path(name, ext)
        decoded = np.asarray(Image.open(source).convert("RGBA")) if ext != "tif" else rgba(base_rgb(seed=41))
        rotated = Image.fromarray(decoded).transpose(
            {6: Image.Transpose.ROTATE_270, 8: Image.Transpose.ROTATE_90}[6 if ext != "webp" else 8])
        size = (16, 24)
        thumb(f"orientation-{ext}", source, {"maxPixelSize": 24}, [pillow_resize(np.asarray(rotated), size)],
              "the decoded pixels turned by Pillow + LANCZOS", 6, 0.8)

    # Animations keep every frame when asked.
    anim = [np.fromfile(os.path.join(ROOT, f), np.uint8).reshape(H, W, 4)
            for f in next(e for e in MANIFEST if e["name"] == "gif-animation")["frames"]]
    thumb("gif-all-frames", image_path("gif-animation", "gif"), {"maxPixelSize": 24, "frames": "all"},
          [pillow_resize(f, (24, 16)) for f in anim], "the composited frames + pillow LANCZOS", 8, 1.0,
          durationsMs=[100, 200, 300, 400, 0], loopCount=3)
    thumb("gif-first-frame", image_path("gif-animation", "gif"), {"maxPixelSize": 24},
          [pillow_resize(anim[0], (24, 16))], "the first frame + pillow LANCZOS", 8, 1.0)
    webp_frames = [pillow_rgba(image_path("webp-animation", "webp"), i) for i in range(4)]
    thumb("webp-all-frames", image_path("webp-animation", "webp"), {"maxPixelSize": 24, "frames": "all"},
          [pillow_resize(f, (24, 16)) for f in webp_frames], "pillow frames + LANCZOS", 8, 1.0,
          durationsMs=[100, 150, 200, 250], loopCount=0)

    # Colour: converted to sRGB by the embedded profile (sizes kept, so only colour differs).
    def colour_case(name, image, profile_name, fmt, save_kw, mode_out="RGB"):
        profile = profile_bytes(profile_name)
        path = image_path(name, fmt)
        image.save(path, icc_profile=profile, **save_kw)
        decoded = Image.open(path)
        src = ImageCms.ImageCmsProfile(io.BytesIO(profile))
        converted = ImageCms.profileToProfile(decoded.convert(decoded.mode if decoded.mode != "RGBA" else "RGB"),
                                              src, srgb, renderingIntent=intent, outputMode=mode_out, flags=bpc)
        result = np.asarray(converted.convert("RGBA")).copy()
        if decoded.mode == "RGBA":
            result[..., 3] = np.asarray(decoded)[..., 3]
        return path, result

    swapped_src = rgba(base_rgb(W, H, 102), base_alpha())
    path, expected = colour_case("png-icc-swapped", Image.fromarray(swapped_src), "swapped-rg.icc", "png", {})
    record("png-icc-swapped", path, "png", [pillow_rgba(path)], "pillow", icc=profile_bytes("swapped-rg.icc"))
    thumb("icc-swapped", path, {"maxPixelSize": 48}, [expected], "pillow ImageCms", 2, 0.5)
    thumb("icc-kept", path, {"maxPixelSize": 48, "keepsColorProfile": True}, [pillow_rgba(path)],
          "the decoded pixels", 0, 0, keepsProfile="swapped-rg.icc")
    path, expected = colour_case("jpeg-icc-adobergb", Image.fromarray(base_rgb(W, H, 103)),
                                 "compatibleWithAdobeRGB1998.icc", "jpg", {"quality": 92})
    record("jpeg-icc-adobergb", path, "jpeg", [pillow_rgba(path)], "pillow", tolerance=JPEG_TOLERANCE,
           has_alpha=False, icc=profile_bytes("compatibleWithAdobeRGB1998.icc"))
    thumb("icc-adobergb", path, {"maxPixelSize": 48}, [expected], "pillow ImageCms", 3, 0.6)
    cmyk = np.dstack([255 - base_rgb(W, H, 104), np.random.default_rng(105).integers(0, 60, (H, W))]).astype(np.uint8)
    path, expected = colour_case("jpeg-cmyk-icc", Image.fromarray(cmyk, "CMYK"), "warm-cmyk.icc", "jpg",
                                 {"quality": 92})
    record("jpeg-cmyk-icc", path, "jpeg", [pillow_rgba(path)], "pillow", tolerance=JPEG_TOLERANCE, has_alpha=False,
           icc=profile_bytes("warm-cmyk.icc"))
    thumb("icc-cmyk", path, {"maxPixelSize": 48}, [expected], "pillow ImageCms (CMYK)", 3, 0.6)
    path, expected = colour_case("jpeg-gray-icc", Image.fromarray(base_rgb(W, H, 106)[..., 0]), "Gray.icc", "jpg",
                                 {"quality": 92})
    record("jpeg-gray-icc", path, "jpeg", [pillow_rgba(path)], "pillow", tolerance=JPEG_TOLERANCE, has_alpha=False,
           icc=profile_bytes("Gray.icc"))
    thumb("icc-gray", path, {"maxPixelSize": 48}, [expected], "pillow ImageCms (gray)", 3, 0.6)


def main():
    for folder in (IMAGES, EXPECTED, HOSTILE, PROFILES):
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
    png_fixtures()
    jpeg_fixtures()
    gif_fixtures()
    tiff_fixtures()
    webp_fixtures()
    bmp_fixtures()
    hostile_fixtures()
    thumbnail_fixtures()
    with open(os.path.join(ROOT, "manifest.json"), "w") as out:
        json.dump({"fixtures": MANIFEST, "thumbnails": THUMBNAILS}, out, indent=1)
        out.write("\n")
    shutil.rmtree(TMP)
    print(f"{len(MANIFEST)} fixtures, {len(THUMBNAILS)} thumbnails")


if __name__ == "__main__":
    main()
