#!/usr/bin/env bash
# Validates the manifests beside this file against Kubernetes' own schemas (strict:
# an unknown field is an error), with kubernetes-validate from PyPI in a virtual
# environment of its own (.build/venv-kubernetes, made when missing).
# Usage: bash deploy/kubernetes/validate.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
venv=.build/venv-kubernetes
if [[ ! -x $venv/bin/kubernetes-validate ]]; then
  python3 -m venv "$venv" 2>/dev/null || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    python3 -m venv "$venv"
  }
  "$venv/bin/pip" install -q kubernetes-validate==1.37.0
fi
# The oldest Kubernetes still maintained, and the newest the validator knows.
for version in 1.31.0 1.37.0; do
  "$venv/bin/kubernetes-validate" --strict --quiet -k "$version" \
    $(ls deploy/kubernetes/*.yaml | grep -v kustomization)
done
echo "validate.sh: the manifests are valid for Kubernetes 1.31 and 1.37"
