#!/usr/bin/env python3
"""generate-processing.py: sources and expected results for the service's processing options.

    python3 Fixtures/generate-processing.py        # from the repository root

Writes Fixtures/processing/sources/* (the images URLs name as local:///...),
Fixtures/processing/expected/*.png and Fixtures/processing/cases.json. Run once and
commit the output; ProcessingReferenceTests only read it. Needs Pillow and numpy.

Every expected image is made here with Pillow and numpy from imgproxy's documented
meanings (docs.imgproxy.net, "Processing options"), the sizes and positions worked
out by the small functions below (imgproxy's rules for crop and extend positions,
padding and dpr, written out again in Python) and never by the library under test:
  * geometry (crop, gravity with offsets and focus point, extend, extend_aspect_ratio,
    padding, rotate, flip, trim) on sources processed at scale 1, so the reference is
    exact pixel for pixel;
  * effects with Pillow's filters: GaussianBlur(sigma) for `bl`, UnsharpMask(sigma,
    100, 0) for `sh`, block means for `pix`, alpha_composite for `bg` and watermarks;
  * resizing cases (zoom, min-width, crop then resize, dpr) with Pillow's LANCZOS and
    reducing_gap=2.0, the algorithm the library documents (Fixtures/generate.py).
Each case states its tolerance: 0-1 where the operation is exact; more where Pillow's
filters approximate differently (it rounds to 8 bits between passes).
"""
import json
import os

import numpy as np
from PIL import Image, ImageFilter

ROOT = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(ROOT, "processing")
SOURCES = os.path.join(OUT, "sources")
EXPECTED = os.path.join(OUT, "expected")
CASES = []


def photo(w, h, seed):
    """A photo-like RGB image: smooth gradients, shapes with hard edges, fine texture."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 60 + 160 * x / w + 20 * np.sin(y / 7)
    g = 40 + 150 * y / h + 20 * np.cos(x / 9)
    b = 200 - 120 * (x + y) / (w + h)
    img = np.dstack([r, g, b])
    img[(x - w * 0.7) ** 2 + (y - h * 0.6) ** 2 < (h * 0.18) ** 2] = [30, 200, 60]
    img[int(h * 0.15):int(h * 0.4), int(w * 0.1):int(w * 0.35)] = [230, 40, 50]
    img += rng.normal(0, 3, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def save_source(name, array, mode):
    Image.fromarray(array, mode).save(os.path.join(SOURCES, name))
    return name


def case(name, source, options, expected, max_diff, mean_diff, note):
    """`options` applied to local:///`source` must give `expected` (RGBA)."""
    expected = np.ascontiguousarray(expected, dtype=np.uint8)
    if expected.shape[2] == 3:
        expected = np.dstack([expected, np.full(expected.shape[:2], 255, np.uint8)])
    Image.fromarray(expected, "RGBA").save(os.path.join(EXPECTED, name + ".png"))
    CASES.append({"name": name, "source": source, "options": options, "expected": f"expected/{name}.png",
                  "width": expected.shape[1], "height": expected.shape[0], "maxDifference": max_diff,
                  "meanDifference": mean_diff, "reference": note})


def half_to_even(v):
    return int(np.round(v))  # numpy rounds half to even, as Go's math.RoundToEven


def position(width, height, inner_w, inner_h, gravity, x=0.0, y=0.0, dpr=1.0):
    """imgproxy's placement of an inner box in an outer one (docs: gravity, offsets)."""
    if gravity == "fp":
        left = half_to_even(width * x) - inner_w // 2
        top = half_to_even(height * y) - inner_h // 2
    else:
        off_x = half_to_even(x * dpr) if abs(x) >= 1 else half_to_even(width * x)
        off_y = half_to_even(y * dpr) if abs(y) >= 1 else half_to_even(height * y)
        left = half_to_even((width - inner_w + 1) / 2) + off_x
        top = half_to_even((height - inner_h + 1) / 2) + off_y
        if gravity in ("no", "noea", "nowe"):
            top = off_y
        if gravity in ("so", "soea", "sowe"):
            top = height - inner_h - off_y
        if gravity in ("ea", "noea", "soea"):
            left = width - inner_w - off_x
        if gravity in ("we", "nowe", "sowe"):
            left = off_x
    return max(0, min(left, width - inner_w)), max(0, min(top, height - inner_h))


def crop(a, w, h, gravity, x=0.0, y=0.0):
    left, top = position(a.shape[1], a.shape[0], w, h, gravity, x, y)
    return a[top:top + h, left:left + w]


def embed(a, w, h, left, top, color):
    canvas = np.zeros((h, w, 4), np.uint8)
    canvas[:] = color
    rgba = a if a.shape[2] == 4 else np.dstack([a, np.full(a.shape[:2], 255, np.uint8)])
    canvas[top:top + a.shape[0], left:left + a.shape[1]] = rgba
    return canvas


def resize(a, size):
    mode = "RGBA" if a.shape[2] == 4 else "RGB"
    return np.asarray(Image.fromarray(a, mode).resize(size, Image.Resampling.LANCZOS, reducing_gap=2.0))


def main():
    os.makedirs(SOURCES, exist_ok=True)
    os.makedirs(EXPECTED, exist_ok=True)
    rgb = photo(320, 240, 7)
    src = save_source("photo.png", rgb, "RGB")
    # A drawing with transparency (a logo on nothing).
    y, x = np.mgrid[0:240, 0:320]
    logo = np.zeros((240, 320, 4), np.uint8)
    logo[..., 0] = 250
    logo[..., 1] = (x * 255 // 319).astype(np.uint8)
    logo[..., 2] = 40
    logo[..., 3] = np.where((x - 160) ** 2 + (y - 120) ** 2 < 100 ** 2, 255, 0)
    logo[(x - 160) ** 2 + (y - 120) ** 2 < 60 ** 2, 3] = 128
    logo_src = save_source("logo.png", logo, "RGBA")
    # A picture on a flat border, for trim: white, and red with an uneven margin.
    framed = np.full((300, 400, 3), 255, np.uint8)
    framed[40:250, 60:330] = np.tile(rgb, (1, 2, 1))[20:230, 10:280]
    framed_src = save_source("framed.png", framed, "RGB")
    red = np.zeros((300, 400, 3), np.uint8)
    red[:] = [255, 0, 0]
    red[30:280, 50:300] = np.tile(rgb, (2, 1, 1))[0:250, 0:250]
    red_src = save_source("red-border.png", red, "RGB")
    # The watermark: a half-transparent white disc with a dark ring.
    wy, wx = np.mgrid[0:64, 0:96]
    mark = np.zeros((64, 96, 4), np.uint8)
    mark[..., :3] = 255
    d = (wx - 48) ** 2 + (wy - 32) ** 2
    mark[d < 30 ** 2, 3] = 160
    mark[(d < 30 ** 2) & (d > 24 ** 2), :3] = 20
    mark[(d < 30 ** 2) & (d > 24 ** 2), 3] = 255
    save_source("watermark.png", mark, "RGBA")
    # An animation: four frames, each its own colours and duration, looping 3 times.
    frames = []
    for i in range(4):
        f = np.zeros((120, 160, 3), np.uint8)
        f[:] = [40 * i, 200 - 40 * i, 120]
        f[20 + 10 * i:60 + 10 * i, 30 + 20 * i:90 + 20 * i] = [250, 250, 0]
        frames.append(Image.fromarray(f, "RGB"))
    frames[0].save(os.path.join(SOURCES, "animation.gif"), save_all=True, append_images=frames[1:],
                   duration=[100, 200, 300, 400], loop=3, disposal=1)
    gif = Image.open(os.path.join(SOURCES, "animation.gif"))
    anim = []
    for i in range(4):
        gif.seek(i)
        anim.append(np.asarray(gif.convert("RGB")))

    # Geometry at scale 1: exact.
    case("crop-nowe", src, "c:160:120:nowe", crop(rgb, 160, 120, "nowe"), 0, 0, "numpy crop")
    case("crop-fraction", src, "c:0.5:0.5", crop(rgb, 160, 120, "ce"), 0, 0, "numpy crop")
    case("crop-offsets", src, "c:150:100:ce:20:-10", crop(rgb, 150, 100, "ce", 20, -10), 0, 0, "numpy crop")
    case("crop-fraction-offset", src, "c:100:100:no:0.25", crop(rgb, 100, 100, "no", 0.25), 0, 0, "numpy crop")
    case("fill-south-offset", src, "rs:fill:320:150/g:so:0:30", crop(rgb, 320, 150, "so", 0, 30), 0, 0,
         "numpy crop")
    case("fill-east-offset", src, "rs:fill:250:240/g:ea:15", crop(rgb, 250, 240, "ea", 15), 0, 0, "numpy crop")
    case("fill-focus-point", src, "rs:fill:320:150/g:fp:0.5:0.7", crop(rgb, 320, 150, "fp", 0.5, 0.7), 0, 0,
         "numpy crop")
    case("padding", src, "pd:10:20:30:40", embed(rgb, 380, 280, 40, 10, [0, 0, 0, 0]), 0, 0, "numpy embed")
    case("padding-background", src, "pd:12/bg:ff0000", embed(rgb, 344, 264, 12, 12, [255, 0, 0, 255]), 0, 0,
         "numpy embed")
    case("padding-dpr", src, "rs:fit:160:120/dpr:2/pd:10:5", embed(rgb, 340, 280, 10, 20, [0, 0, 0, 0]), 0, 0,
         "numpy embed, padding times dpr 2")
    case("rotate-90", src, "rot:90", np.rot90(rgb, -1), 0, 0, "numpy rot90 clockwise")
    case("rotate-270-flip", src, "rot:270/fl:1", np.fliplr(np.rot90(rgb, 1)), 0, 0, "numpy rot90, fliplr")
    case("flip-vertical", src, "fl:0:1", np.flipud(rgb), 0, 0, "numpy flipud")
    left, top = position(400, 400, 320, 240, "so")
    case("extend-south", src, "rs:fit:400:400:0:1:so", embed(rgb, 400, 400, left, top, [0, 0, 0, 0]), 0, 0,
         "numpy embed")
    left, top = position(400, 300, 320, 240, "nowe", 10, 20)
    case("extend-offsets-bg", src, "rs:fit:400:300/ex:1:nowe:10:20/bg:00ff00",
         embed(rgb, 400, 300, left, top, [0, 255, 0, 255]), 0, 0, "numpy embed")
    case("extend-aspect-north", src, "rs:fit:320:320/exar:1:no", embed(rgb, 320, 320, 0, 0, [0, 0, 0, 0]), 0, 0,
         "numpy embed")
    case("trim", framed_src, "t:10", framed[40:250, 60:330], 0, 0, "numpy bounding box of non-white")
    case("trim-color-equal", red_src, "t:20:ff0000:1:1", red[20:280, 50:350], 0, 0,
         "numpy: margins 30/20 and 50/100 made equal")
    # Orientation: a PNG whose eXIf says "rotate 90 clockwise to show" (6).
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(rgb).save(os.path.join(SOURCES, "oriented.png"), exif=exif.tobytes())
    case("auto-rotate", "oriented.png", "w:0", np.rot90(rgb, -1), 0, 0, "numpy rot90: the orientation applied")
    case("no-auto-rotate", "oriented.png", "ar:0", rgb, 0, 0, "the pixels as stored")
    case("auto-rotate-then-rotate", "oriented.png", "rot:90", np.rot90(rgb, 2), 0, 0,
         "numpy: the orientation, then 90 more")
    # Effects.
    flat = Image.alpha_composite(Image.new("RGBA", (320, 240), (16, 32, 48, 255)), Image.fromarray(logo, "RGBA"))
    case("background", logo_src, "bg:102030", np.asarray(flat), 1, 0.1, "Pillow alpha_composite")
    case("background-rgb", logo_src, "bg:16:32:48", np.asarray(flat), 1, 0.1, "Pillow alpha_composite")
    case("blur", src, "bl:2", np.asarray(Image.fromarray(rgb).filter(ImageFilter.GaussianBlur(2))), 3, 0.6,
         "Pillow GaussianBlur(2)")
    case("sharpen", src, "sh:1",
         np.asarray(Image.fromarray(rgb).filter(ImageFilter.UnsharpMask(radius=1, percent=100, threshold=0))), 4,
         0.8, "Pillow UnsharpMask(1, 100, 0)")
    blocks = rgb.astype(np.float64).reshape(15, 16, 20, 16, 3).mean(axis=(1, 3))
    pixelated = np.repeat(np.repeat(np.floor(blocks + 0.5), 16, axis=0), 16, axis=1)
    case("pixelate", src, "pix:16", pixelated, 1, 0.1, "numpy block means")
    # The watermark: at 1 x its size in the south-east corner, and tiled.
    base = Image.fromarray(rgb).convert("RGBA")
    wm = Image.fromarray(mark, "RGBA")
    faded = np.asarray(wm).copy()
    faded[..., 3] = np.floor(faded[..., 3].astype(np.float64) * 0.5 + 0.5).astype(np.uint8)
    left, top = 320 - 96 - 10, 240 - 64 - 10
    marked = base.copy()
    marked.alpha_composite(Image.fromarray(faded, "RGBA"), (left, top))
    case("watermark-corner", src, "wm:0.5:soea:10:10", np.asarray(marked), 2, 0.05, "Pillow alpha_composite")
    tiled = base.copy()
    for ty in range(0, 240, 64 + 16):
        for tx in range(0, 320, 96 + 24):
            tiled.alpha_composite(wm, (tx, ty))
    case("watermark-tiled", src, "wm:1:re:24:16", np.asarray(tiled), 2, 0.05, "Pillow alpha_composite, tiles")
    # Resizing cases: Pillow's LANCZOS with a reducing gap, the library's documented algorithm.
    case("zoom", src, "z:0.5", resize(rgb, (160, 120)), 6, 0.6, "Pillow LANCZOS")
    # min-width grows the scale; the box still crops (imgproxy's documented warning).
    case("min-width", src, "rs:fit:160:160/mw:240", crop(resize(rgb, (240, 180)), 160, 160, "ce"), 6, 0.6,
         "Pillow LANCZOS, centre crop to the box")
    case("min-height", src, "h:60/mh:90", crop(resize(rgb, (120, 90)), 120, 60, "ce"), 6, 0.6,
         "Pillow LANCZOS, centre crop to the height")
    case("crop-then-fill", src, "rs:fill:80:60/c:160:120:nowe", resize(crop(rgb, 160, 120, "nowe"), (80, 60)),
         12, 1.2, "numpy crop, Pillow LANCZOS (edges differ: the library crops after scaling)")
    case("rotate-fill", src, "rs:fill:100:100/rot:90", crop(resize(np.rot90(rgb, -1), (100, 133)), 100, 100, "ce"),
         8, 0.8, "numpy rot90, Pillow LANCZOS, centre crop")

    # Animation frames as Pillow composites them, each resized to 80x60.
    animation = {"source": "animation.gif", "durationsMs": [100, 200, 300, 400], "loopCount": 3,
                 "frames": []}
    for i, f in enumerate(anim):
        name = f"animation-f{i}"
        Image.fromarray(resize(f, (80, 60))).save(os.path.join(EXPECTED, name + ".png"))
        animation["frames"].append(f"expected/{name}.png")
    with open(os.path.join(OUT, "cases.json"), "w") as out:
        json.dump({"cases": CASES, "animation": animation}, out, indent=1)
        out.write("\n")


if __name__ == "__main__":
    main()
