#!/usr/bin/env bash
# Validates the manifests beside this file against Kubernetes' own schemas (strict:
# an unknown field is an error), with kubernetes-validate from PyPI
# (scripts/deploy-tools.sh's virtual environment, made when missing).
# Usage: bash deploy/kubernetes/validate.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bash scripts/deploy-tools.sh install
manifests=$(ls deploy/kubernetes/*.yaml | grep -v kustomization)
# The oldest Kubernetes still maintained, and the newest the validator knows.
for version in 1.31.0 1.37.0; do
  .build/deploy-venv/bin/kubernetes-validate --strict --quiet -k "$version" $manifests
done
echo "validate.sh: the manifests are valid for Kubernetes 1.31 and 1.37"
