#!/usr/bin/env bash
# The test command: installs missing system libraries and nginx, builds the documentation (which
# must have no DocC warning), then builds and runs every test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install-system-libraries.sh
# nginx, wrk and curl for the cluster test (scripts/serve-cluster.sh), when missing.
bash scripts/serve-cluster.sh install
# moto's S3, fake-gcs-server and the Azure endpoint the object storage tests run against.
bash scripts/storage-servers.sh install
# Pillow with pillow-heif: the independent decoder of HEIC results.
bash scripts/reference-decoders.sh install
# The definitions that open libheif, libavif and libtiff at run time match the functions
# RasterImage calls and the installed headers.
python3 scripts/generate-lazy-libraries.py --check
# The Kubernetes manifests against Kubernetes' schemas (kubernetes-validate in its own virtual environment).
bash deploy/kubernetes/validate.sh
bash scripts/docs.sh
swift test "$@"
