#!/usr/bin/env bash
# The main job: installs missing system libraries, builds imageloader (release), and runs
# `imageloader demo`: the bundled Fixtures/images served over HTTP from inside the process,
# thumbnailed by the batch twice (cold cache, then warm after a restart), thumbnails and a
# contact sheet written to demo-output/. Extra arguments go to `imageloader demo`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/build-release.sh
rm -rf demo-output
.build-release/release/imageloader demo --out demo-output "$@"
