#!/usr/bin/env bash
# Progressive JPEGs of one photograph for the DC-scan thumbnail path (JPEGDCImage): the
# scan scripts of libjpeg and of an optimiser (DC non-interleaved, then AC bands),
# restart intervals, every sampling the path reads (4:2:0, 4:2:2, 4:4:0, 4:4:4, grey),
# an odd size, and 4:1:1, which it leaves to libjpeg. The photograph is scikit-image's
# "astronaut" (NASA, public domain), which scripts/demo-photos.sh fetches; its BMP is
# written by the package's own command line. Needs libjpeg-turbo-progs.
set -euo pipefail
cd "$(dirname "$0")"
out=progressive
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
photo=../.build/demo-photos/skimage/data/astronaut.png
[ -f "$photo" ] || (cd .. && bash scripts/demo-photos.sh >/dev/null)
(cd .. && swift run -q imageloader thumbnail "Fixtures/$photo" --output "$work/photo.bmp" --size 512)
cjpeg -quality 90 -outfile "$work/base.jpg" "$work/photo.bmp"
cat > "$work/optimiser.txt" <<'SCANS'
0: 0 0 0 0;
1: 0 0 0 0;
2: 0 0 0 0;
0: 1 5 0 0;
2: 1 63 0 0;
1: 1 63 0 0;
0: 6 63 0 0;
SCANS
jpegtran -progressive -outfile "$out/prog-420-libjpeg.jpg" "$work/base.jpg"
jpegtran -scans "$work/optimiser.txt" -outfile "$out/prog-420-optimiser.jpg" "$work/base.jpg"
jpegtran -progressive -restart 3B -outfile "$out/prog-420-restart.jpg" "$work/base.jpg"
jpegtran -progressive -crop 509x505+0+0 -outfile "$out/prog-420-odd.jpg" "$work/base.jpg"
cjpeg -quality 90 -sample 2x1 -progressive -outfile "$out/prog-422.jpg" "$work/photo.bmp"
cjpeg -quality 90 -sample 1x2 -progressive -outfile "$out/prog-440.jpg" "$work/photo.bmp"
cjpeg -quality 90 -sample 1x1 -progressive -outfile "$out/prog-444.jpg" "$work/photo.bmp"
cjpeg -quality 90 -grayscale -progressive -outfile "$out/prog-grey.jpg" "$work/photo.bmp"
cjpeg -quality 90 -sample 4x1 -progressive -outfile "$out/prog-411.jpg" "$work/photo.bmp"
