"""Fail open in the orchestrator, with a scripted monitor: when every node of the pool is down
every node is published, whatever order the failures were seen in (never the last survivor),
the all-nodes-down signals say so, and as nodes recover they alone are published again."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitdns.core.health import State
from gitdns.orchestrator.publisher import LOGGED_IPS, ips_shown
from gitdns.orchestrator.service import Orchestrator
from gitdns.orchestrator.sources import DirectorySource
from tests.e2e.orchestrator_kit import tenant_yaml
from tests.orchestrator.test_orchestrator import POOL_YAML, CountingDelivery, FakeMonitor, ips

NODES = ("n1", "n2", "n3")
IPS = {"n1": "10.0.0.1", "n2": "10.0.0.2", "n3": "10.0.0.3"}


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[tuple[Orchestrator, FakeMonitor, Path]]:
    root = tmp_path / "desired"
    root.mkdir()
    (root / "pool.yaml").write_text(POOL_YAML)
    (root / "a.yaml").write_text(tenant_yaml("tenant-a", "edge", ["api.tenant-a.io"]))
    monitor = FakeMonitor()
    o = Orchestrator("edge", DirectorySource(root), CountingDelivery(tmp_path / "out", "edge"),
                     monitor=monitor, poll_interval=3600, clock=lambda: 0.0)  # type: ignore[arg-type]
    o.lease_state = o.lease.acquire()
    o.poll()
    monitor.set(n1=State.HEALTHY, n2=State.HEALTHY, n3=State.HEALTHY)
    o.publish()
    yield o, monitor, tmp_path / "out" / "tenant-a.hosts"


def condition(o: Orchestrator, kind: str) -> tuple[str, str]:
    c = next(c for c in o.status()["conditions"] if c["type"] == kind)
    return c["status"], c["reason"]


def all_down_signals(o: Orchestrator) -> tuple[float | None, bool, str, float | None]:
    o.refresh_metrics()
    return (o.metrics.value("health_orchestrator_fail_open"), o.status()["fail_open"],
            condition(o, "NodesHealthy")[1], o.metrics.value("health_orchestrator_healthy_nodes"))


@pytest.mark.parametrize("order", list(itertools.permutations(NODES)))
def test_failures_seen_one_by_one_in_any_order_end_with_every_node(
        rig: tuple[Orchestrator, FakeMonitor, Path], order: tuple[str, ...]) -> None:
    o, monitor, hosts = rig
    for i, name in enumerate(order, 1):
        monitor.set(**{name: State.UNHEALTHY})
        o.publish()
        left = sorted(IPS[n] for n in NODES if n not in order[:i])
        assert ips(hosts) == (left or sorted(IPS.values())), f"after {order[:i]}"
    assert o.published.ips == sorted(IPS.values()) and o.published.fail_open
    assert all_down_signals(o) == (1, True, "AllNodesDown", 0)
    o.refresh_metrics()
    assert o.metrics.value("health_orchestrator_published_nodes") == 3


def test_stopped_together_every_node_stays(rig: tuple[Orchestrator, FakeMonitor, Path]) -> None:
    o, monitor, hosts = rig
    monitor.set(n1=State.UNHEALTHY, n3=State.UNHEALTHY)  # stopped at once, seen in two probe rounds
    o.publish()
    assert ips(hosts) == ["10.0.0.2"]
    monitor.set(n2=State.UNHEALTHY)
    o.publish()
    assert ips(hosts) == sorted(IPS.values())
    assert all_down_signals(o) == (1, True, "AllNodesDown", 0)


def test_recovery_publishes_the_recovered_nodes_one_by_one(rig: tuple[Orchestrator, FakeMonitor, Path]) -> None:
    o, monitor, hosts = rig
    monitor.set(n1=State.UNHEALTHY)
    o.publish()
    monitor.set(n3=State.UNHEALTHY)
    o.publish()
    monitor.set(n2=State.UNHEALTHY)  # the last survivor goes: every node, not n2 alone
    o.publish()
    assert ips(hosts) == sorted(IPS.values())
    monitor.set(n3=State.HEALTHY)
    o.publish()
    assert ips(hosts) == ["10.0.0.3"]  # n1 and n2, still down, are withdrawn again
    assert all_down_signals(o) == (0, False, "NodesHealthy", 1)
    monitor.set(n1=State.HEALTHY)
    o.publish()
    assert ips(hosts) == ["10.0.0.1", "10.0.0.3"]
    monitor.set(n2=State.HEALTHY)
    o.publish()
    assert ips(hosts) == sorted(IPS.values())


def test_the_fail_open_warning_names_the_nodes(rig: tuple[Orchestrator, FakeMonitor, Path],
                                               caplog: pytest.LogCaptureFixture) -> None:
    o, monitor, _ = rig
    with caplog.at_level("WARNING", logger="gitdns.orchestrator.publisher"):
        monitor.set(n1=State.UNHEALTHY, n2=State.UNHEALTHY, n3=State.UNHEALTHY)
        o.publish()
    [line] = [r.getMessage() for r in caplog.records if "fail open:" in r.getMessage()]
    assert line.endswith("publishing every node: 10.0.0.1,10.0.0.2,10.0.0.3")


@given(count=st.integers(min_value=0, max_value=3 * LOGGED_IPS))
def test_a_log_line_names_at_most_a_bounded_number_of_addresses(count: int) -> None:
    addresses = [f"10.0.{i // 250}.{i % 250 + 1}" for i in range(count)]
    shown = ips_shown(addresses)
    named = [a for a in shown.split(" ")[0].split(",") if a != "-"]
    assert named == addresses[:LOGGED_IPS]
    assert (f"(+{count - LOGGED_IPS} more, {count} in all)" in shown) == (count > LOGGED_IPS)
    assert (shown == "-") == (count == 0)
