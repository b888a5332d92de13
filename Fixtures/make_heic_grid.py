#!/usr/bin/env python3
"""make_heic_grid.py: a HEIC made like an iPhone's, a grid of 512x512 HEVC tiles.

    python3 Fixtures/make_heic_grid.py SOURCE OUT.heic [--width 8000 --height 6000]

Crops SOURCE (any image ImageMagick 6 reads) to the size asked, cuts it into 512-pixel
tiles (the last row and column padded), has heif-enc (libheif, x265) code each tile,
and writes one HEIF file whose primary item is a `grid` of those tiles, each a hidden
`hvc1` item with its own `hvcC` and the tiles' `ispe`, as Apple's files are laid out.
heif-enc cannot write grids itself; this writes the boxes (ISO/IEC 23008-12) directly.
"""
import argparse
import concurrent.futures
import os
import struct
import subprocess
import sys
import tempfile

TILE = 512


def box(kind, body):
    return struct.pack(">I", 8 + len(body)) + kind + body


def full_box(kind, version, flags, body):
    return box(kind, struct.pack(">I", (version << 24) | flags) + body)


def children(data, start, end):
    offset = start
    while offset + 8 <= end:
        size, kind = struct.unpack(">I4s", data[offset:offset + 8])
        yield kind, offset + 8, offset + size
        offset += size


def tile_payload(path):
    """The hvcC box and the coded data of the one image heif-enc wrote."""
    data = open(path, "rb").read()
    hvcc = None
    extent = None
    for kind, start, end in children(data, 0, len(data)):
        if kind != b"meta":
            continue
        for kind2, start2, end2 in children(data, start + 4, end):
            if kind2 == b"iprp":
                for kind3, start3, end3 in children(data, start2, end2):
                    if kind3 == b"ipco":
                        for kind4, start4, end4 in children(data, start3, end3):
                            if kind4 == b"hvcC" and hvcc is None:
                                hvcc = data[start4 - 8:end4]
            if kind2 == b"iloc":
                version = data[start2]
                sizes = data[start2 + 4]
                offset_size, length_size = sizes >> 4, sizes & 15
                base_size = data[start2 + 5] >> 4
                assert offset_size == 4 and length_size == 4, "heif-enc wrote an unexpected iloc"
                p = start2 + 6
                count = struct.unpack(">H", data[p:p + 2])[0]
                p += 2
                for _ in range(count):
                    item = struct.unpack(">H", data[p:p + 2])[0]
                    p += 2
                    if version >= 1:
                        p += 2
                    p += 2  # data reference index
                    base = int.from_bytes(data[p:p + base_size], "big") if base_size else 0
                    p += base_size
                    extents = struct.unpack(">H", data[p:p + 2])[0]
                    p += 2
                    for _ in range(extents):
                        off, length = struct.unpack(">II", data[p:p + 8])
                        p += 8
                        if extent is None:
                            extent = (base + off, length)
    assert hvcc and extent, f"{path}: no hvcC or no data"
    return hvcc, data[extent[0]:extent[0] + extent[1]]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source")
    parser.add_argument("out")
    parser.add_argument("--width", type=int, default=8000)
    parser.add_argument("--height", type=int, default=6000)
    parser.add_argument("--quality", type=int, default=70)
    parser.add_argument("--tile", type=int, default=TILE, help="the tiles' side (512, as iPhones)")
    args = parser.parse_args()
    tile_side = args.tile
    columns = (args.width + tile_side - 1) // tile_side
    rows = (args.height + tile_side - 1) // tile_side
    work = tempfile.mkdtemp(prefix="heic-grid.")
    canvas = os.path.join(work, "canvas.png")
    subprocess.run(["convert-im6.q16", args.source, "-resize", f"{args.width}x{args.height}^", "-gravity", "center",
                    "-extent", f"{args.width}x{args.height}", "-gravity", "northwest",
                    "-extent", f"{columns * tile_side}x{rows * tile_side}", canvas], check=True)
    subprocess.run(["convert-im6.q16", canvas, "-crop", f"{tile_side}x{tile_side}", "+repage",
                    os.path.join(work, "tile-%04d.png")], check=True)
    def encode(index):
        png = os.path.join(work, f"tile-{index:04d}.png")
        heic = os.path.join(work, f"tile-{index:04d}.heic")
        subprocess.run(["heif-enc", "-q", str(args.quality), "-o", heic, png], check=True, capture_output=True)
        return tile_payload(heic)

    # x265 starts slowly: the tiles are coded side by side, one process a core.
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        tiles = list(pool.map(encode, range(rows * columns)))

    count = len(tiles)
    grid_id = 1
    tile_ids = list(range(2, 2 + count))
    hdlr = full_box(b"hdlr", 0, 0, b"\0" * 4 + b"pict" + b"\0" * 12 + b"\0")
    pitm = full_box(b"pitm", 0, 0, struct.pack(">H", grid_id))
    infe = [full_box(b"infe", 2, 0, struct.pack(">HH", grid_id, 0) + b"grid" + b"\0")]
    infe += [full_box(b"infe", 2, 1, struct.pack(">HH", i, 0) + b"hvc1" + b"\0") for i in tile_ids]
    iinf = full_box(b"iinf", 0, 0, struct.pack(">H", len(infe)) + b"".join(infe))
    dimg = box(b"dimg", struct.pack(">HH", grid_id, count) + b"".join(struct.pack(">H", i) for i in tile_ids))
    iref = full_box(b"iref", 0, 0, dimg)
    grid_descriptor = struct.pack(">BBBBHH", 0, 0, rows - 1, columns - 1, args.width, args.height)
    idat = box(b"idat", grid_descriptor)
    # Properties: 1 the grid's ispe, 2 the tiles' ispe, 3... one hvcC a tile.
    properties = [full_box(b"ispe", 0, 0, struct.pack(">II", args.width, args.height)),
                  full_box(b"ispe", 0, 0, struct.pack(">II", tile_side, tile_side))]
    properties += [hvcc for hvcc, _ in tiles]
    ipco = box(b"ipco", b"".join(properties))
    entries = [struct.pack(">HB", grid_id, 1) + struct.pack(">H", 1)]
    for n, item in enumerate(tile_ids):
        entries.append(struct.pack(">HB", item, 2) + struct.pack(">HH", 0x8000 | (3 + n), 2))
    ipma = full_box(b"ipma", 0, 1, struct.pack(">I", len(entries)) + b"".join(entries))
    iprp = box(b"iprp", ipco + ipma)

    def iloc(mdat_start):
        body = struct.pack(">BBH", 0x44, 0x00, 1 + count)
        body += struct.pack(">HHHHII", grid_id, 1, 0, 1, 0, len(grid_descriptor))
        offset = mdat_start
        for item, (_, payload) in zip(tile_ids, tiles):
            body += struct.pack(">HHHHII", item, 0, 0, 1, offset, len(payload))
            offset += len(payload)
        return full_box(b"iloc", 1, 0, body)

    ftyp = box(b"ftyp", b"heic" + struct.pack(">I", 0) + b"mif1heic")
    meta_without = lambda loc: full_box(b"meta", 0, 0, hdlr + pitm + loc + iinf + iref + idat + iprp)
    meta_size = len(meta_without(iloc(0)))
    mdat_start = len(ftyp) + meta_size + 8
    meta = meta_without(iloc(mdat_start))
    mdat = b"".join(payload for _, payload in tiles)
    with open(args.out, "wb") as out:
        out.write(ftyp + meta + struct.pack(">I", 8 + len(mdat)) + b"mdat" + mdat)
    print(f"{args.out}: {args.width}x{args.height}, {rows}x{columns} tiles of {tile_side}, "
          f"{os.path.getsize(args.out):,} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
