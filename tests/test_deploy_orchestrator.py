"""deploy/orchestrator/: the orchestrator's manifests (those of the OpenOva "DNS
Failover Service" specification, done right).

Rendered with tests/test_deploy.py's minimal Kustomize and validated offline with
kubernetes-validate (the PrometheusRule is a CRD: checked here by hand).  The sidecar patch is
merged into a k3s-like CoreDNS Deployment the way a strategic-merge patch would (containers
and volumes merged by name) and validated as a whole.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from gitdns.cli import build_parser
from gitdns.core.names import short_hash
from gitdns.orchestrator.metrics import OrchestratorMetrics
from tests.test_deploy import KUBERNETES_VERSION, kubernetes_validate_or_skip, load_documents, render, resource_id

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy" / "orchestrator"
MEASURED_HWM_MIB = 86  # bench/bench_failover.py, 10,000 targets (docs/health.md)


@pytest.fixture(scope="module", params=["base", "discovery"])
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return render(DEPLOY / request.param)


def find(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = find(docs, "Deployment")
    (c,) = deployment["spec"]["template"]["spec"]["containers"]
    return c


def validate(doc: dict[str, Any]) -> None:
    kv = kubernetes_validate_or_skip()
    kv.validate(doc, KUBERNETES_VERSION, strict=True)


def test_documents_are_valid_kubernetes(rendered: list[dict[str, Any]]) -> None:
    for doc in rendered:
        if doc["kind"] != "PrometheusRule":
            validate(doc)


def test_one_orchestrator_per_pool(rendered: list[dict[str, Any]]) -> None:
    (deployment,) = find(rendered, "Deployment")
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"
    assert "--lease=kubernetes" in container(rendered)["args"]


def test_args_parse_with_the_real_cli(rendered: list[dict[str, Any]]) -> None:
    args = build_parser().parse_args(container(rendered)["args"])
    assert args.command == "orchestrator" and args.configmap == "kube-system/coredns-custom"
    assert args.discover_nodes is (any(d["kind"] == "ClusterRole" for d in rendered))


def test_memory_limit_is_above_the_measurement(rendered: list[dict[str, Any]]) -> None:
    resources = container(rendered)["resources"]
    assert _mib(resources["limits"]["memory"]) >= 2 * MEASURED_HWM_MIB
    assert _mib(resources["requests"]["memory"]) > MEASURED_HWM_MIB


def _mib(quantity: str) -> float:
    number, unit = re.fullmatch(r"(\d+)(Mi|Gi)", quantity).groups()  # type: ignore[union-attr]
    return float(number) * (1024 if unit == "Gi" else 1)


def test_rbac_is_least_privilege(rendered: list[dict[str, Any]]) -> None:
    roles = {(r["metadata"]["namespace"], r["metadata"]["name"]): r["rules"] for r in find(rendered, "Role")}
    assert roles[("kube-system", "gitdns-orchestrator-coredns")] == [
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["coredns-custom"],
         "verbs": ["get", "update"]}]
    lease_rules = roles[("dns-failover", "gitdns-orchestrator-lease")]
    assert {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
            "resourceNames": [f"gitdns-{short_hash('orchestrator/edge', 8)}"],
            "verbs": ["get", "update"]} in lease_rules
    for rule in [r for rules in roles.values() for r in rules]:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"]
    cluster_roles = find(rendered, "ClusterRole")
    for cr in cluster_roles:
        assert cr["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]
    for binding in find(rendered, "RoleBinding") + find(rendered, "ClusterRoleBinding"):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gitdns-orchestrator",
                                         "namespace": "dns-failover"}]


def test_prometheus_rule_uses_metrics_the_orchestrator_exports(rendered: list[dict[str, Any]]) -> None:
    (rule,) = find(rendered, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    rules = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert {"LowHealthyNodes", "AllNodesDown", "HealthCheckSlow", "FailOpen"} <= set(rules)
    assert rules["HealthCheckSlow"]["expr"].startswith("health_orchestrator_last_check_duration_seconds ")
    exported = _exported_names()
    for alert in rules.values():
        for name in re.findall(r"health_orchestrator_[a-z_]+", alert["expr"]):
            assert name in exported, f"{alert['alert']}: {name} is not exported"


def _exported_names() -> set[str]:
    metrics = OrchestratorMetrics()
    metrics.set_nodes({"n1": ("10.0.0.1", True, 0, 0.01)})
    metrics.check_duration.observe(0.1)
    metrics.delivery_errors.labels("x").inc()
    text = metrics.render().decode()
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}


K3S_COREDNS = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "coredns", "namespace": "kube-system"},
    "spec": {"selector": {"matchLabels": {"k8s-app": "kube-dns"}}, "template": {
        "metadata": {"labels": {"k8s-app": "kube-dns"}},
        "spec": {
            "containers": [{"name": "coredns", "image": "rancher/mirrored-coredns-coredns:1.12.0",
                            "args": ["-conf", "/etc/coredns/Corefile"],
                            "volumeMounts": [{"name": "config-volume", "mountPath": "/etc/coredns", "readOnly": True},
                                             {"name": "custom-config-volume", "mountPath": "/etc/coredns/custom",
                                              "readOnly": True}]}],
            "volumes": [{"name": "config-volume", "configMap": {"name": "coredns"}},
                        {"name": "custom-config-volume", "configMap": {"name": "coredns-custom", "optional": True}}],
        }}},
}


def strategic_merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Enough of a strategic merge for this patch: maps merged, null deletes, containers and
    volumes merged by name."""
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif key in ("containers", "volumes") and isinstance(value, list):
            by_name = {item["name"]: item for item in out.get(key, [])}
            for item in value:
                by_name[item["name"]] = strategic_merge(by_name.get(item["name"], {}), item)
            out[key] = list(by_name.values())
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = strategic_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@pytest.fixture(scope="module")
def patched() -> dict[str, Any]:
    (patch,) = load_documents(DEPLOY / "sidecar" / "coredns-sidecar-patch.yaml")
    assert resource_id(patch)[1:] == ("Deployment", "kube-system", "coredns")
    return strategic_merge(K3S_COREDNS, patch)


def test_sidecar_patch_gives_a_valid_coredns_deployment(patched: dict[str, Any]) -> None:
    validate(patched)
    spec = patched["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["custom-config-volume"] == {"name": "custom-config-volume", "emptyDir": {}}
    containers = {c["name"]: c for c in spec["containers"]}
    mounts = {c: {m["mountPath"]: m["name"] for m in containers[c]["volumeMounts"]} for c in containers}
    assert mounts["coredns"]["/etc/coredns/custom"] == mounts["gitdns-orchestrator"]["/etc/coredns/custom"]


def test_sidecar_writes_the_shared_dir_without_gating_coredns(patched: dict[str, Any]) -> None:
    sidecar = next(c for c in patched["spec"]["template"]["spec"]["containers"] if c["name"] == "gitdns-orchestrator")
    args = build_parser().parse_args(sidecar["args"])
    assert args.out == "/etc/coredns/custom" and args.configmap is None and args.lease == "file"
    assert "readinessProbe" not in sidecar and "livenessProbe" in sidecar
    assert _mib(sidecar["resources"]["limits"]["memory"]) >= 2 * MEASURED_HWM_MIB
    assert sidecar["securityContext"]["readOnlyRootFilesystem"] is True
