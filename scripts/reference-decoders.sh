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

# shellcheck source=scripts/python-venv.sh
source "$root/scripts/python-venv.sh"
install() { install_venv "$venv" "${packages[@]}"; }

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
