#!/usr/bin/env python3
"""Writes the hostile regression files of issue 9 into Fixtures/hostile/ (standard
library only). Each is small and claims something huge; the tests in
Tests/RasterImageTests/ResourceLimitTests.swift say what each must produce."""
import os, struct, zlib

here = os.path.dirname(os.path.abspath(__file__))
images = os.path.join(here, "..", "images")

def write(name, data):
    with open(os.path.join(here, name), "wb") as f:
        f.write(data)

def tiff(width, height, tile, bits, samples, compression):
    """A little-endian TIFF with one tile of tile x tile, claiming 16 bytes of data."""
    entries = [
        (256, 4, 1, width), (257, 4, 1, height), (258, 3, 1, bits), (259, 3, 1, compression),
        (262, 3, 1, 1 if samples == 1 else 2), (277, 3, 1, samples), (284, 3, 1, 1),
        (322, 4, 1, tile), (323, 4, 1, tile), (324, 4, 1, 8), (325, 4, 1, 16),
    ]
    if samples == 4:
        entries.append((338, 3, 1, 2))
    entries.sort()
    ifd_offset = 8 + 16
    out = b"II*\x00" + struct.pack("<I", ifd_offset) + b"\x78\x9c" + b"\x00" * 14
    out += struct.pack("<H", len(entries))
    for tag, kind, count, value in entries:
        packed = struct.pack("<H", value) + b"\0\0" if kind == 3 else struct.pack("<I", value)
        out += struct.pack("<HHI", tag, kind, count) + packed
    return out + struct.pack("<I", 0)

# 1x1 image, one 65536x65536 16-bit tile: 8 GiB asked of the allocator.
write("tiff-1x1-tile-65536.tif", tiff(1, 1, 65536, 16, 1, 1))
# 1x1 image, one 16384x16384 RGBA deflate tile: 1 GiB to inflate into.
write("tiff-1x1-deflate-tile-16384.tif", tiff(1, 1, 16384, 8, 4, 8))

def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

# 100,000,000 x 1, 16-bit RGBA: 1.6 GB of libpng row buffers.
ihdr = struct.pack(">IIBBBBB", 100_000_000, 1, 16, 6, 0, 0, 0)
write("png-100000000x1-rgba16.png",
      b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(b"")) + png_chunk(b"IEND", b""))

# 1 x 100,000,000 BMP header (62 bytes, no pixels): a .fill thumbnail once asked for 3.2 GB of taps.
bmp_header = struct.pack("<2sIHHI", b"BM", 62, 0, 0, 62) + struct.pack(
    "<IiiHHIIiiII", 40, 1, 100_000_000, 1, 24, 0, 0, 2835, 2835, 0, 0) + b"\0" * 8
write("bmp-1x100000000.bmp", bmp_header[:62])

# A progressive JPEG whose frame header claims 9000x9000, cut 16 bytes into its first
# scan: libjpeg would zero ~240 MB of coefficients before noticing the data is missing.
jpeg = bytearray(open(os.path.join(images, "jpeg-progressive.jpg"), "rb").read())
sof = jpeg.find(b"\xff\xc2")
struct.pack_into(">HH", jpeg, sof + 5, 9000, 9000)
sos = jpeg.find(b"\xff\xda")
cut = sos + 2 + struct.unpack(">H", jpeg[sos + 2:sos + 4])[0] + 16
write("jpeg-progressive-9000x9000-truncated.jpg", bytes(jpeg[:cut]))

# An animated WebP whose 130 frames each last 0xFFFFFF ms: libwebp's Int32 timestamp wraps.
webp = open(os.path.join(images, "webp-animation.webp"), "rb").read()
chunks, at = [], 12
while at + 8 <= len(webp):
    kind, size = webp[at:at + 4], struct.unpack("<I", webp[at + 4:at + 8])[0]
    chunks.append((kind, webp[at + 8:at + 8 + size]))
    at += 8 + size + (size & 1)
frame = next(data for kind, data in chunks if kind == b"ANMF")
frame = frame[:12] + (0xFFFFFF).to_bytes(3, "little") + frame[15:]
body = b"".join(struct.pack("<4sI", k, len(d)) + d + (b"\0" if len(d) & 1 else b"") for k, d in chunks if k in (b"VP8X", b"ANIM"))
body += (struct.pack("<4sI", b"ANMF", len(frame)) + frame + (b"\0" if len(frame) & 1 else b"")) * 130
write("webp-timestamps-wrap.webp", b"RIFF" + struct.pack("<I", len(body) + 4) + b"WEBP" + body)
