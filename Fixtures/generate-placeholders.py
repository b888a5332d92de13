#!/usr/bin/env python3
"""generate-placeholders.py: BlurHash and ThumbHash test vectors from their reference encoders.

    python3 -m venv /tmp/phvenv && /tmp/phvenv/bin/pip install blurhash==1.1.5 pillow numpy
    /tmp/phvenv/bin/python Fixtures/generate-placeholders.py --thumbhash-js PATH/js/thumbhash.js \
        --blurhash-c PATH/C

Writes small images to Fixtures/placeholders/ and their hashes, computed by Wolt's
reference BlurHash encoder (C/encode.c of github.com/woltapp/blurhash, built here with
gcc; the PyPI `blurhash` port is run too and must agree) and by Evan
Wallace's reference ThumbHash encoder itself (js/thumbhash.js of github.com/evanw/thumbhash,
run with Node.js), to Fixtures/placeholders/vectors.json. (The PyPI `thumbhash` port
rounds halves to even and mis-encodes alpha, so it is not used.)
Dominant colours are computed here too, with numpy's median cut written from the
library's documented rule, for a few images whose colours are known by construction.
BlurHash looks at RGB only: for the image with alpha, the reference is given it
composited over white, as the library documents.

Also the EXIF fixtures of `GET /info` and PhotoMetadata: a JPEG, a PNG and a WebP whose
EXIF blocks Pillow writes (Make, Model, DateTimeOriginal, LensModel, GPS), and the names
Pillow's ImageCms reads from the profiles in Fixtures/profiles.
"""
import argparse
import json
import os
import shutil
import subprocess
import tempfile

import blurhash
import numpy as np
from PIL import Image, ImageCms

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "placeholders")


def photo(w, h, seed):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 40 + 180 * x / w
    g = 60 + 140 * y / h + 30 * np.sin(x / 5)
    b = 220 - 150 * (x + y) / (w + h)
    img = np.dstack([r, g, b]) + rng.normal(0, 8, (h, w, 3))
    img[(x - w * 0.6) ** 2 + (y - h * 0.5) ** 2 < (h * 0.25) ** 2] = [240, 200, 40]
    return np.clip(img, 0, 255).astype(np.uint8)


def reference_thumbhashes(script, images):
    """ThumbHashes of `images` (name -> RGBA array) by the reference encoder, under Node.js."""
    with tempfile.TemporaryDirectory() as work:
        shutil.copy(script, os.path.join(work, "thumbhash.mjs"))
        inputs = {name: {"w": a.shape[1], "h": a.shape[0], "rgba": a.reshape(-1).tolist()} for name, a in images.items()}
        with open(os.path.join(work, "inputs.json"), "w") as out:
            json.dump(inputs, out)
        runner = os.path.join(work, "run.mjs")
        with open(runner, "w") as out:
            out.write("import { rgbaToThumbHash } from './thumbhash.mjs'\n"
                      "import { readFileSync } from 'fs'\n"
                      "const inputs = JSON.parse(readFileSync(process.argv[2]))\n"
                      "const result = {}\n"
                      "for (const [name, i] of Object.entries(inputs))\n"
                      "  result[name] = Buffer.from(rgbaToThumbHash(i.w, i.h, i.rgba)).toString('base64')\n"
                      "console.log(JSON.stringify(result))\n")
        out = subprocess.run(["node", runner, os.path.join(work, "inputs.json")], check=True, capture_output=True,
                             text=True).stdout
        return json.loads(out)


def reference_blurhash(c_folder, work, rgb, cx, cy):
    """BlurHash of an RGB array by Wolt's reference C encoder (built once into `work`)."""
    program = os.path.join(work, "blurhash_encoder")
    if not os.path.exists(program):
        subprocess.run(["gcc", "-O2", "-o", program, os.path.join(c_folder, "encode_stb.c"),
                        os.path.join(c_folder, "encode.c"), "-lm"], check=True)
    path = os.path.join(work, "input.png")
    Image.fromarray(rgb, "RGB").save(path)
    return subprocess.run([program, str(cx), str(cy), path], check=True, capture_output=True,
                          text=True).stdout.strip()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--thumbhash-js", required=True, help="js/thumbhash.js of github.com/evanw/thumbhash")
    parser.add_argument("--blurhash-c", required=True, help="the C folder of github.com/woltapp/blurhash")
    args = parser.parse_args()
    work = tempfile.mkdtemp()
    os.makedirs(ROOT, exist_ok=True)
    images = {
        "photo-32x24": np.dstack([photo(32, 24, 1), np.full((24, 32), 255, np.uint8)]),
        "photo-100x75": np.dstack([photo(100, 75, 2), np.full((75, 100), 255, np.uint8)]),
        "odd-17x31": np.dstack([photo(17, 31, 3), np.full((31, 17), 255, np.uint8)]),
    }
    y, x = np.mgrid[0:64, 0:64]
    alpha = np.dstack([photo(64, 64, 4), np.clip(255 - 4 * np.hypot(x - 32, y - 32), 0, 255).astype(np.uint8)])
    images["alpha-64"] = alpha
    vectors = []
    thumbs = reference_thumbhashes(args.thumbhash_js, images)
    for name, rgba in images.items():
        Image.fromarray(rgba, "RGBA").save(os.path.join(ROOT, name + ".png"))
        # BlurHash sees RGB; transparent pixels count as over white.
        a = rgba[..., 3:4].astype(np.float64) / 255
        over_white = np.floor(rgba[..., :3] * a + 255 * (1 - a) + 0.5).astype(np.uint8)
        blur = {}
        for cx, cy in [(4, 3), (5, 5), (1, 1), (8, 8)]:  # the C tool takes up to 8
            reference = reference_blurhash(args.blurhash_c, work, over_white, cx, cy)
            assert reference == blurhash.encode(over_white, cx, cy), (name, cx, cy)
            blur[f"{cx}x{cy}"] = reference
        vectors.append({"image": name + ".png", "blurhash": blur, "thumbhash": thumbs[name]})
    # Dominant colours known by construction: three flat areas, 60%, 30% and 10%.
    flags = np.zeros((10, 100, 4), np.uint8)
    flags[..., 3] = 255
    flags[:, :60, :3] = [200, 30, 40]
    flags[:, 60:90, :3] = [20, 40, 180]
    flags[:, 90:, :3] = [250, 250, 250]
    Image.fromarray(flags, "RGBA").save(os.path.join(ROOT, "three-colours.png"))
    # EXIF: the same fields in each container Pillow writes them to.
    exif = Image.Exif()
    exif[0x010F] = "ImageLoader Camera Co."
    exif[0x0110] = "Model X-1"
    exif[0x0132] = "2020:01:02 03:04:05"
    exif_ifd = exif.get_ifd(0x8769)
    exif_ifd[0x9003] = "2024:05:17 08:15:42"
    exif_ifd[0xA434] = "24-70mm f/2.8"
    gps = exif.get_ifd(0x8825)
    gps[1] = "S"
    gps[2] = (33.0, 51.0, 54.36)
    gps[3] = "E"
    gps[4] = (151.0, 12.0, 36.0)
    small = Image.fromarray(photo(40, 30, 5))
    for ext, kind in [("jpg", "JPEG"), ("png", "PNG"), ("webp", "WEBP")]:
        small.save(os.path.join(ROOT, "exif." + ext), kind, exif=exif.tobytes())
    # A photo with a copyright, an artist and an orientation, for what results keep.
    signed = Image.Exif()
    signed[0x010F] = "ImageLoader Camera Co."
    signed[0x0112] = 6
    signed[0x013B] = "A. Photographer"
    signed[0x8298] = "(c) 2026 A. Photographer"
    small.save(os.path.join(ROOT, "exif-copyright.jpg"), "JPEG", exif=signed.tobytes())
    expected_exif = {"dateTaken": "2024-05-17T08:15:42", "make": "ImageLoader Camera Co.", "model": "Model X-1",
                     "lens": "24-70mm f/2.8", "latitude": -(33 + 51 / 60 + 54.36 / 3600),
                     "longitude": 151 + 12 / 60 + 36 / 3600}
    profiles = {}
    folder = os.path.join(os.path.dirname(ROOT), "profiles")
    for name in sorted(os.listdir(folder)):
        profiles[name] = ImageCms.getProfileDescription(ImageCms.getOpenProfile(os.path.join(folder, name))).strip()
    with open(os.path.join(ROOT, "vectors.json"), "w") as out:
        json.dump({"vectors": vectors, "dominant": {"image": "three-colours.png",
                                                    "colours": ["c81e28", "1428b4", "fafafa"]},
                   "exif": {"images": ["exif.jpg", "exif.png", "exif.webp"], "fields": expected_exif},
                   "profiles": profiles}, out, indent=1)
        out.write("\n")


if __name__ == "__main__":
    main()
