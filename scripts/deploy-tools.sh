#!/usr/bin/env bash
# The tools the deployment's checks use, in one virtual environment, .build/deploy-venv:
# kubernetes-validate (the manifests against Kubernetes' schemas) and opentelemetry-proto
# with grpcio (the OTLP receiver the tracing tests send spans to, scripts/otlp-receiver.py).
#
#   scripts/deploy-tools.sh install    # make the virtual environment when missing (idempotent)
#   scripts/deploy-tools.sh python ... # run its python
#
# Installs python3-venv with apt-get when it is missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=$root/.build/deploy-venv
# Pinned: the versions the checks were written against.
packages=("kubernetes-validate==1.37.0" "opentelemetry-proto==1.45.2" "grpcio==1.85.4")

# shellcheck source=scripts/python-venv.sh
source "$root/scripts/python-venv.sh"
install() { install_venv "$venv" "${packages[@]}"; }

case ${1:-install} in
install) install ;;
python)
    install
    shift
    exec "$venv/bin/python" "$@"
    ;;
*)
    echo "usage: $0 install|python ARGS..." >&2
    exit 64
    ;;
esac
