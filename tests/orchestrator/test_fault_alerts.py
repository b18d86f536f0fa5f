"""Every fault kind the orchestrator meets shows in /metrics and fires the shipped alert that
names it (issue 30, item 8; docs/health.md, "Faults and alerts").

For each kind of `gitdns.orchestrator.metrics.FAULT_KINDS` a scenario drives one orchestrator
into it through its own ports (a desired state that cannot be read, node discovery failing, a
headersSecret that cannot be read, nodes failing their probes, a tenant whose zone name would
break CoreDNS's files, a delivery failing, the pool's lease held by another process), steps it once a
simulated minute and scrapes its real ``/metrics`` on loopback; the shipped PrometheusRule's
alerts are evaluated on the scrapes (tests/alert_eval.py, ``for`` included) and the alert naming
the kind must fire.  A kind with no scenario fails.  The clock is a fake one, a minute a step.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from gitdns.adapters.coredns_delivery import DeliveryResult, DirectoryDelivery
from gitdns.adapters.leases import FileLease, Lease, NoLease
from gitdns.adapters.listen import endpoints
from gitdns.core.health import State
from gitdns.core.model import DesiredState, Node, NodePool, Origin, Tenant
from gitdns.errors import AuthError, UnreachableError
from gitdns.orchestrator.metrics import FAULT_KINDS
from gitdns.orchestrator.service import Orchestrator
from gitdns.orchestrator.sources import DirectorySource
from gitdns.orchestrator.wiring import servers
from tests.agent.fakes import ROOT
from tests.alert_eval import Timeline, firing, rules
from tests.e2e.orchestrator_kit import tenant_yaml
from tests.orchestrator.test_kube_access import HEADERS, POOL_YAML
from tests.orchestrator.test_orchestrator import FakeMonitor
from tests.orchestrator.test_tenant_fencing import StateSource

STEPS = 20  # simulated minutes: more than every orchestrator alert's window and `for`
RULE = ROOT / "deploy" / "orchestrator" / "components" / "prometheus-rule" / "prometheusrule.yaml"
ALL_UP = {"n1": State.HEALTHY, "n2": State.HEALTHY, "n3": State.HEALTHY}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class Failing(DirectoryDelivery):
    def deliver(self, files: Mapping[str, str]) -> DeliveryResult:
        raise UnreachableError("the API server does not answer")


def desired(tmp: Path, pool: str = POOL_YAML) -> Path:
    root = tmp / "desired"
    root.mkdir(exist_ok=True)
    (root / "pool.yaml").write_text(pool)
    (root / "a.yaml").write_text(tenant_yaml("tenant-a", "edge", ["api.tenant-a.io"]))
    return root


def run(tmp: Path, *, source: Any = None, delivery: Any = None, lease: Lease | None = None,
        states: Mapping[str, State] = ALL_UP, **options: Any) -> tuple[Orchestrator, list[dict[str, str]]]:
    """An orchestrator stepped once a simulated minute for `STEPS` minutes, its /metrics scraped
    after each step; the shipped alerts firing at the end."""
    clock, monitor = Clock(), FakeMonitor()
    out = delivery or DirectoryDelivery(tmp / "out", "edge")
    o = Orchestrator("edge", source or DirectorySource(desired(tmp)), out,
                     monitor=monitor, lease=lease or NoLease(), poll_interval=60, clock=clock,  # type: ignore[arg-type]
                     **options)
    admin, probe = servers(o, lambda build: endpoints("127.0.0.2:0", "127.0.0.1:0", build))
    pages: list[tuple[float, str]] = []
    with admin, probe:
        for _ in range(STEPS + 1):
            monitor.set(**states)
            o.step()
            o.refresh_metrics()
            with urllib.request.urlopen(f"http://{probe.host}:{probe.port}/metrics", timeout=10) as answer:
                pages.append((clock.now, answer.read().decode()))
            clock.now += 60.0
    document = YAML(typ="safe").load(RULE.read_text())
    timeline = Timeline.of(pages)
    return o, [alert for rule in rules(document) for alert in firing(rule, timeline)]


def fires(alerts: list[dict[str, str]], name: str, **labels: str) -> bool:
    return any(a["alertname"] == name and all(a.get(k) == v for k, v in labels.items()) for a in alerts)


def names(alerts: list[dict[str, str]]) -> list[tuple[str, str]]:
    return sorted({(a["alertname"], a.get("reason", "")) for a in alerts})


def condition(o: Orchestrator, kind: str) -> tuple[str, str]:
    found = next(c for c in o.status()["conditions"] if c["type"] == kind)
    return found["status"], found["reason"]


# --- the scenarios: one per fault kind ------------------------------------------------------------


class Down:
    def read(self) -> Any:
        raise UnreachableError("git.example.com: connection refused")


def desired_unreadable(tmp: Path) -> list[dict[str, str]]:
    o, alerts = run(tmp, source=Down())
    assert condition(o, "DesiredLoaded") == ("False", "Unreachable")
    assert fires(alerts, "DesiredStateUnreadable"), names(alerts)
    return alerts


def discovery_failing(tmp: Path) -> list[dict[str, str]]:
    def discover(_pool: NodePool) -> tuple[Node, ...]:
        raise UnreachableError("the API server does not answer")

    pool = POOL_YAML + "  discovery: {labelSelector: 'edge=true'}\n"
    o, alerts = run(tmp, source=DirectorySource(desired(tmp, pool)), discovery=discover)
    assert o.faults.reasons.get("discovery") == "DiscoveryFailed"
    assert fires(alerts, "NodeDiscoveryFailing", reason="DiscoveryFailed"), names(alerts)
    return alerts


def probe_config(tmp: Path) -> list[dict[str, str]]:
    def headers(_secret: str) -> Any:
        raise AuthError("secrets \"probe-auth\" is forbidden", reason="HeadersSecretUnreadable")

    o, alerts = run(tmp, source=DirectorySource(desired(tmp, POOL_YAML + HEADERS)), headers=headers)
    assert condition(o, "ProbesConfigured") == ("False", "HeadersSecretUnreadable")
    assert fires(alerts, "ProbeConfigErrors", reason="HeadersSecretUnreadable"), names(alerts)
    return alerts


def probe_failing(tmp: Path) -> list[dict[str, str]]:
    o, alerts = run(tmp, states={**ALL_UP, "n2": State.UNHEALTHY})
    assert o.metrics.value("health_orchestrator_probe_consecutive_failures", {"node_name": "n2"}) == 2
    assert fires(alerts, "NodeProbesFailing", node_name="n2"), names(alerts)
    assert not fires(alerts, "NodeProbesFailing", node_name="n1")
    return alerts


def all_nodes_down(tmp: Path) -> list[dict[str, str]]:
    o, alerts = run(tmp, states={name: State.UNHEALTHY for name in ALL_UP})
    assert condition(o, "NodesHealthy") == ("False", "AllNodesDown")
    assert fires(alerts, "AllNodesDown") and fires(alerts, "FailOpen"), names(alerts)
    return alerts


class EveryPoll(StateSource):
    """The same desired state at every read (StateSource gives it once)."""

    def __init__(self, state: DesiredState) -> None:
        super().__init__(state)
        self.kept = state

    def read(self) -> Any:
        self.state = self.kept
        return super().read()


def render_refused(tmp: Path) -> list[dict[str, str]]:
    nodes = tuple(Node(f"n{i}", f"10.0.0.{i}", f"http://10.0.0.{i}:15021/healthz/ready") for i in (1, 2, 3))
    state = DesiredState(node_pools=(NodePool("edge", nodes),), tenants=(
        Tenant("z", ("a.z.io",), "edge", "z.io\nimport /etc/passwd", Origin("z.yaml", 7)),
        Tenant("tenant-a", ("api.tenant-a.io",), "edge", origin=Origin("a.yaml", 1))))
    o, alerts = run(tmp, source=EveryPoll(state))
    assert o.metrics.value("health_orchestrator_tenants", {"state": "refused"}) == 1
    assert fires(alerts, "TenantsRefused"), names(alerts)
    return alerts


def delivery_failing(tmp: Path) -> list[dict[str, str]]:
    o, alerts = run(tmp, delivery=Failing(tmp / "out", "edge"))
    assert condition(o, "Delivered") == ("False", "Unreachable")
    assert fires(alerts, "DNSDeliveryFailing"), names(alerts)
    return alerts


def lease_lost(tmp: Path) -> list[dict[str, str]]:
    holder = FileLease(tmp / "orchestrator-edge.lock")
    assert holder.acquire().held  # another process of the pool holds it, and never delivers
    try:
        o, alerts = run(tmp, lease=FileLease(tmp / "orchestrator-edge.lock"))
    finally:
        holder.release()
    assert condition(o, "LeaseHeld") == ("False", "LeaseHeldByAnother")
    assert fires(alerts, "PoolLeaseNotHeld", namespace="gitdns-system"), names(alerts)
    return alerts


SCENARIOS: dict[str, Callable[[Path], list[dict[str, str]]]] = {
    "desired": desired_unreadable,
    "discovery": discovery_failing,
    "probe-config": probe_config,
    "probe": probe_failing,
    "all-nodes-down": all_nodes_down,
    "render": render_refused,
    "delivery": delivery_failing,
    "lease-lost": lease_lost,
}


def test_every_fault_kind_has_a_scenario() -> None:
    assert set(SCENARIOS) == set(FAULT_KINDS)


@pytest.mark.parametrize("kind", sorted(FAULT_KINDS))
def test_each_fault_kind_fires_its_alert(kind: str, tmp_path: Path) -> None:
    scenario = SCENARIOS.get(kind)
    assert scenario is not None, f"fault kind {kind} has no scenario (and so no alert shown to fire)"
    scenario(tmp_path)


def test_a_healthy_orchestrator_fires_nothing(tmp_path: Path) -> None:
    o, alerts = run(tmp_path)
    assert condition(o, "Delivered") == ("True", "Delivered")
    assert alerts == []
