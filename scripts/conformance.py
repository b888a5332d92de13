#!/usr/bin/env python3
"""conformance.py: decode whole conformance suites with imageloader and compare with Pillow's plugins.

    python3 scripts/conformance.py IMAGELOADER FILE...

For each file: `imageloader info` (for the orientation) and `imageloader decode -o`, the
orientation applied, against Pillow with pillow-heif, Pillow's AVIF plugin and
pillow-jxl-plugin (a virtual environment with pillow, numpy, pillow-heif,
pillow-jxl-plugin). Prints the largest and mean channel difference, or each side's error.
Pillow's AVIF plugin ignores irot/imir and clap, and pillow-jxl-plugin shows an
animation's last frame: read those rows with that in mind (the suites' own references,
where they have them, are what Fixtures/generate-heif-avif-jxl.py commits).
The suites: github.com/nokiatech/heif_conformance, github.com/AOMediaCodec/av1-avif
(testFiles), github.com/libjxl/conformance.
"""
import json
import os
import subprocess
import sys

import numpy as np
from PIL import Image
import pillow_heif
import pillow_jxl  # noqa: F401

pillow_heif.register_heif_opener()
ORIENT = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180, 4: Image.Transpose.FLIP_TOP_BOTTOM,
          5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
          8: Image.Transpose.ROTATE_90}


def main():
    cli, files = sys.argv[1], sys.argv[2:]
    out = "/tmp/conformance-out.png"
    for path in files:
        decoded = subprocess.run([cli, "decode", path, "-o", out], capture_output=True, text=True)
        try:
            reference = Image.open(path).convert("RGBA")
        except Exception as error:  # noqa: BLE001 - the reference's failure is a result too
            reference, reference_error = None, str(error)[:80]
        if decoded.returncode != 0:
            ours = (decoded.stderr.strip().splitlines() or ["?"])[-1][:120]
            print(f"{path}: ours: {ours} | reference: {'decodes' if reference else reference_error}")
            continue
        info = json.loads(subprocess.run([cli, "info", path], capture_output=True, text=True).stdout or "{}")
        image = Image.open(out).convert("RGBA")
        if info.get("orientation", 1) in ORIENT:
            image = image.transpose(ORIENT[info["orientation"]])
        if reference is None:
            print(f"{path}: ours {image.size} | reference: {reference_error}")
            continue
        a, b = np.asarray(image).astype(int), np.asarray(reference).astype(int)
        if a.shape != b.shape:
            print(f"{path}: size: ours {image.size} (orientation {info.get('orientation')}), reference {reference.size}")
            continue
        d = np.abs(a - b)
        print(f"{path}: max {d.max()} mean {d.mean():.3f} orientation {info.get('orientation')} size {image.size}")


if __name__ == "__main__":
    main()
