#!/usr/bin/env bash
# The main job: installs missing system libraries, builds imageloader (release, once:
# scripts/serve-cluster.sh and the README's quick start use the same binary), makes the
# demo's photographs in every format (scripts/demo-photos.sh, into demo-output/sources),
# and runs `imageloader demo` on them: served over HTTP from inside the process,
# thumbnailed by the batch twice (cold cache, then warm after a restart), each file's
# thumbnail timed, thumbnails and a contact sheet written to demo-output/. Extra
# arguments go to `imageloader demo`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/build-release.sh
bash scripts/demo-photos.sh demo-output/sources
rm -rf demo-output/cold demo-output/warm demo-output/sheet.png
.build-release/release/imageloader demo --images demo-output/sources --out demo-output "$@"
