#!/usr/bin/env bash
# Installs the C libraries ImageLoader builds against, when they are missing
# (Debian and Ubuntu, through apt; as root, or through sudo).
set -euo pipefail

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# The codecs, Little CMS, the inflaters; FreeType's headers and the DejaVu fonts for the
# contact sheets' labels (FreeType itself is opened at run time, only for a sheet);
# librsvg for SVG sources (opened at run time, when the first SVG is met: no headers);
# x265 through libheif's plug-in for HEIC results (libheif1 depends on it).
packages=(libpng-dev libgif-dev libtiff-dev libwebp-dev liblcms2-dev libdeflate-dev libisal-dev libheif-dev libavif-dev
  libjxl-dev libfreetype-dev fonts-dejavu-core pkg-config librsvg2-2)
missing=()
for package in "${packages[@]}"; do
  installed "$package" || missing+=("$package")
done
# libjpeg-turbo: Debian calls it libjpeg62-turbo-dev, Ubuntu libjpeg-turbo8-dev.
jpeg_installed=0
for package in libjpeg62-turbo-dev libjpeg-turbo8-dev; do
  installed "$package" && jpeg_installed=1
done

if ((${#missing[@]} == 0 && jpeg_installed)); then
  echo "install-system-libraries: all present"
  exit 0
fi

SUDO=
if ((EUID != 0)); then
  command -v sudo >/dev/null || { echo "install-system-libraries: run as root, or install sudo" >&2; exit 1; }
  SUDO=sudo
fi
$SUDO apt-get update -qq
if ((!jpeg_installed)); then
  for package in libjpeg62-turbo-dev libjpeg-turbo8-dev; do
    if apt-cache show "$package" >/dev/null 2>&1; then missing+=("$package"); break; fi
  done
fi
echo "install-system-libraries: installing ${missing[*]}"
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
