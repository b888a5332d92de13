#!/usr/bin/env bash
# Builds the DocC documentation of RasterImage, ImageLoader and ImageService (their catalogs and every
# public symbol's comment); any DocC warning (a broken symbol link, say) fails it.
# The archives land in .build/plugins/Swift-DocC/outputs/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
swift package --disable-sandbox generate-documentation --target RasterImage --target ImageLoader --target ImageService \
    --warnings-as-errors "$@"
