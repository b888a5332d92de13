#!/usr/bin/env bash
# Makes the demo's sources: public-domain photographs from scikit-image's wheel (PyPI),
# written in every format imageloader reads, each by Debian's own encoder:
#   astronaut.heic (heif-enc, x265)   retina.avif (avifenc, aom)   chelsea.jxl (cjxl)
#   rocket.webp (cwebp)   photo.jpg (coffee; what the README's examples read)
#   motorcycle.jpg (progressive, EXIF orientation 6: stored on its side)   hubble.png
#   camera.tiff (grey, LZW)   ihc.bmp   logo.png (transparent around the circle)
#   animation.gif (four photographs, looping; coins first)
#   astronaut-large.jpg (enlarged to 3072x3072, the size of a camera's file)
# Installs what is missing (apt as root or through sudo; the wheel with pip in its own
# virtual environment). Files already there are kept.
#
#   bash scripts/demo-photos.sh [FOLDER]     (default: demo-output/sources)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:-demo-output/sources}
work=.build/demo-photos
mkdir -p "$out" "$work"

# Debian's encoders, and ImageMagick by its real name (a plain `convert` may be another program).
declare -A packages=([convert-im6.q16]=imagemagick [cwebp]=webp [heif-enc]=libheif-examples [avifenc]=libavif-bin
  [cjxl]=libjxl-tools)
missing=()
for tool in "${!packages[@]}"; do command -v "$tool" >/dev/null || missing+=("${packages[$tool]}"); done
if ((${#missing[@]})); then
  SUDO=
  ((EUID == 0)) || SUDO=sudo
  echo "demo-photos: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
IM=convert-im6.q16

# The photographs, from the scikit-image wheel (only its data files are used; nothing is installed).
data=$work/skimage/data
if [[ ! -f $data/astronaut.png ]]; then
  source scripts/python-venv.sh
  install_venv "$work/venv"
  "$work/venv/bin/pip" download -q --no-deps --only-binary=:all: -d "$work/wheel" scikit-image==0.26.0
  "$work/venv/bin/python" - "$work" <<'PY'
import glob, sys, zipfile
work = sys.argv[1]
with zipfile.ZipFile(glob.glob(work + "/wheel/scikit_image-*.whl")[0]) as wheel:
    for name in wheel.namelist():
        if name.startswith("skimage/data/") and name.endswith((".png", ".jpg")):
            wheel.extract(name, work)
PY
fi

# Each file is written to a temporary name ($tmp, with the file's extension, which some
# encoders go by) and renamed: an interrupted run leaves no half file for the next to keep.
write() { # write NAME 'COMMAND writing "$tmp"'
  local name=$1
  [[ -s $out/$name ]] && return
  tmp=$work/part-$name
  eval "$2"
  mv "$tmp" "$out/$name"
  echo "demo-photos: $out/$name" >&2
}
png() { [[ -s $2 ]] || "$IM" "$1" -strip "PNG24:$2"; } # the encoders' input: 8-bit RGB, no metadata

png "$data/astronaut.png" "$work/astronaut.png"
png "$data/retina.jpg" "$work/retina.png"
png "$data/chelsea.png" "$work/chelsea.png"
png "$data/rocket.jpg" "$work/rocket.png"
write astronaut.heic 'heif-enc -q 70 "$work/astronaut.png" -o "$tmp" >/dev/null'
write retina.avif 'avifenc -s 6 --min 10 --max 30 "$work/retina.png" "$tmp" >/dev/null'
write chelsea.jxl 'cjxl "$work/chelsea.png" "$tmp" -d 1.0 -e 7 >/dev/null 2>&1'
write rocket.webp 'cwebp -quiet -q 82 "$work/rocket.png" -o "$tmp"'
write hubble.png '"$IM" "$data/hubble_deep_field.jpg" -strip "PNG24:$tmp"'
# Stored turned a quarter left, with EXIF orientation 6 (turn right to show), as a camera held sideways writes it.
write motorcycle.jpg '"$IM" "$data/motorcycle_left.png" -rotate -90 -quality 88 -interlace JPEG "JPEG:$work/sideways.jpg" &&
  python3 - "$work/sideways.jpg" "$tmp" <<"PY"
import struct, sys
jpeg = open(sys.argv[1], "rb").read()
# One IFD entry: Orientation (0x0112), SHORT, 1 value: 6.
tiff = b"II*\0" + struct.pack("<IHHHIHHI", 8, 1, 0x0112, 3, 1, 6, 0, 0)
exif = b"Exif\0\0" + tiff
open(sys.argv[2], "wb").write(jpeg[:2] + b"\xff\xe1" + struct.pack(">H", len(exif) + 2) + exif + jpeg[2:])
PY'
write camera.tiff '"$IM" "$data/camera.png" -strip -colorspace Gray -compress LZW "TIFF:$tmp"'
write ihc.bmp '"$IM" "$data/ihc.png" -strip "BMP3:$tmp"'
write logo.png '"$IM" "$data/logo.png" -strip -alpha set -fuzz 4% -fill none -draw "color 0,0 floodfill" \
  -draw "color 499,0 floodfill" -draw "color 0,499 floodfill" -draw "color 499,499 floodfill" "PNG32:$tmp"'
frame() { echo "( $1 -resize 360x240^ -gravity center -extent 360x240 )"; }
write animation.gif '"$IM" -delay 80 -loop 0 $(frame "$data/coins.png") $(frame "$data/rocket.jpg") \
  $(frame "$data/chelsea.png") $(frame "$data/coffee.png") -layers Optimize "GIF:$tmp"'
write astronaut-large.jpg '"$IM" "$data/astronaut.png" -filter Lanczos -resize 3072x3072 -quality 90 "JPEG:$tmp"'
write photo.jpg '"$IM" "$data/coffee.png" -quality 90 "JPEG:$tmp"'
echo "demo-photos: $(ls "$out" | wc -l) files in $out" >&2
