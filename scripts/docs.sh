#!/usr/bin/env bash
# Builds the DocC documentation of RasterImage, ImageLoader, ObjectStorage and ImageService (their catalogs and every
# public symbol's comment); any DocC warning (a broken symbol link, say) fails it.
#
#   bash scripts/docs.sh            the archives, in .build/plugins/Swift-DocC/outputs/ (the tests run this)
#   bash scripts/docs.sh serve      a website in .build/docs-site, served on http://127.0.0.1:8000/
#                                   (PORT=... for another port); Ctrl-C stops it
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
targets=(RasterImage ImageLoader ObjectStorage ImageService)
if [[ ${1:-} != serve ]]; then
  swift package --disable-sandbox generate-documentation --target RasterImage --target ImageLoader --target ObjectStorage \
    --target ImageService \
    --warnings-as-errors "$@"
  exit
fi
site=.build/docs-site
rm -rf "$site"
mkdir -p "$site"
links=""
for target in "${targets[@]}"; do
  lower=$(tr '[:upper:]' '[:lower:]' <<<"$target")
  swift package --disable-sandbox --allow-writing-to-directory "$site" generate-documentation --target "$target" \
    --warnings-as-errors --transform-for-static-hosting --hosting-base-path "$target" --output-path "$site/$target"
  links+="<li><a href=\"/$target/documentation/$lower/\">$target</a></li>"
done
echo "<!doctype html><title>ImageLoader documentation</title><h1>ImageLoader</h1><ul>$links</ul>" >"$site/index.html"
port=${PORT:-8000}
echo "docs: http://127.0.0.1:$port/ (Ctrl-C stops)"
exec python3 -m http.server "$port" --bind 127.0.0.1 --directory "$site"
