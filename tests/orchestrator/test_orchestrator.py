"""The orchestrator's logic with a scripted health monitor (no probes, no clock waits):
fail open, only-on-change delivery, held desired states, leases, discovery, configuration."""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from gitdns.adapters.coredns_delivery import DeliveryResult, DirectoryDelivery
from gitdns.adapters.leases import FileLease
from gitdns.adapters.probes import ProbeTiming
from gitdns.core.health import HealthSettings, ProbeSpec, State, TargetHealth
from gitdns.core.model import HealthCheck, Node, NodePool
from gitdns.errors import ConfigError, UnreachableError
from gitdns.orchestrator.config import OrchestratorConfig, config_from_flags, is_url
from gitdns.orchestrator.service import Orchestrator
from gitdns.orchestrator.sources import DirectorySource, discover_nodes
from gitdns.orchestrator.wiring import make_lease
from tests.e2e.orchestrator_kit import tenant_yaml

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


class FakeMonitor:
    def __init__(self) -> None:
        self.targets: dict[str, tuple[ProbeSpec, HealthSettings]] = {}
        self.health: dict[str, TargetHealth] = {}
        self.timing: dict[str, ProbeTiming] = {}
        self.last_check_time: float | None = None

    def set_targets(self, targets: Mapping[str, tuple[ProbeSpec, HealthSettings]]) -> None:
        self.targets = dict(targets)

    def set(self, **states: State) -> None:
        for name, state in states.items():
            self.health[name] = TargetHealth(state, checks=1, failures=0 if state is State.HEALTHY else 2)
            self.timing[name] = ProbeTiming(0.01, 100.0)
        self.last_check_time = 100.0

    def snapshot(self) -> dict[str, TargetHealth]:
        return dict(self.health)

    def rounds(self, names: Sequence[str]) -> tuple[array[float], array[float]]:
        rows = [self.timing.get(name) for name in names]
        return (array("d", (math.nan if r is None else r.last_round_duration for r in rows)),
                array("d", (math.nan if r is None else r.last_check_time for r in rows)))

    def start(self) -> None: ...

    def stop(self) -> None: ...


class CountingDelivery(DirectoryDelivery):
    calls = 0

    def deliver(self, files: Mapping[str, str]) -> DeliveryResult:
        self.calls += 1
        return super().deliver(files)


@pytest.fixture
def desired(tmp_path: Path) -> Path:
    root = tmp_path / "desired"
    root.mkdir()
    (root / "pool.yaml").write_text(POOL_YAML)
    (root / "a.yaml").write_text(tenant_yaml("tenant-a", "edge", ["api.tenant-a.io", "app.tenant-a.io"]))
    return root


@pytest.fixture
def orch(desired: Path, tmp_path: Path) -> Iterator[tuple[Orchestrator, FakeMonitor, CountingDelivery]]:
    monitor = FakeMonitor()
    delivery = CountingDelivery(tmp_path / "out", "edge")
    o = Orchestrator("edge", DirectorySource(desired), delivery, monitor=monitor, poll_interval=3600,  # type: ignore[arg-type]
                     clock=lambda: 0.0)
    o.lease_state = o.lease.acquire()
    yield o, monitor, delivery


def ips(path: Path) -> list[str]:
    return [line.split()[0] for line in path.read_text().splitlines() if line and not line.startswith("#")]


def test_targets_come_from_the_pool(orch: tuple[Orchestrator, FakeMonitor, CountingDelivery]) -> None:
    o, monitor, _ = orch
    o.poll()
    assert sorted(monitor.targets) == ["n1", "n2", "n3"]
    spec, settings = monitor.targets["n1"]
    assert (spec.protocol, spec.address, spec.port, spec.path) == ("HTTP", "10.0.0.1", 15021, "/healthz/ready")
    assert settings == HealthSettings.for_node_pool(NodePool("edge", ()).health)


def test_publishes_on_change_only(orch: tuple[Orchestrator, FakeMonitor, CountingDelivery], tmp_path: Path) -> None:
    o, monitor, delivery = orch
    o.poll()
    monitor.set(n1=State.HEALTHY, n2=State.HEALTHY, n3=State.UNHEALTHY)
    o.publish()
    assert ips(tmp_path / "out" / "tenant-a.hosts") == ["10.0.0.1", "10.0.0.2"]
    assert delivery.calls == 1 and o.ready
    o.publish()
    o.publish()
    assert delivery.calls == 1  # nothing changed: not even a delivery call
    monitor.set(n3=State.HEALTHY)
    o.publish()
    assert ips(tmp_path / "out" / "tenant-a.hosts") == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    assert o.metrics.value("health_orchestrator_dns_updates_total") == 2


def test_fail_open_publishes_every_node(orch: tuple[Orchestrator, FakeMonitor, CountingDelivery],
                                        tmp_path: Path) -> None:
    o, monitor, _ = orch
    o.poll()
    monitor.set(n1=State.UNHEALTHY, n2=State.HEALTHY, n3=State.UNHEALTHY)
    o.publish()
    monitor.set(n2=State.UNHEALTHY)
    o.publish()
    o.refresh_metrics()
    # the last survivor going down publishes every node, not the survivor alone
    assert ips(tmp_path / "out" / "tenant-a.hosts") == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    assert o.published.fail_open and o.status()["fail_open"] is True
    assert o.metrics.value("health_orchestrator_fail_open") == 1
    assert o.metrics.value("health_orchestrator_healthy_nodes") == 0
    assert o.metrics.value("health_orchestrator_published_nodes") == 3


def test_all_down_from_the_start_publishes_every_node(orch: tuple[Orchestrator, FakeMonitor, CountingDelivery],
                                                       tmp_path: Path) -> None:
    o, monitor, _ = orch
    o.poll()
    monitor.set(n1=State.UNHEALTHY, n2=State.UNHEALTHY, n3=State.UNHEALTHY)
    o.publish()
    assert ips(tmp_path / "out" / "tenant-a.hosts") == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    assert o.published.fail_open


def test_nothing_is_delivered_before_the_first_round(orch: tuple[Orchestrator, FakeMonitor, CountingDelivery]) -> None:
    o, monitor, delivery = orch
    o.poll()
    monitor.set(n1=State.HEALTHY)  # n2, n3 never checked, and no time has passed
    o.publish()
    assert delivery.calls == 0 and not o.ready


def test_a_new_tenant_is_picked_up_on_the_next_poll(orch: tuple[Orchestrator, FakeMonitor, CountingDelivery],
                                                     desired: Path, tmp_path: Path) -> None:
    o, monitor, _ = orch
    o.poll()
    monitor.set(n1=State.HEALTHY, n2=State.HEALTHY, n3=State.HEALTHY)
    o.publish()
    (desired / "b.yaml").write_text(tenant_yaml("tenant-b", "edge", ["shop.tenant-b.test"]))
    o.poll()
    o.publish()
    assert ips(tmp_path / "out" / "tenant-b.hosts") == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    assert o.metrics.value("health_orchestrator_tenants", {"state": "served"}) == 2


def test_a_broken_revision_and_a_rejected_tenant_keep_the_last_good(
        orch: tuple[Orchestrator, FakeMonitor, CountingDelivery], desired: Path) -> None:
    o, _, _ = orch
    o.poll()
    (desired / "a.yaml").write_text(tenant_yaml("tenant-a", "edge", ["api.tenant-a.io"]).replace("domains", "domainz"))
    o.poll()
    assert o.plan is not None and o.plan.block_of("tenant-a") is not None
    assert any("Tenant tenant-a does not validate" in n for n in o.notes)
    (desired / "x.yaml").write_text("{ not yaml")
    o.poll()
    assert any("held the last good" in n for n in o.notes)
    assert o.pool is not None and len(o.pool.nodes) == 3


def test_the_pool_gone_from_git_is_kept(orch: tuple[Orchestrator, FakeMonitor, CountingDelivery],
                                        desired: Path) -> None:
    o, monitor, _ = orch
    o.poll()
    (desired / "pool.yaml").unlink()
    o.poll()
    assert len(monitor.targets) == 3
    assert any("gone from the desired state" in n for n in o.notes)


def test_an_unreadable_source_is_an_error_not_a_crash(tmp_path: Path) -> None:
    class Broken:
        def read(self) -> Any:
            raise UnreachableError("remote down")

    o = Orchestrator("edge", Broken(), DirectoryDelivery(tmp_path, "edge"), monitor=FakeMonitor())  # type: ignore[arg-type]
    o.poll()
    assert "remote down" in o.errors["desired"]
    assert o.metrics.value("health_orchestrator_desired_errors_total", {"reason": "Unreachable"}) == 1


def test_status_has_seed_004s_fields(orch: tuple[Orchestrator, FakeMonitor, CountingDelivery]) -> None:
    o, monitor, _ = orch
    o.poll()
    monitor.set(n1=State.HEALTHY, n2=State.UNHEALTHY, n3=State.HEALTHY)
    o.publish()
    status = o.status()
    assert status["healthy_nodes"] == ["n1", "n3"] and status["total_nodes"] == 3 and status["last_check"]
    assert status["zones"] == [{"zone": "tenant-a.io", "tenants": ["tenant-a"], "file": "tenant-a.hosts"}]


def test_node_series_follow_the_pool(orch: tuple[Orchestrator, FakeMonitor, CountingDelivery], desired: Path) -> None:
    o, monitor, _ = orch
    o.poll()
    monitor.set(n1=State.HEALTHY, n2=State.UNHEALTHY, n3=State.HEALTHY)
    o.refresh_metrics()
    assert o.metrics.value("health_orchestrator_node_status", {"node_name": "n2", "node_ip": "10.0.0.2"}) == 0
    assert o.metrics.value("health_orchestrator_probe_consecutive_failures", {"node_name": "n2"}) == 2
    assert o.metrics.value("health_orchestrator_check_duration_seconds_count") == 3
    (desired / "pool.yaml").write_text(POOL_YAML.replace("    - {name: n3, ip: 10.0.0.3}\n", ""))
    o.poll()
    o.refresh_metrics()
    assert o.metrics.value("health_orchestrator_node_status", {"node_name": "n3", "node_ip": "10.0.0.3"}) is None
    assert o.metrics.value("health_orchestrator_total_nodes") == 2


# --- leases, discovery, configuration -------------------------------------------------------------


def test_file_lease_is_exclusive_while_held(tmp_path: Path) -> None:
    first, second = FileLease(tmp_path / "x.lock"), FileLease(tmp_path / "x.lock")
    assert first.acquire().held and first.acquire().held
    refused = second.acquire()
    assert not refused.held and "locked by" in refused.message
    first.release()
    assert second.acquire().held
    second.release()


def test_make_lease_auto(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    config = OrchestratorConfig(repo=".", node_pool="edge", out=tmp_path, state_dir=tmp_path)
    lease = make_lease(config)
    assert isinstance(lease, FileLease) and lease.path == tmp_path / "orchestrator-edge.lock"


def test_config_from_flags() -> None:
    config = config_from_flags({"repo": "https://git.example.com/dns.git", "node_pool": "edge",
                                "configmap": "kube-system/coredns-custom", "poll_interval": "1m",
                                "lease": "none", "state_dir": "/tmp/s"})
    assert config.configmap == ("kube-system", "coredns-custom") and config.poll_interval == 60.0
    assert config.out is None and config.state_dir == Path("/tmp/s")
    with pytest.raises(ConfigError, match="NAMESPACE/NAME"):
        config_from_flags({"repo": ".", "node_pool": "edge", "configmap": "nope"})
    with pytest.raises(ConfigError, match="exactly one"):
        OrchestratorConfig(repo=".", node_pool="edge")


@pytest.mark.parametrize(("repo", "url"), [("https://x/y.git", True), ("git@host:org/dns.git", True),
                                          ("file:///srv/dns", True), ("./example-repo", False), ("/srv/dns", False)])
def test_is_url(repo: str, url: bool) -> None:
    assert is_url(repo) is url


def test_discovery_lists_nodes_by_label_selector() -> None:
    kubernetes = pytest.importorskip("kubernetes")
    from tests.fakes.kube_apiserver import FakeKube

    fake = FakeKube()

    def node(name: str, ip: str, labels: dict[str, str]) -> None:
        fake.create("", "v1", "nodes", {"metadata": {"name": name, "labels": labels},
                                        "status": {"addresses": [{"type": "Hostname", "address": name},
                                                                 {"type": "InternalIP", "address": ip}]}})

    node("w1", "10.1.0.1", {"ingress": "true"})
    node("w2", "10.1.0.2", {"ingress": "false"})
    node("w3", "fd00::3", {"ingress": "true"})
    fake.start()
    try:
        cfg = kubernetes.client.Configuration()
        cfg.host = fake.base_url
        api = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(cfg))
        pool = NodePool("edge", (), HealthCheck(protocol="HTTP", port=15021, path="/healthz/ready"),
                        discovery_selector="ingress=true")
        found = discover_nodes(api, pool)
        assert [(n.name, n.ip, n.health_endpoint) for n in found] == [
            ("w1", "10.1.0.1", "http://10.1.0.1:15021/healthz/ready"),
            ("w3", "fd00::3", "http://[fd00::3]:15021/healthz/ready"),
        ]
        assert discover_nodes(api, NodePool("plain", ())) == ()
    finally:
        fake.stop()


def test_each_probe_round_is_observed_once_and_a_name_twice_gives_one_series(
        orch: tuple[Orchestrator, FakeMonitor, CountingDelivery]) -> None:
    o, monitor, _ = orch
    o.poll()
    monitor.set(n1=State.HEALTHY, n2=State.UNHEALTHY, n3=State.HEALTHY)
    o.refresh_metrics()
    o.refresh_metrics()  # no round ended since: nothing observed again
    assert o.metrics.value("health_orchestrator_check_duration_seconds_count") == 3
    assert o.metrics.value("health_orchestrator_healthy_nodes") == 2
    monitor.timing["n2"] = ProbeTiming(0.5, 101.0)  # one more round of n2
    o.refresh_metrics()
    assert o.metrics.value("health_orchestrator_check_duration_seconds_count") == 4
    assert o.metrics.value("health_orchestrator_probe_last_duration_seconds", {"node_name": "n2"}) == 0.5
    assert o.metrics.value("health_orchestrator_probe_last_duration_seconds", {"node_name": "n1"}) == 0.01
    # a discovered node under a name the pool lists already: one series for the name, the last node's
    nodes = o.view.nodes
    o.view.nodes = (*nodes, Node("n1", "10.0.0.9", ""))
    o.refresh_metrics()
    assert sorted(o.metrics.node_samples()) == ["n1", "n2", "n3"] and o.metrics.node_samples()["n1"][0] == "10.0.0.9"
    o.view.nodes = nodes
    o.refresh_metrics()
    assert o.metrics.node_samples()["n1"][0] == "10.0.0.1"
