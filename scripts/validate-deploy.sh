#!/usr/bin/env bash
# Validate deploy/ without a cluster and without kubectl:
#   1. render deploy/base and every deploy/overlays/*/ with the minimal Kustomize in
#      tests/test_deploy.py (resources, images, JSON 6902 patches; anything else is refused),
#   2. validate every document offline against the Kubernetes OpenAPI schemas (1.30 and the
#      newest kubernetes-validate ships; strict: unknown fields fail),
#   3. run tests/test_deploy.py: one replica with Recreate, probes, the locked-down pod,
#      least-privilege RBAC, the Dockerfile and .dockerignore (and, where kubectl exists, the
#      renderer against `kubectl kustomize`).
# The same tests run in CI as part of `python3 -m pytest -q` (.ci/run).
#
# Usage:
#   scripts/validate-deploy.sh                                 # validate everything
#   scripts/validate-deploy.sh --render deploy/overlays/example   # print the rendered manifests
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3}"

if [ "${1:-}" = "--render" ]; then
    exec "$PYTHON" -m tests.test_deploy --render "${2:?usage: $0 --render DIR}"
fi
if [ "$#" -ne 0 ]; then
    echo "usage: $0 [--render DIR]" >&2
    exit 2
fi

if ! "$PYTHON" -c 'import kubernetes_validate' 2>/dev/null; then
    echo "validate-deploy: kubernetes-validate is missing: $PYTHON -m pip install -e '.[test]'" >&2
    exit 1
fi

"$PYTHON" -m tests.test_deploy --validate
CI="${CI:-true}" exec "$PYTHON" -m pytest -q tests/test_deploy.py
