#!/usr/bin/env bash
# Writes scripts/imageloader.order: the functions of the imageloader executable that the
# file commands (thumbnail, info, decode, validate, batch over files) run, as recorded by
# valgrind's callgrind. scripts/build-release.sh gives it to the linker
# (--symbol-ordering-file), which places those functions side by side: the kernel maps
# the executable in 64 KiB runs around each page it touches, so code spread over the
# whole 28 MB text costs megabytes of resident memory that a few hundred KiB of
# functions, placed together, do not. Rerun after large changes; names no longer in
# the binary are ignored by the linker.
#
#   bash scripts/make-symbol-order.sh [BENCH_DIR]     (default /tmp/bench, from make-inputs.sh)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BENCH=${1:-/tmp/bench}
command -v valgrind >/dev/null || { echo "make-symbol-order: install valgrind (apt-get install valgrind)" >&2; exit 1; }
bash scripts/build-release.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Valgrind cannot read this toolchain's DWARF 5; the symbol table is all it needs.
objcopy --strip-debug .build-release/release/imageloader "$work/imageloader"
tool=$work/imageloader
fixtures=Fixtures/images
runs=(
  "thumbnail $BENCH/photo.jpg --size 256 -o $work/a.jpg"
  "thumbnail $BENCH/alpha.png --size 256 -o $work/b.png"
  "thumbnail $fixtures/gif-animation.gif --size 64 -o $work/c.png"
  "thumbnail $fixtures/webp-lossy.webp --size 64 -o $work/d.webp"
  "thumbnail $fixtures/tiff-rgb-lzw.tif --size 64 -o $work/e.jpg"
  "thumbnail $fixtures/bmp-24bit.bmp --size 64 -o $work/f.jpg"
  "thumbnail $fixtures/jpeg-progressive.jpg --size 64 -o $work/g.jpg"
  "info $BENCH/photo.jpg"
  "decode $fixtures/png-rgba8.png -o $work/h.png"
  "validate $fixtures/png-rgba8.png $fixtures/jpeg-420.jpg"
  "batch $fixtures/png-rgba8.png $fixtures/jpeg-420.jpg --size 64 --out $work/batch --cache-dir $work/cache"
)
i=0
for run in "${runs[@]}"; do
  # shellcheck disable=SC2086
  valgrind --tool=callgrind --demangle=no --callgrind-out-file="$work/cg.$i" "$tool" $run >/dev/null 2>&1 \
    || { echo "make-symbol-order: failed: imageloader $run" >&2; exit 1; }
  i=$((i + 1))
done
python3 - "$work" "$tool" > scripts/imageloader.order <<'PY'
import glob, re, sys
work, tool = sys.argv[1], sys.argv[2]
functions = set()
for path in glob.glob(work + "/cg.*"):
    objects, names, current = {}, {}, None
    for line in open(path, errors="replace"):
        m = re.match(r"^(ob|cob|fn|cfn)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
        if not m:
            continue
        kind, ident, name = m.groups()
        table = objects if kind in ("ob", "cob") else names
        if name:
            table[ident] = name
        if kind == "ob":
            current = objects.get(ident)
        elif kind == "fn" and current == tool:
            functions.add(re.sub(r"'\d+$", "", names[ident]))
print("\n".join(sorted(functions)))
PY
# The order file is not an input SwiftPM tracks: remove the executable so the next build links again.
rm -f .build-release/release/imageloader
echo "make-symbol-order: $(wc -l < scripts/imageloader.order) functions in scripts/imageloader.order;" \
  "run scripts/build-release.sh to link with it"
