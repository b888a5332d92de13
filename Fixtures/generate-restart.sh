#!/usr/bin/env bash
# Baseline JPEGs with restart markers for the strip decode (JPEGStrips), from the
# photograph of Fixtures/progressive (scikit-image's "astronaut", NASA, public domain):
# markers every MCU row, every 4 MCUs (a boundary every row) and every 7 (one every 7
# rows), every sampling (4:2:0, 4:2:2, 4:4:0, 4:4:4, grey), an odd size, and a 1024x1024
# file large enough for the decoders to take the path on their own. Needs
# libjpeg-turbo-progs.
set -euo pipefail
cd "$(dirname "$0")"
out=restart
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
djpeg -pnm -outfile "$work/photo.ppm" progressive/prog-444.jpg
djpeg -pnm -scale 2/1 -outfile "$work/large.ppm" progressive/prog-444.jpg
cjpeg -quality 85 -restart 1 -outfile "$out/rst-420-rows.jpg" "$work/photo.ppm"
cjpeg -quality 85 -restart 4B -outfile "$out/rst-420-4mcu.jpg" "$work/photo.ppm"
cjpeg -quality 85 -restart 7B -outfile "$out/rst-420-7mcu.jpg" "$work/photo.ppm"
cjpeg -quality 85 -outfile "$work/plain.jpg" "$work/photo.ppm"
jpegtran -restart 1 -crop 509x505+0+0 -outfile "$out/rst-420-odd.jpg" "$work/plain.jpg"
cjpeg -quality 85 -sample 2x1 -restart 1 -outfile "$out/rst-422.jpg" "$work/photo.ppm"
cjpeg -quality 85 -sample 1x2 -restart 1 -outfile "$out/rst-440.jpg" "$work/photo.ppm"
cjpeg -quality 85 -sample 1x1 -restart 2 -outfile "$out/rst-444.jpg" "$work/photo.ppm"
cjpeg -quality 85 -grayscale -restart 1 -outfile "$out/rst-grey.jpg" "$work/photo.ppm"
cjpeg -quality 60 -restart 1 -outfile "$out/rst-420-large.jpg" "$work/large.ppm"
cjpeg -quality 60 -outfile "$out/plain-420-large.jpg" "$work/large.ppm"
