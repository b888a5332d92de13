#!/usr/bin/env python3
"""generate-imgproxy.py: stand-ins for imgproxy's test images, for the ported suite.

    python3 Fixtures/generate-imgproxy.py        # from the repository root

Writes Fixtures/imgproxy/ (run once and commit the output; ImgproxySuiteTests only
reads it). imgproxy's own test data (github.com/imgproxy/imgproxy testdata/ and
github.com/imgproxy/test-images) is not copied: each file here is made with Pillow
and numpy to have the same name, size, format, bit depth, alpha and frame count as
imgproxy's, so imgproxy's literal expectations (sizes, statuses, headers,
interpretations) apply to it unchanged. Where imgproxy's tests compare image hashes,
the ported tests compare pixels with a stated tolerance against a reference made
here or by Pillow, never against the service's own output.
"""
import os

import numpy as np
from PIL import Image

ROOT = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(ROOT, "imgproxy")


def path(name):
    full = os.path.join(OUT, name)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    return full


def photo(w, h, seed, noise=3.0):
    """Smooth gradients, hard-edged shapes and fine noise, RGB float."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 60 + 160 * x / w + 20 * np.sin(y / 7)
    g = 40 + 150 * y / h + 20 * np.cos(x / 9)
    b = 200 - 120 * (x + y) / (w + h)
    img = np.dstack([r, g, b])
    img[(x - w * 0.7) ** 2 + (y - h * 0.6) ** 2 < (h * 0.18) ** 2] = [30, 200, 60]
    img[int(h * 0.15):int(h * 0.4), int(w * 0.1):int(w * 0.35)] = [230, 40, 50]
    img += rng.normal(0, noise, img.shape)
    return np.clip(img, 0, 255)


def grey(rgb):
    return rgb[..., 0] * 0.299 + rgb[..., 1] * 0.587 + rgb[..., 2] * 0.114


def to8(a):
    return np.clip(a + 0.5, 0, 255).astype(np.uint8)


def to16(a):
    return np.clip(a * 257 + 0.5, 0, 65535).astype(np.uint16)


def save16_png(name, array):
    """A 16-bit RGB PNG (Pillow keeps RGB at 8 bits, so the chunks are written here)."""
    import struct
    import zlib

    h, w, _ = array.shape
    raw = b"".join(b"\x00" + array[row].astype(">u2").tobytes() for row in range(h))

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    with open(path(name), "wb") as f:
        f.write(png)


def save16_tiff(name, array):
    """16-bit TIFF: grey as I;16, RGB with tifffile-free raw strips."""
    if array.ndim == 2:
        h, w = array.shape
        Image.frombytes("I;16", (w, h), array.astype("<u2").tobytes()).save(path(name), compression="raw")
        return
    import struct

    h, w, _ = array.shape
    data = array.astype("<u2").tobytes()
    entries = [
        (256, 3, 1, w), (257, 3, 1, h), (258, 3, 3, 0), (259, 3, 1, 1), (262, 3, 1, 2),
        (273, 4, 1, 0), (277, 3, 1, 3), (278, 3, 1, h), (279, 4, 1, len(data)), (284, 3, 1, 1),
    ]
    header = b"II*\x00" + struct.pack("<I", 8)
    ifd_size = 2 + len(entries) * 12 + 4
    bits_offset = 8 + ifd_size
    data_offset = bits_offset + 6
    ifd = struct.pack("<H", len(entries))
    for tag, kind, count, value in entries:
        if tag == 258:
            value = bits_offset
        if tag == 273:
            value = data_offset
        if kind == 3 and count == 1:
            ifd += struct.pack("<HHIHH", tag, kind, count, value, 0)
        else:
            ifd += struct.pack("<HHII", tag, kind, count, value)
    ifd += struct.pack("<I", 0)
    with open(path(name), "wb") as f:
        f.write(header + ifd + struct.pack("<HHH", 16, 16, 16) + data)


def main():
    # testdata/: the small files the handler tests name.
    Image.fromarray(to8(photo(10, 10, 1)), "RGB").save(path("test1.png"))
    Image.fromarray(to8(grey(photo(10, 10, 2))), "L").save(path("test1.jpg"), quality=90)
    geometry = np.zeros((100, 200, 3))
    geometry[:, :] = [240, 240, 240]
    geometry[10:90, 10:90] = [200, 30, 30]
    geometry[25:75, 110:190] = [30, 30, 200]
    geometry[45:55, :] = [30, 160, 30]
    Image.fromarray(to8(geometry), "RGB").save(path("geometry.png"))
    Image.fromarray(to8(photo(200, 100, 3)), "RGB").save(path("test2.jpg"), quality=90)

    # test-images/: the format and colour suites.
    Image.fromarray(to8(grey(photo(600, 800, 4))), "L").save(path("test-images/jpg/jpg.jpg"), quality=90)
    frames = []
    for index in range(5):
        frame = photo(492, 229, 10 + index)
        frame = np.roll(frame, index * 40, axis=1)
        frames.append(Image.fromarray(to8(frame), "RGB").quantize(64))
    frames[0].save(
        path("test-images/gif/gif.gif"), save_all=True, append_images=frames[1:], duration=100, loop=0)
    Image.fromarray(to8(photo(400, 400, 5)), "RGB").save(path("test-images/png/8-bpp.png"))
    save16_png("test-images/png/16-bpp.png", to16(photo(600, 600, 6, noise=0)) // 256 * 257)
    Image.fromarray(to8(grey(photo(150, 200, 7))), "L").save(path("test-images/png/8-bpp-grayscale.png"))
    Image.frombytes("I;16", (1000, 1000), (to16(grey(photo(1000, 1000, 8, noise=0))) // 256 * 257).astype("<u2").tobytes()).save(path("test-images/png/16-bpp-grayscale.png"))
    Image.fromarray(to8(photo(73, 43, 9)), "RGB").save(path("test-images/tiff/8-bpp.tiff"))
    save16_tiff("test-images/tiff/16-bpp.tiff", to16(photo(73, 43, 10)))
    Image.fromarray(to8(grey(photo(277, 339, 11))), "L").save(path("test-images/tiff/8-bpp-grayscale.tiff"))
    save16_tiff("test-images/tiff/16-bpp-grayscale.tiff", to16(grey(photo(73, 43, 12))))

    # testdata/trim*.png: trim1 nested grey frames; trim2 red, green, blue bands; trim3 the
    # same with a transparent bottom band (palette images, as imgproxy's).
    # trim1: on white, five nested frames, each 15 pixels inside the last, whose
    # differences from white (95, 135, 175, 210, 255) fall between imgproxy's
    # thresholds (5, 100, 150, 200, 220); the outermost is 10 pixels from the left and
    # top and 20 from the right and bottom, so the equal-margin trims differ.
    trim1 = np.full((250, 350), 255, np.uint8)
    for step, value in enumerate([160, 120, 80, 45, 0]):
        inset = 15 * step
        trim1[10 + inset:230 - inset, 10 + inset:330 - inset] = value
    Image.fromarray(trim1, "L").save(path("trim1.png"))

    # testdata/bmp-invalid-bpp.bmp: an uncompressed BMP declaring 40 bits a pixel, 512 wide.
    import struct
    width, height, bpp = 512, 4, 40
    row = (width * bpp // 8 + 3) & ~3
    pixels = bytes(row * height)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, bpp, 0, len(pixels), 2835, 2835, 0, 0)
    header = struct.pack("<2sIHHI", b"BM", 14 + len(info) + len(pixels), 0, 0, 14 + len(info))
    with open(path("bmp-invalid-bpp.bmp"), "wb") as f:
        f.write(header + info + pixels)
    bands = np.zeros((200, 200, 3), np.uint8)
    bands[:30] = [255, 0, 0]
    bands[30:130] = [0, 255, 0]
    bands[130:] = [0, 0, 255]
    Image.fromarray(bands, "RGB").convert("P", palette=Image.ADAPTIVE, colors=3).save(path("trim2.png"))
    rgba = np.dstack([bands, np.full((200, 200), 255, np.uint8)])
    rgba[130:] = [0, 0, 0, 0]
    trim3 = Image.fromarray(rgba, "RGBA").convert("P", palette=Image.ADAPTIVE, colors=3)
    trim3.save(path("trim3.png"), transparency=trim3.getpixel((0, 199)))


if __name__ == "__main__":
    main()
