#!/usr/bin/env bash
# The test command: installs missing system libraries, builds the documentation (which
# must have no DocC warning), then builds and runs every test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install-system-libraries.sh
bash scripts/docs.sh
swift test "$@"
