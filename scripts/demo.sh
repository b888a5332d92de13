#!/usr/bin/env bash
# The main job: builds imageloader (release), then inspects, validates and decodes the
# bundled fixtures, writing PNGs to demo-output/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install-system-libraries.sh
swift build -c release --product imageloader
tool=.build/release/imageloader
out=demo-output
rm -rf "$out" && mkdir -p "$out"

echo "== imageloader info (one JSON object per file)"
for file in Fixtures/images/{png-rgba8.png,jpeg-orientation6.jpg,gif-animation.gif,tiff-multipage.tif,webp-animation.webp,bmp-32bit-v5-alpha.bmp}; do
  printf '%-42s ' "${file#Fixtures/images/}"
  "$tool" info "$file"
done

echo "== imageloader validate (every fixture, every frame decoded)"
"$tool" validate Fixtures/images/* && echo "all $(ls Fixtures/images | wc -l) fixtures are valid"

echo "== imageloader validate on hostile files: one line each (libtiff repairs the byte counts of"
echo "   uncompressed strips from the image size, so tiff-absurd-strips-uncompressed.tif decodes)"
"$tool" validate Fixtures/hostile/* || true

echo "== imageloader decode (PNGs in $out/)"
"$tool" decode Fixtures/images/gif-animation.gif --frame 2 -o "$out/gif-animation-frame2.png"
"$tool" decode Fixtures/images/tiff-pages-sizes.tif --frame 1 -o "$out/tiff-page1.png"
"$tool" decode Fixtures/images/webp-animation.webp --frame 3 -o "$out/webp-frame3.png"
"$tool" decode Fixtures/images/jpeg-ycck.jpg -o "$out/jpeg-ycck.png"
"$tool" decode Fixtures/images/bmp-rle4.bmp -o "$out/bmp-rle4.png"
ls -l "$out"
