"""deploy/remote-cluster/: the remote-cluster role, the primary's RBAC for delegation through
Kubernetes, and the example cluster Secret.

Rendered with ``kubectl kustomize`` (tests/test_deploy.py) and validated offline with
kubernetes-validate (strict).  The manifests must grant exactly what the code uses: the
remote ClusterRole equals what `gitdns add-cluster-secret` creates, and on the remote and on the
primary the RBAC covers every API call delegation passes make against the fake API server, and
grants no call they never make.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from gitdns.commands.clusters import CLUSTER_ROLE, RULES, SecretPlan, remote_manifests
from tests.test_deploy import KUBERNETES_VERSION, kubernetes_validate_or_skip, kustomize, load_documents

ROOT = Path(__file__).resolve().parent.parent
DIR = ROOT / "deploy" / "remote-cluster"


@pytest.fixture(scope="module")
def remote() -> list[dict[str, Any]]:
    return kustomize(DIR)


@pytest.fixture(scope="module")
def primary() -> list[dict[str, Any]]:
    return kustomize(DIR / "primary")


def kind(docs: list[dict[str, Any]], k: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == k]


def test_every_document_is_valid_kubernetes(remote: list[dict[str, Any]], primary: list[dict[str, Any]]) -> None:
    kv = kubernetes_validate_or_skip()
    example = load_documents(DIR / "example-cluster-secret.yaml")
    for doc in [*remote, *primary, *example]:
        kv.validate(doc, KUBERNETES_VERSION, strict=True)


def test_no_wildcards(remote: list[dict[str, Any]], primary: list[dict[str, Any]]) -> None:
    for doc in [*remote, *primary]:
        for rule in doc.get("rules") or []:
            for key in ("apiGroups", "resources", "verbs"):
                assert not any("*" in v for v in rule.get(key, [])), (doc["metadata"]["name"], rule)


def test_the_remote_role_is_what_the_command_creates(remote: list[dict[str, Any]]) -> None:
    (role,) = kind(remote, "ClusterRole")
    assert role["metadata"]["name"] == CLUSTER_ROLE
    assert role["rules"] == RULES == [
        {"apiGroups": ["kuadrant.io"], "resources": ["dnsrecords"], "verbs": ["list"]},
        {"apiGroups": ["kuadrant.io"], "resources": ["dnsrecords/status"], "verbs": ["patch"]}]


def test_the_service_account_objects_match_the_command(remote: list[dict[str, Any]]) -> None:
    made = {(d["kind"], d["metadata"]["name"]): d for d in remote_manifests(SecretPlan(
        "remote-eu", "kuadrant-system", "gitdns-delegation", "kuadrant-system", "x", "https://x"))}
    for doc in remote:
        if doc["kind"] == "ClusterRole":
            continue
        twin = made[(doc["kind"], doc["metadata"]["name"])]
        for field in ("roleRef", "subjects", "type"):
            assert doc.get(field) == twin.get(field), (doc["kind"], field)
        assert doc["metadata"].get("namespace") == twin["metadata"].get("namespace")
        assert doc["metadata"].get("annotations") == twin["metadata"].get("annotations")


def test_the_example_secret_is_what_the_agent_looks_for() -> None:
    (secret,) = load_documents(DIR / "example-cluster-secret.yaml")
    assert secret["metadata"]["labels"] == {"kuadrant.io/multicluster-kubeconfig": "true"}
    assert secret["metadata"]["namespace"] == "kuadrant-system"
    config = YAML(typ="safe").load(secret["stringData"]["kubeconfig"])
    assert config["current-context"] == config["contexts"][0]["name"]


def _allowed(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules)


VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def test_the_primary_rbac_covers_a_delegation_pass(primary: list[dict[str, Any]], tmp_path: Path) -> None:
    """Run a delegation pass against fakes and check every request on the primary against the
    rules (cluster-wide ClusterRole, the kuadrant-system Role, the per-namespace reader)."""
    pytest.importorskip("kubernetes.client")
    from tests.kubedelegation.kube_fleet import Fleet, a_endpoint, record

    cluster_rules = next(r["rules"] for r in kind(primary, "ClusterRole")
                         if r["metadata"]["name"] == "gitdns-kube-delegation")
    (role,) = kind(primary, "Role")
    reader = next(r for r in kind(primary, "ClusterRole") if r["metadata"]["name"] == "gitdns-default-provider-reader")
    fleet = Fleet(store=tmp_path / "store")
    try:
        fleet.add_remote("remote-1")
        fake = fleet.add_primary("primary-a")
        record(fleet.remotes["remote-1"], "api", "api.example.com", [a_endpoint("api.example.com", "192.0.2.1")])
        record(fake, "local", "api.example.com", [a_endpoint("api.example.com", "192.0.2.2")])
        delegation = fleet.delegation("primary-a")
        fake.requests.clear()
        assert delegation.run_once().ok
        fleet.remotes["remote-1"].handle("DELETE", "/apis/kuadrant.io/v1alpha1/namespaces/dnstest/dnsrecords/api",
                                         "", b"")
        fake.handle("DELETE", "/apis/kuadrant.io/v1alpha1/namespaces/dnstest/dnsrecords/local", "", b"")
        assert delegation.run_once().ok  # withdraws, deletes the empty authoritative record
        requests = list(fake.requests)
    finally:
        fleet.stop()
    assert requests
    used = set()
    for req in requests:
        parts = [p for p in req.path.split("/") if p]
        group = "" if parts[0] == "api" else parts[1]
        rest = parts[2:] if parts[0] == "api" else parts[3:]
        namespace = rest[1] if rest[0] == "namespaces" and len(rest) > 2 else None
        rest = rest[2:] if namespace else rest
        resource = rest[0] + ("/" + rest[2] if len(rest) == 3 else "")
        verb = "list" if req.method == "GET" and len(rest) == 1 else VERBS[req.method]
        used.add((group, resource, verb))
        if resource == "secrets" and namespace == "kuadrant-system":
            assert _allowed(role["rules"], group, resource, verb), req
        elif resource == "secrets":
            assert _allowed(reader["rules"], group, resource, verb), req
        else:
            assert _allowed(cluster_rules, group, resource, verb), req
    # ... and every grant of the ClusterRole is a call the passes made (the authoritative record's
    # endpoints are written by the endpoint provider's PUT: `update`).
    granted = {(g, r, v) for rule in cluster_rules for g in rule["apiGroups"] for r in rule["resources"]
               for v in rule["verbs"]}
    assert granted <= used, f"granted, never called: {sorted(granted - used)}"


def test_the_remote_rbac_covers_what_a_primary_does_there(remote: list[dict[str, Any]], tmp_path: Path) -> None:
    pytest.importorskip("kubernetes.client")
    from tests.kubedelegation.kube_fleet import Fleet, a_endpoint, record

    (role,) = kind(remote, "ClusterRole")
    fleet = Fleet(store=tmp_path / "store")
    try:
        rfake = fleet.add_remote("remote-1")
        fleet.add_primary("primary-a")
        record(rfake, "api", "api.example.com", [a_endpoint("api.example.com", "192.0.2.1")])
        assert fleet.delegation("primary-a").run_once().ok
        requests = list(rfake.requests)
    finally:
        fleet.stop()
    assert {r.method for r in requests} == {"GET", "PATCH"}
    used = set()
    for req in requests:
        resource = "dnsrecords/status" if req.path.endswith("/status") else "dnsrecords"
        verb = "list" if req.method == "GET" and req.path.endswith("/dnsrecords") else VERBS[req.method]
        assert _allowed(role["rules"], "kuadrant.io", resource, verb), req
        used.add(("kuadrant.io", resource, verb))
    # ... and every grant is a call the pass made: nothing granted for a call never made.
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
               for v in rule["verbs"]}
    assert granted == used, f"granted, never called: {sorted(granted - used)}"
