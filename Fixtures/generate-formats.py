#!/usr/bin/env python3
"""generate-formats.py: the SVG and ICO fixtures and their references.

    .build/fixtures-venv/bin/python Fixtures/generate-formats.py    # from the repository root

Writes Fixtures/formats/: SVG documents written here by hand (shapes, gradients,
strokes, transforms, group opacity, clip paths, masks, patterns, a viewBox with
preserveAspectRatio, Illustrator's namespace entities) with resvg's renderings
(resvg-py: `NAME.resvg.png` at the intrinsic size, `NAME.resvg48.png` fitted in 48x48,
never enlarged);
and icons: Pillow's (PNG entries at several sizes, and bitmap entries) and bitmap
icons assembled here entry by entry (1, 4, 8, 24 and 32 bits a pixel, with AND masks),
each with Pillow's decode of its largest entry (`NAME.ref.png`) and, for the
multi-size ones, of its 16x16 entry (`NAME.16.ref.png`). Run once and commit the
output; the tests only read it. Needs pillow, numpy and resvg-py.
"""
import io
import os
import struct

import numpy as np
from PIL import Image
import resvg_py

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "formats")

SVGS = {
    "shapes": """<svg xmlns="http://www.w3.org/2000/svg" width="120" height="80">
  <rect x="4" y="4" width="50" height="30" fill="#d33" stroke="#222" stroke-width="3"/>
  <circle cx="85" cy="25" r="18" fill="#39c"/>
  <ellipse cx="30" cy="60" rx="24" ry="12" fill="#3a3" fill-opacity="0.6"/>
  <polygon points="70,75 95,45 118,75" fill="#fc0" stroke="#850" stroke-linejoin="round" stroke-width="4"/>
  <line x1="0" y1="79" x2="120" y2="40" stroke="#000" stroke-width="2" stroke-dasharray="6 3"/>
</svg>""",
    "gradients": """<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="100" height="100">
  <defs>
    <linearGradient id="l" x1="0" y1="0" x2="1" y2="1">
      <stop offset="0" stop-color="#f00"/><stop offset="0.5" stop-color="#ff0"/><stop offset="1" stop-color="#00f"/>
    </linearGradient>
    <radialGradient id="r" cx="0.5" cy="0.5" r="0.5">
      <stop offset="0" stop-color="#fff"/><stop offset="1" stop-color="#080" stop-opacity="0"/>
    </radialGradient>
    <linearGradient id="inherited" xlink:href="#l" gradientTransform="rotate(90 0.5 0.5)"/>
  </defs>
  <rect width="100" height="50" fill="url(#l)"/>
  <rect y="50" width="50" height="50" fill="url(#inherited)"/>
  <circle cx="75" cy="75" r="24" fill="url(#r)"/>
</svg>""",
    "paths": """<svg xmlns="http://www.w3.org/2000/svg" width="96" height="96" viewBox="0 0 48 48">
  <g transform="translate(24 24) rotate(30)">
    <path d="M-18,-6 C-18,-20 18,-20 18,-6 S0,18 0,18 Q-18,4 -18,-6 Z" fill="#c3c" stroke="#313" stroke-width="1.5"/>
  </g>
  <path d="M2,46 L46,46 L24,30 Z" fill="none" stroke="#07a" stroke-width="2" stroke-linecap="round"/>
</svg>""",
    "opacity-clip-mask": """<svg xmlns="http://www.w3.org/2000/svg" width="90" height="60">
  <defs>
    <clipPath id="c"><circle cx="30" cy="30" r="25"/></clipPath>
    <mask id="m"><rect width="90" height="60" fill="#fff"/><rect x="60" y="10" width="20" height="40" fill="#000"/></mask>
  </defs>
  <g clip-path="url(#c)"><rect width="60" height="60" fill="#e60"/><rect x="20" width="10" height="60" fill="#06e"/></g>
  <g opacity="0.5" mask="url(#m)"><rect x="45" y="5" width="40" height="50" fill="#0a0"/></g>
</svg>""",
    "pattern-aspect": """<svg xmlns="http://www.w3.org/2000/svg" width="150" height="50" viewBox="0 0 40 40" preserveAspectRatio="xMidYMid meet">
  <defs>
    <pattern id="p" width="20" height="20" patternUnits="userSpaceOnUse">
      <rect width="10" height="10" fill="#333"/><rect x="10" y="10" width="10" height="10" fill="#333"/>
    </pattern>
  </defs>
  <rect width="40" height="40" fill="url(#p)"/>
  <circle cx="20" cy="20" r="12" fill="#f80" fill-opacity="0.8"/>
</svg>""",
    "illustrator-entities": """<?xml version="1.0" encoding="utf-8"?>
<!-- Generator: a drawing program, with its namespace entities -->
<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd" [
  <!ENTITY ns_svg "http://www.w3.org/2000/svg">
  <!ENTITY ns_xlink "http://www.w3.org/1999/xlink">
  <!ENTITY st0 "fill:#2a6;stroke:#142;stroke-width:2">
]>
<svg version="1.1" xmlns="&ns_svg;" xmlns:xlink="&ns_xlink;" width="64" height="64" viewBox="0 0 64 64">
  <rect x="8" y="8" width="48" height="48" rx="10" style="&st0;"/>
  <use xlink:href="#dot" x="0" y="0"/>
  <defs><circle id="dot" cx="32" cy="32" r="9" fill="#fff"/></defs>
</svg>""",
    "units-no-size": """<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 30 20">
  <rect width="30" height="20" fill="#9cf"/><rect x="5" y="5" width="20" height="10" fill="#036"/>
</svg>""",
}


def render(svg, width=None, height=None):
    data = resvg_py.svg_to_bytes(svg_string=svg, width=width, height=height)
    return Image.open(io.BytesIO(bytes(data))).convert("RGBA")


def svg_fixtures():
    for name, text in SVGS.items():
        with open(os.path.join(OUT, name + ".svg"), "w") as handle:
            handle.write(text)
        full = render(text)
        full.save(os.path.join(OUT, name + ".resvg.png"))
        # Fitted in 48x48, never enlarged (the intrinsic size's aspect, rounded as the thumbnail rounds).
        w, h = full.size
        scale = min(1, 48 / max(w, h))
        size = (max(1, round(w * scale)), max(1, round(h * scale)))
        render(text, width=size[0], height=size[1]).save(os.path.join(OUT, name + ".resvg48.png"))


def picture(size, seed):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:size, 0:size]
    rgb = np.stack([(x * 255 // max(1, size - 1)), (y * 255 // max(1, size - 1)), np.full_like(x, 40 * seed % 256)], -1)
    alpha = np.where((x - size / 2) ** 2 + (y - size / 2) ** 2 < (size / 2.2) ** 2, 255, 0)
    alpha[: size // 4, : size // 4] = 128
    noise = rng.integers(0, 8, (size, size, 3))
    return np.concatenate([np.clip(rgb + noise, 0, 255), alpha[..., None]], -1).astype(np.uint8)


def dib_entry(rgba, bits):
    """A bitmap entry: BITMAPINFOHEADER (height doubled), colour rows bottom-up, then the AND mask."""
    h, w = rgba.shape[:2]
    palette = b""
    if bits <= 8:
        colours = 1 << bits
        image = Image.fromarray(rgba[..., :3], "RGB").quantize(colors=colours, dither=Image.Dither.NONE)
        indices = np.asarray(image)
        pal = image.getpalette()[: 3 * colours] + [0] * (3 * colours - len(image.getpalette()[: 3 * colours]))
        palette = b"".join(bytes([pal[3 * i + 2], pal[3 * i + 1], pal[3 * i], 0]) for i in range(colours))
    row_bytes = (w * bits + 31) // 32 * 4
    rows = []
    for y in range(h - 1, -1, -1):
        if bits == 32:
            row = b"".join(bytes([p[2], p[1], p[0], p[3]]) for p in rgba[y])
        elif bits == 24:
            row = b"".join(bytes([p[2], p[1], p[0]]) for p in rgba[y])
        else:
            value, count, out = 0, 0, bytearray()
            for index in indices[y]:
                value = value << bits | int(index)
                count += bits
                if count == 8:
                    out.append(value)
                    value, count = 0, 0
            if count:
                out.append(value << (8 - count))
            row = bytes(out)
        rows.append(row.ljust(row_bytes, b"\0"))
    mask_bytes = (w + 31) // 32 * 4
    mask = []
    for y in range(h - 1, -1, -1):
        bits_row = np.packbits((rgba[y, :, 3] < 128).astype(np.uint8))
        mask.append(bytes(bits_row).ljust(mask_bytes, b"\0"))
    header = struct.pack("<IiiHHIIiiII", 40, w, 2 * h, 1, bits, 0, 0, 0, 0, 0, 0)
    return header + palette + b"".join(rows) + b"".join(mask)


def ico(entries):
    """An icon file from (width, height, bits, data) entries."""
    offset = 6 + 16 * len(entries)
    head = struct.pack("<HHH", 0, 1, len(entries))
    body = b""
    for w, h, bits, data in entries:
        head += struct.pack("<BBBBHHII", w % 256, h % 256, 0, 0, 1, bits, len(data), offset + len(body))
        body += data
    return head + body


def ico_fixtures():
    # Pillow's own: PNG entries at four sizes, and bitmap entries.
    big = Image.fromarray(picture(256, 1), "RGBA")
    big.save(os.path.join(OUT, "ico-png-sizes.ico"), sizes=[(16, 16), (32, 32), (48, 48), (256, 256)])
    Image.fromarray(picture(48, 2), "RGBA").save(
        os.path.join(OUT, "ico-bmp-pillow.ico"), sizes=[(16, 16), (48, 48)], bitmap_format="bmp")
    # Assembled here: each depth with its mask, and a multi-size icon whose small entry differs.
    for bits in (1, 4, 8, 24, 32):
        rgba = picture(32, bits)
        with open(os.path.join(OUT, f"ico-dib{bits}.ico"), "wb") as handle:
            handle.write(ico([(32, 32, bits, dib_entry(rgba, bits))]))
    small = picture(16, 9)
    large = picture(64, 3)
    with open(os.path.join(OUT, "ico-dib-sizes.ico"), "wb") as handle:
        handle.write(ico([(16, 16, 32, dib_entry(small, 32)), (64, 64, 32, dib_entry(large, 32))]))
    for name in sorted(os.listdir(OUT)):
        if not name.endswith(".ico"):
            continue
        path = os.path.join(OUT, name)
        image = Image.open(path)
        image.size = max(image.info["sizes"], key=lambda s: s[0] * s[1])
        image.convert("RGBA").save(path[:-4] + ".ref.png")
        if (16, 16) in image.info["sizes"] and len(image.info["sizes"]) > 1:
            image = Image.open(path)
            image.size = (16, 16)
            image.convert("RGBA").save(path[:-4] + ".16.ref.png")


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    svg_fixtures()
    ico_fixtures()
