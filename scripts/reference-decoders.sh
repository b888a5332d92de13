#!/usr/bin/env bash
# Independent decoders the tests check some of the project's output with (results in
# formats the project also decodes itself, where its own decoder would not be an
# independent reference): Pillow with pillow-heif, in a virtual environment of their
# own, .build/reference-venv.
#
#   scripts/reference-decoders.sh install            # make it when missing (idempotent)
#   scripts/reference-decoders.sh decode IN OUT.png  # IN decoded by Pillow/pillow-heif, as 8-bit RGBA
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=$root/.build/reference-venv
# Pinned: the versions the tests were written against.
packages=("pillow==12.0.0" "pillow-heif==1.1.1")

install() {
    if [ -x "$venv/bin/python" ] && [ -f "$venv/.complete" ]; then return; fi
    if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
        local sudo=""
        if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
        $sudo apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-venv >/dev/null
    fi
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "${packages[@]}"
    touch "$venv/.complete"
}

case ${1:-install} in
install) install ;;
decode)
    install
    exec "$venv/bin/python" -c '
import sys
from PIL import Image
import pillow_heif
pillow_heif.register_heif_opener()
Image.open(sys.argv[1]).convert("RGBA").save(sys.argv[2])
' "$2" "$3"
    ;;
*)
    echo "usage: $0 install|decode IN OUT.png" >&2
    exit 64
    ;;
esac
