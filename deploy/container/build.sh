#!/usr/bin/env bash
# Builds the container image localhost/imageloader:latest (and :VERSION) from
# deploy/container/Containerfile, with podman (or docker where that is what the machine
# has):
#   1. the release binary (scripts/build-release.sh), stripped of its debug information;
#   2. the Debian packages of the shared libraries it links (ldd) and of those it opens
#      when a format is first met (the sonames in Sources/C*/ shims), as dpkg knows them;
#   3. the base, Debian 12 slim: pulled where a registry answers, else made here from
#      Debian's packages with mmdebstrap (minbase, documentation left out) and imported;
#   4. the image.
# Usage: bash deploy/container/build.sh [--tag NAME]   (first run: about 10 minutes)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
tag=localhost/imageloader:latest
while (($#)); do
  case $1 in
    --tag) tag=$2; shift 2 ;;
    *) echo "usage: $0 [--tag NAME]" >&2; exit 64 ;;
  esac
done
here=deploy/container
source "$here/engine.sh"
install_engine

bash scripts/build-release.sh
context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
cp "$here/Containerfile" "$context/Containerfile"
strip --strip-all -o "$context/imageloader" .build-release/release/imageloader

# The packages of every library the binary links, and of those it opens at run time.
libraries=$(ldd "$context/imageloader" | awk '$3 ~ /^\// {print $3}')
for soname in $(grep -ohE '"lib[A-Za-z0-9_+-]+\.so(\.[0-9]+)+"' Sources/C*/*.c | tr -d '"' | sort -u); do
  path=$(ldconfig -p | awk -v name="$soname" '$1 == name {print $NF; exit}')
  [[ -n $path ]] || { echo "build.sh: $soname is not installed here (scripts/install-system-libraries.sh)" >&2; exit 1; }
  libraries+=$'\n'"$path"
done
packages=$(for library in $libraries; do
  dpkg -S "$(readlink -f "$library")" 2>/dev/null || dpkg -S "$library"
done | cut -d: -f1 | sort -u | grep -vE '^(libc6|libgcc-s1|libstdc\+\+6)$' | tr '\n' ' ')
echo "build.sh: run-time packages: $packages"

base=docker.io/library/debian:bookworm-slim
if ! $engine image exists "$base" 2>/dev/null && ! timeout 60 $engine pull -q "$base" >/dev/null 2>&1; then
  base=localhost/debian:bookworm-slim
  if ! $engine image exists "$base" 2>/dev/null; then
    echo "build.sh: no registry answers; making $base with mmdebstrap"
    command -v mmdebstrap >/dev/null || apt_install mmdebstrap
    mmdebstrap --variant=minbase --quiet --include=ca-certificates \
      --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
      --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
      --dpkgopt='path-exclude=/usr/share/info/*' \
      bookworm "$context/base.tar"
    $engine import --change 'CMD ["bash"]' "$context/base.tar" "$base" >/dev/null
    rm -f "$context/base.tar"
  fi
fi

version=$("$context/imageloader" --version)
# The host's network for apt-get inside the build (no registry needed for that).
$engine build --network host --format docker --build-arg "BASE=$base" --build-arg "RUNTIME_PACKAGES=$packages" \
  --label "org.opencontainers.image.version=$version" --label "org.opencontainers.image.title=imageloader" \
  -t "$tag" -t "${tag%:*}:$version" -f "$context/Containerfile" "$context"
echo "build.sh: built $tag ($version), $($engine image inspect "$tag" --format '{{.Size}}' | awk '{printf "%.1f MB", $1/1e6}')"
