#!/usr/bin/env bash
# Runs the test suite under AddressSanitizer and under ThreadSanitizer, each in its own
# build folder (.build-asan, .build-tsan).
#   bash scripts/sanitize.sh [address|thread] [swift test arguments...]
# Suppressions, each with its reason, are in scripts/tsan-suppressions.txt (none yet).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install-system-libraries.sh >/dev/null
sanitizers=(address thread)
if [[ $# -gt 0 && ( "$1" == address || "$1" == thread ) ]]; then sanitizers=("$1"); shift; fi
for sanitizer in "${sanitizers[@]}"; do
  scratch=".build-${sanitizer/address/asan}"
  scratch="${scratch/thread/tsan}"
  echo "== swift test --sanitize=$sanitizer ($scratch)" >&2
  # The command-line tests run the built executable, which is built with the same sanitizer.
  # Instrumented code runs several times slower: the fault tests' time bounds stretch with it,
  # and its shadow memory makes peak-RSS figures meaningless (IMAGELOADER_SANITIZER skips them).
  # LeakSanitizer is off for the suite: the Swift runtime keeps metadata and caches for the
  # life of the process, which it reports as leaks (the fuzzers run with it on).
  IMAGELOADER_TEST_TIME_SCALE="${IMAGELOADER_TEST_TIME_SCALE:-4}" IMAGELOADER_SANITIZER="$sanitizer" \
  ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=0}" \
  TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1 suppressions=$PWD/scripts/tsan-suppressions.txt}" \
    swift test --sanitize="$sanitizer" --scratch-path "$scratch" "$@"
done
