"""``gitdns add-cluster-secret`` against two fake API servers: the ServiceAccount, role, binding
and token on the remote, the labelled kubeconfig Secret on the primary, idempotence, the dry
run, and a primary that reaches the remote with the token (bearer tokens enforced)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from gitdns.adapters.kube.clusters import ClusterSecrets
from gitdns.cli import main
from gitdns.commands.clusters import CLUSTER_ROLE, RULES
from tests.fakes.kube_apiserver import FakeKube

client = pytest.importorskip("kubernetes.client")

ADMIN = "admin-token-for-tests"
DNSR = ("kuadrant.io", "v1alpha1", "dnsrecords")


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[tuple[FakeKube, FakeKube, Path]]:
    remote, primary = FakeKube(), FakeKube()
    remote.register(*DNSR, kind="DNSRecord")
    for fake in (remote, primary):
        fake.admin_tokens.add(ADMIN)
        fake.start()
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: primary\n"
        f"clusters:\n- name: remote\n  cluster: {{server: '{remote.base_url}'}}\n"
        f"- name: primary\n  cluster: {{server: '{primary.base_url}'}}\n"
        f"users:\n- name: admin\n  user: {{token: {ADMIN}}}\n"
        "contexts:\n- name: remote\n  context: {cluster: remote, user: admin}\n"
        "- name: primary\n  context: {cluster: primary, user: admin}\n")
    yield remote, primary, config
    remote.stop()
    primary.stop()


def run(config: Path, *extra: str) -> int:
    return main(["add-cluster-secret", "remote-eu", "--kubeconfig", str(config), "--remote-context", "remote",
                 "--primary-context", "primary", "--timeout", "10", *extra])


def kubeconfig_of(primary: FakeKube) -> dict[str, Any]:
    secret = primary.get("", "v1", "secrets", "remote-eu", namespace="kuadrant-system")
    doc: dict[str, Any] = YAML(typ="safe").load(base64.b64decode(secret["data"]["kubeconfig"]).decode())
    return doc


def test_creates_everything_and_the_primary_can_read_the_remote(clusters: tuple[FakeKube, FakeKube, Path],
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    remote, primary, config = clusters
    remote.token_fill_delay = 3  # the token controller fills the Secret a little later
    assert run(config) == 0
    out = capsys.readouterr().out
    assert "kuadrant-system/remote-eu created" in out and "fake-token" not in out
    sa = remote.get("", "v1", "serviceaccounts", "gitdns-delegation", namespace="kuadrant-system")
    assert sa["metadata"]["name"] == "gitdns-delegation"
    role = remote.get("rbac.authorization.k8s.io", "v1", "clusterroles", CLUSTER_ROLE)
    assert role["rules"] == RULES
    (binding,) = [o for o in [remote.get("rbac.authorization.k8s.io", "v1", "clusterrolebindings",
                                         "gitdns-remote-cluster-kuadrant-system-gitdns-delegation")]]
    assert binding["roleRef"]["name"] == CLUSTER_ROLE
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gitdns-delegation",
                                    "namespace": "kuadrant-system"}]
    secret = primary.get("", "v1", "secrets", "remote-eu", namespace="kuadrant-system")
    assert secret["metadata"]["labels"]["kuadrant.io/multicluster-kubeconfig"] == "true"
    doc = kubeconfig_of(primary)
    (cluster,) = doc["clusters"]
    assert cluster["cluster"]["server"] == remote.base_url
    assert base64.b64decode(cluster["cluster"]["certificate-authority-data"]).decode() == remote.ca_pem
    token = doc["users"][0]["user"]["token"]
    assert token in remote.issued_tokens
    # the primary reaches the remote with that token alone
    remote.require_auth = True
    remote.admin_tokens.clear()
    remote.create("", "v1", "namespaces", {"metadata": {"name": "dnstest"}})
    remote.create(*DNSR, {"metadata": {"name": "api", "namespace": "dnstest"}, "spec": {"rootHost": "a.example.com"}})
    cfg = client.Configuration()
    cfg.host = primary.base_url
    cfg.api_key = {"authorization": f"Bearer {ADMIN}"}
    with client.ApiClient(cfg) as api:
        found = ClusterSecrets(api).discover()
        assert set(found.clients) == {"remote-eu"} and not found.problems
        listed = client.CustomObjectsApi(found.clients["remote-eu"]).list_cluster_custom_object(*DNSR)
        assert [o["metadata"]["name"] for o in listed["items"]] == ["api"]


def test_running_it_again_changes_nothing(clusters: tuple[FakeKube, FakeKube, Path],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    remote, primary, config = clusters
    assert run(config) == 0
    first = kubeconfig_of(primary)
    writes = sum(1 for r in [*remote.requests, *primary.requests] if r.method != "GET")
    assert run(config) == 0
    assert "unchanged" in capsys.readouterr().out
    assert sum(1 for r in [*remote.requests, *primary.requests] if r.method != "GET") == writes
    assert kubeconfig_of(primary) == first and len(remote.issued_tokens) == 1


def test_it_repairs_what_differs(clusters: tuple[FakeKube, FakeKube, Path]) -> None:
    remote, primary, config = clusters
    assert run(config) == 0
    remote.mutate("rbac.authorization.k8s.io", "v1", "clusterroles", CLUSTER_ROLE,
                  lambda o: o.__setitem__("rules", [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]))
    primary.mutate("", "v1", "secrets", "remote-eu", lambda o: o["metadata"]["labels"].pop(
        "kuadrant.io/multicluster-kubeconfig"), namespace="kuadrant-system")
    assert run(config, "--remote-server", "https://remote.example.net:6443") == 0
    assert remote.get("rbac.authorization.k8s.io", "v1", "clusterroles", CLUSTER_ROLE)["rules"] == RULES
    secret = primary.get("", "v1", "secrets", "remote-eu", namespace="kuadrant-system")
    assert secret["metadata"]["labels"]["kuadrant.io/multicluster-kubeconfig"] == "true"
    assert kubeconfig_of(primary)["clusters"][0]["cluster"]["server"] == "https://remote.example.net:6443"


def test_dry_run_prints_manifests_with_the_token_redacted(clusters: tuple[FakeKube, FakeKube, Path],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    remote, primary, config = clusters
    assert run(config, "--dry-run", "--cluster-secret-label", "example.org/remote") == 0
    docs = list(YAML(typ="safe").load_all(capsys.readouterr().out))
    assert [d["kind"] for d in docs] == ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                                         "Secret", "Secret"]
    secret = docs[-1]
    assert secret["metadata"]["labels"]["example.org/remote"] == "true"
    inner = YAML(typ="safe").load(secret["stringData"]["kubeconfig"])
    assert inner["users"][0]["user"]["token"] == "<redacted>"
    assert not remote.requests and not primary.requests and not remote.issued_tokens


def test_a_token_that_never_comes_is_an_error(clusters: tuple[FakeKube, FakeKube, Path],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    remote, _, config = clusters
    remote.token_fill_delay = 10_000
    assert run(config, "--timeout", "0.2") == 1
    assert "token controller did not fill" in capsys.readouterr().err


def test_an_unknown_context_is_a_clear_error(clusters: tuple[FakeKube, FakeKube, Path],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    _, _, config = clusters
    assert main(["add-cluster-secret", "x", "--kubeconfig", str(config), "--remote-context", "nope"]) == 1
    assert "context nope does not load" in capsys.readouterr().err
