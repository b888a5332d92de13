#!/usr/bin/env bash
# Builds the release imageloader into .build-release/release/imageloader, as it is
# benchmarked and as scripts/demo.sh runs it:
#   --static-swift-stdlib      the Swift runtime and Foundation linked in: about 3 ms less
#                              start-up than loading them as shared libraries
#   lld, function sections,    every function in its own section, and the functions the
#   scripts/imageloader.order  file commands run placed together (scripts/make-symbol-order.sh):
#                              the kernel maps executables in 64 KiB runs around each page
#                              touched, so scattered code costs resident memory
#   --no-export-dynamic        the executable exports no symbols (the static runtime's link
#                              arguments ask for all of them): less for the loader to map
#   pack-relative-relocs       the 130,000 relative relocations in compact form (DT_RELR,
#                              with glibc 2.36 or later): 3 MB less to read at start-up
# The first build takes about 6 minutes on 2 cores; later ones seconds to minutes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install-system-libraries.sh
# DT_RELR needs glibc 2.36 (Debian 12; not Ubuntu 22.04's 2.35) where the binary runs.
relr=()
glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
if [[ -n $glibc ]] && printf '2.36\n%s\n' "$glibc" | sort -V -C; then
  relr=(-Xlinker -z -Xlinker pack-relative-relocs)
fi
swift build -c release --product imageloader --static-swift-stdlib --scratch-path .build-release \
  -Xswiftc -use-ld=lld -Xswiftc -Xfrontend -Xswiftc -function-sections -Xcc -ffunction-sections \
  "${relr[@]}" -Xlinker --no-export-dynamic \
  -Xlinker "--symbol-ordering-file=$PWD/scripts/imageloader.order" -Xlinker --no-warn-symbol-ordering
