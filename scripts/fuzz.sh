#!/usr/bin/env bash
# Runs one libFuzzer target for SECONDS (default 60), built with the toolchain's
# -sanitize=fuzzer,address in its own folder (.build-fuzz), seeded from Fixtures.
#   bash scripts/fuzz.sh TARGET [SECONDS] [extra libFuzzer flags...]
# TARGET: png jpeg jpeg-eighth jpeg-strips gif tiff webp bmp heif avif jxl ico svg cache-policy http-date disk-entry sniff processing-url metadata zlib
# (or "all").
# Crashes, leaks and timeouts land in .build-fuzz/findings/TARGET/; turn each into a
# file in Fixtures/hostile/ with a test. The corpus grows in .build-fuzz/corpus/TARGET.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target="${1:?usage: fuzz.sh TARGET [SECONDS]}"
seconds="${2:-60}"
shift $(($# < 2 ? $# : 2))

targets=(png jpeg jpeg-eighth jpeg-strips gif tiff webp bmp heif avif jxl ico svg cache-policy http-date disk-entry sniff processing-url metadata zlib object-storage)
if [[ "$target" == all ]]; then
  for t in "${targets[@]}"; do bash "$0" "$t" "$seconds" "$@"; done
  exit 0
fi

bash scripts/install-system-libraries.sh >/dev/null
IMAGELOADER_FUZZ=1 swift build --scratch-path .build-fuzz --product ImageLoaderFuzz \
  -Xswiftc -sanitize=fuzzer,address -Xcc -fsanitize=fuzzer-no-link,address -Xswiftc -use-ld=lld >&2
binary="$(IMAGELOADER_FUZZ=1 swift build --scratch-path .build-fuzz --show-bin-path)/ImageLoaderFuzz"

corpus=".build-fuzz/corpus/$target"
findings=".build-fuzz/findings/$target"
mkdir -p "$corpus" "$findings"
seed() { for f in "$@"; do [[ -f "$f" ]] && cp -n "$f" "$corpus/" ; done; true; }
case "$target" in
  png) seed Fixtures/images/png-* Fixtures/hostile/*.png ;;
  jpeg) seed Fixtures/images/jpeg-* Fixtures/hostile/*.jpg ;;
  jpeg-eighth) seed Fixtures/progressive/*.jpg Fixtures/images/jpeg-progressive.jpg ;;
  jpeg-strips) seed Fixtures/restart/rst-* ;;
  gif) seed Fixtures/images/gif-* Fixtures/hostile/*.gif ;;
  tiff) seed Fixtures/images/tiff-* Fixtures/hostile/*.tif ;;
  webp) seed Fixtures/images/webp-* Fixtures/hostile/*.webp ;;
  bmp) seed Fixtures/images/bmp-* Fixtures/hostile/*.bmp ;;
  heif) seed Fixtures/modern/images/heif-* ;;
  avif) seed Fixtures/modern/images/avif-* ;;
  jxl) seed Fixtures/modern/images/jxl-* ;;
  ico) seed Fixtures/formats/*.ico ;;
  svg) seed Fixtures/formats/*.svg Fuzz/seeds/svg/* ;;
  sniff) seed Fixtures/images/*-8bit.bmp Fixtures/images/png-rgb8.png Fixtures/images/jpeg-420.jpg \
    Fixtures/modern/images/heif-8bit.heic Fixtures/modern/images/avif-8bit.avif Fixtures/modern/images/jxl-lossy.jxl ;;
  cache-policy | http-date | disk-entry | processing-url | zlib | object-storage) seed Fuzz/seeds/"$target"/* ;;
  metadata) seed Fuzz/seeds/metadata/* ;;
  *) echo "fuzz.sh: unknown target $target (one of: ${targets[*]})" >&2; exit 64 ;;
esac

# The decoders' own limits keep memory low; libFuzzer's caps catch what gets past them.
FUZZ_TARGET="$target" ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}" \
  "$binary" "$corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
  -max_len=262144 -artifact_prefix="$findings/" -print_final_stats=1 "$@"
