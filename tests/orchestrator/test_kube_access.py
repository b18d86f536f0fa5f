"""The orchestrator's Kubernetes objects against the fake API (tests/fakes/kube_apiserver.py), as
`gitdns.orchestrator.wiring.build` wires them in a pod (POD_NAMESPACE from the downward API, a
service account token): the Lease under a name RBAC can list, its refusal naming what to
grant; ConfigMap delivery whose missing ConfigMap and refusals say what to do; probe headers
from the own namespace, an unreadable headersSecret a visible probe configuration error."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitdns.adapters.leases import LeaseState
from gitdns.cli import main
from gitdns.core.health import State
from gitdns.core.names import short_hash
from gitdns.orchestrator.config import OrchestratorConfig, config_from_flags, lease_name
from gitdns.orchestrator.service import Orchestrator
from gitdns.orchestrator.wiring import build, servers
from tests.e2e.orchestrator_kit import tenant_yaml
from tests.fakes.kube_apiserver import FakeKube
from tests.orchestrator.kube_kit import ACCOUNT, FakeMonitor, deny, in_pod

pytest.importorskip("kubernetes")

NS = "failover"  # the orchestrator's own namespace (not gitdns-system, not dns-failover)
LEASE = ("coordination.k8s.io", "v1", "leases")
CM = ("kube-system", "coredns-custom")
POOL_YAML = """\
apiVersion: gitdns.io/v1alpha1
kind: NodePool
metadata: {name: edge}
spec:
  nodes:
    - {name: n1, ip: 10.0.0.1}
    - {name: n2, ip: 10.0.0.2}
    - {name: n3, ip: 10.0.0.3}
"""
HEADERS = "  healthCheck: {headersSecret: probe-auth, publishUnchecked: false}\n"


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKube]:
    with FakeKube() as kube:
        in_pod(kube, tmp_path, monkeypatch, NS)
        kube.create("", "v1", "namespaces", {"metadata": {"name": "gitdns-system"}})
        yield kube


def desired(tmp_path: Path, pool: str = POOL_YAML) -> Path:
    root = tmp_path / "desired"
    root.mkdir(exist_ok=True)
    (root / "pool.yaml").write_text(pool)
    (root / "a.yaml").write_text(tenant_yaml("tenant-a", "edge", ["api.tenant-a.io"]))
    return root


def configmap(fake: FakeKube) -> None:
    fake.create("", "v1", "configmaps", {"metadata": {"name": CM[1], "namespace": CM[0]}, "data": {}}, CM[0])


def orchestrator(tmp_path: Path, pool: str = POOL_YAML, **flags: Any) -> tuple[Orchestrator, FakeMonitor]:
    values = {"repo": str(desired(tmp_path, pool)), "node_pool": "edge", "configmap": "/".join(CM),
              "state_dir": str(tmp_path / "state"), "lease": "kubernetes", **flags}
    monitor = FakeMonitor()
    return build(config_from_flags(values), monitor=monitor), monitor  # type: ignore[arg-type]


def condition(o: Orchestrator, kind: str) -> dict[str, str]:
    return next(c for c in o.status()["conditions"] if c["type"] == kind)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


# --- the Lease ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("pool", "name"), [
    ("edge", "gitdns-orchestrator-edge"),
    ("edge-eu-1", "gitdns-orchestrator-edge-eu-1"),
    ("p" * 43, "gitdns-orchestrator-" + "p" * 43),  # 63 characters: fits
    ("p" * 44, f"gitdns-orchestrator-{short_hash('p' * 44, 8)}"),
    ("edge.eu", f"gitdns-orchestrator-{short_hash('edge.eu', 8)}"),  # a subdomain, not a label
    ("Edge", f"gitdns-orchestrator-{short_hash('Edge', 8)}"),
    ("-edge", f"gitdns-orchestrator-{short_hash('-edge', 8)}"),
])
def test_the_lease_is_named_for_the_pool(pool: str, name: str) -> None:
    assert lease_name(pool) == name and len(name) <= 63


def test_lease_name_prints_the_orchestrators_and_the_agents(fake: FakeKube, capsys: pytest.CaptureFixture[str]) -> None:
    from gitdns.adapters.leases import KubeLease

    assert main(["lease-name", "--node-pool", "edge"]) == 0
    assert capsys.readouterr().out == "gitdns-orchestrator-edge\n"
    cluster = fake.kube_system_uid
    assert main(["lease-name", "--cluster", cluster]) == 0
    agent = KubeLease(NS, cluster, duration=60, clock=lambda: 0.0, identity="agent")  # the agent's own naming
    assert capsys.readouterr().out == f"{agent.name}\n"


def test_the_lease_is_created_under_its_name_in_the_own_namespace(fake: FakeKube, tmp_path: Path) -> None:
    configmap(fake)
    o, _ = orchestrator(tmp_path)
    o.step()
    stored = fake.get(*LEASE, "gitdns-orchestrator-edge", namespace=NS)
    assert stored["spec"]["holderIdentity"] == "orchestrator-0"
    assert o.status()["lease"]["reason"] == "LeaseAcquired"


@pytest.mark.parametrize(("verbs", "verb"), [(("get",), "get"), (("create",), "create"), (("update",), "update")])
def test_a_forbidden_lease_names_lease_namespace_account_and_rule(fake: FakeKube, tmp_path: Path,
                                                                  verbs: tuple[str, ...], verb: str) -> None:
    configmap(fake)
    if verb == "update":  # the Lease exists: acquiring it is an update
        fake.create(*LEASE, {"metadata": {"name": "gitdns-orchestrator-edge", "namespace": NS}, "spec": {}}, NS)
    deny(fake, "leases", verbs, name="gitdns-orchestrator-edge", user=f"system:serviceaccount:{NS}:{ACCOUNT}")
    o, monitor = orchestrator(tmp_path)
    o.step()
    lease = o.status()["lease"]
    assert lease["held"] is False and lease["reason"] == "LeaseForbidden"
    for words in (f"Lease {NS}/gitdns-orchestrator-edge", f"{verb} refused (403)", f"ServiceAccount {NS}/{ACCOUNT}",
                  f"a Role in {NS}", "resourceNames: [gitdns-orchestrator-edge], verbs: [get, update]",
                  "verbs: [create]", "gitdns lease-name --node-pool edge", "docs/health.md"):
        assert words in lease["message"], (words, lease["message"])
    monitor.set(n1=State.HEALTHY, n2=State.HEALTHY, n3=State.HEALTHY)
    o.step()
    assert not o.ready  # never held, never delivered: not serving
    ready = condition(o, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "LeaseForbidden")
    assert condition(o, "LeaseHeld")["reason"] == "LeaseForbidden"
    o.refresh_metrics()
    assert o.metrics.value("health_orchestrator_condition", {"type": "LeaseHeld", "reason": "LeaseForbidden"}) == 0
    # /readyz says it, on the probe address too
    (probe,) = servers(o, lambda make: [make("127.0.0.1", 0, frozenset({"health"}), "probe")])
    with probe:
        code, body = get(f"http://127.0.0.1:{probe.port}/readyz")
    assert code == 503 and "LeaseForbidden" in body and "resourceNames: [gitdns-orchestrator-edge]" in body


# --- ConfigMap delivery ---------------------------------------------------------------------------


def test_a_missing_configmap_says_how_to_create_it_and_is_never_created(fake: FakeKube, tmp_path: Path) -> None:
    o, monitor = orchestrator(tmp_path)
    o.step()
    monitor.set(n1=State.HEALTHY, n2=State.HEALTHY, n3=State.UNHEALTHY)
    o.publish()
    delivered = condition(o, "Delivered")
    assert (delivered["status"], delivered["reason"]) == ("False", "ConfigMapMissing")
    for words in ("ConfigMap kube-system/coredns-custom does not exist",
                  "`kubectl -n kube-system create configmap coredns-custom`", "docs/health.md", "only k3s"):
        assert words in delivered["message"], words
    assert o.metrics.value("health_orchestrator_delivery_errors_total", {"reason": "ConfigMapMissing"}) == 1
    assert fake.count("POST", "/configmaps") == 0  # the orchestrator never creates it
    o.step()
    assert o.ready  # serving: the delivery failure is a condition, not NotReady
    configmap(fake)
    o.publish()  # the retry
    assert condition(o, "Delivered")["status"] == "True"
    assert fake.get("", "v1", "configmaps", CM[1], namespace=CM[0])["data"]["tenant-a.hosts"].count("10.0.0.") == 2


def test_a_forbidden_configmap_names_the_role_rule(fake: FakeKube, tmp_path: Path) -> None:
    configmap(fake)
    deny(fake, "configmaps", ("update",), name=CM[1], user=f"system:serviceaccount:{NS}:{ACCOUNT}")
    o, monitor = orchestrator(tmp_path)
    o.step()
    monitor.set(n1=State.HEALTHY, n2=State.HEALTHY, n3=State.HEALTHY)
    o.publish()
    delivered = condition(o, "Delivered")
    assert delivered["reason"] == "ConfigMapForbidden"
    for words in ("ConfigMap kube-system/coredns-custom: update refused (403)", f"ServiceAccount {NS}/{ACCOUNT}",
                  "a Role in kube-system", "resources: [configmaps], resourceNames: [coredns-custom], "
                  "verbs: [get, update]"):
        assert words in delivered["message"], words


def test_unaccepted_credentials_are_not_called_a_missing_role(fake: FakeKube, tmp_path: Path) -> None:
    configmap(fake)
    deny(fake, "configmaps", ("get",), name=CM[1], code=401)
    deny(fake, "leases", ("get",), name="gitdns-orchestrator-edge", code=401)
    o, monitor = orchestrator(tmp_path)
    o.step()
    assert o.status()["lease"]["reason"] == "LeaseError"
    assert "refused (401)" in o.status()["lease"]["message"] and "Role" not in o.status()["lease"]["message"]
    o.lease_state = LeaseState(True, "me", 0.0, "held")  # deliver regardless, to see the ConfigMap's refusal
    monitor.set(n1=State.HEALTHY, n2=State.HEALTHY, n3=State.HEALTHY)
    o.publish()
    delivered = condition(o, "Delivered")
    assert delivered["reason"] == "AuthenticationFailed" and "did not accept the orchestrator's credentials" in \
        delivered["message"] and "Role" not in delivered["message"]


# --- probe headers --------------------------------------------------------------------------------


def secret(fake: FakeKube, namespace: str, value: str) -> None:
    fake.create("", "v1", "secrets", {"metadata": {"name": "probe-auth", "namespace": namespace},
                                      "stringData": {"Authorization": value}}, namespace)


def headers_of(monitor: FakeMonitor) -> set[tuple[tuple[str, str], ...]]:
    return {spec.headers for spec, _ in monitor.targets.values()}


def test_probe_headers_come_from_the_own_namespace(fake: FakeKube, tmp_path: Path) -> None:
    configmap(fake)
    secret(fake, NS, "Bearer ours")
    secret(fake, "gitdns-system", "Bearer decoy")
    o, monitor = orchestrator(tmp_path, POOL_YAML + HEADERS, headers_secrets="probe-auth")
    o.step()
    assert headers_of(monitor) == {(("Authorization", "Bearer ours"),)} and len(monitor.targets) == 3
    assert condition(o, "ProbesConfigured")["status"] == "True"
    assert "Bearer ours" not in json.dumps(o.status())


def test_an_unreadable_headers_secret_is_a_visible_probe_error_and_withdraws_nothing(
        fake: FakeKube, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    configmap(fake)
    secret(fake, NS, "Bearer ours")
    deny(fake, "secrets", ("get",), name="probe-auth", user=f"system:serviceaccount:{NS}:{ACCOUNT}")
    o, monitor = orchestrator(tmp_path, POOL_YAML + HEADERS, headers_secrets="probe-auth")
    o.step()
    assert monitor.targets == {}  # a probe without its headers would be a false result: none is sent
    probes = condition(o, "ProbesConfigured")
    assert (probes["status"], probes["reason"]) == ("False", "HeadersSecretUnreadable")
    for words in (f"Secret {NS}/probe-auth", f"ServiceAccount {NS}/{ACCOUNT}", "resources: [secrets], "
                  "resourceNames: [probe-auth], verbs: [get]", "not withdrawn"):
        assert words in probes["message"], words
    assert all("probe-auth" in node["probe_error"] for node in o.status()["nodes"].values())
    o.refresh_metrics()
    assert o.metrics.value("health_orchestrator_probe_config_errors") == 3
    assert o.metrics.value("health_orchestrator_condition",
                           {"type": "ProbesConfigured", "reason": "HeadersSecretUnreadable"}) == 0
    assert any("HeadersSecretUnreadable" in r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    o.publish()  # publishUnchecked is false, yet no node is withdrawn for a configuration error
    assert o.published.ips == ["10.0.0.1", "10.0.0.2", "10.0.0.3"] and not o.published.fail_open
    assert condition(o, "NodesHealthy")["reason"] == "NotProbed"
    fake.clear_hooks()  # the Role is fixed: the next poll probes, with the headers
    o.poll()
    assert headers_of(monitor) == {(("Authorization", "Bearer ours"),)} and len(monitor.targets) == 3
    assert condition(o, "ProbesConfigured")["status"] == "True"
    o.refresh_metrics()
    assert o.metrics.value("health_orchestrator_probe_config_errors") == 0


def test_headers_read_before_stay_while_the_secret_is_unreadable(fake: FakeKube, tmp_path: Path) -> None:
    configmap(fake)
    secret(fake, NS, "Bearer ours")
    o, monitor = orchestrator(tmp_path, POOL_YAML + HEADERS, headers_secrets="probe-auth")
    o.step()
    deny(fake, "secrets", ("get",), name="probe-auth")
    o.poll()
    assert headers_of(monitor) == {(("Authorization", "Bearer ours"),)} and len(monitor.targets) == 3
    probes = condition(o, "ProbesConfigured")
    assert probes["status"] == "False" and "probing with the headers read before" in probes["message"]


def test_built_in_a_pod_the_parts_are_the_checked_ones(fake: FakeKube, tmp_path: Path) -> None:
    config = config_from_flags({"repo": str(desired(tmp_path)), "node_pool": "edge", "configmap": "/".join(CM),
                                "state_dir": str(tmp_path / "state")})
    assert isinstance(config, OrchestratorConfig) and config.pod_namespace == NS
    o = build(config)
    assert type(o.lease).__name__ == "PoolLease" and o.lease.name == "gitdns-orchestrator-edge"  # type: ignore[attr-defined]
    assert o.lease.namespace == NS  # type: ignore[attr-defined]
    assert type(o.delivery).__name__ == "CheckedConfigMap"
