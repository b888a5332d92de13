#!/usr/bin/env bash
# Writes serve's settings table (every option, its IMAGELOADER_* and IMGPROXY_* variables,
# its help text) into ServiceReference.md, between its two marker lines, from the built
# binary's own description of its options: run after adding or changing an option.
# Usage: bash scripts/settings-table.sh [--check]   (--check: exit 1 when it differs)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
swift build --product imageloader >/dev/null
bin=$(swift build --show-bin-path)/imageloader
document=Sources/ImageService/ImageService.docc/ServiceReference.md
table=$(mktemp)
trap 'rm -f "$table"' EXIT
"$bin" serve --settings-table >"$table"
python3 - "$document" "$table" "${1:-}" <<'PY'
import sys
document, table, mode = sys.argv[1], sys.argv[2], sys.argv[3]
start, end = "<!-- settings table: written by scripts/settings-table.sh from serve's options -->", "<!-- end of the settings table -->"
text = open(document).read()
head, rest = text.split(start + "\n", 1)
_, tail = rest.split(end, 1)
updated = head + start + "\n" + open(table).read() + end + tail
if mode == "--check":
    sys.exit(0 if updated == text else "the settings table differs from serve's options: run scripts/settings-table.sh")
open(document, "w").write(updated)
PY
