#!/usr/bin/env bash
# The test command: installs missing system libraries, then builds and runs every test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install-system-libraries.sh
swift test "$@"
