"""The failover path of the orchestrator made short (bench/bench_failover.py): the publisher
sorts the pool's addresses once per set of nodes and renders and checks a hosts file without
sorting them again, yet writes exactly what `gitdns.core.corefile` renders and refuses what it
refuses; a health change after a quiet spell is published at once, a burst waits out the gap;
the run loop freezes what it loaded out of the cyclic collector's reach, and reads the desired
state on a thread of its own, so that a read that hangs keeps no health change waiting."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gitdns.adapters.templates import load_template_sources
from gitdns.core.corefile import ZoneBlock, check_hosts, render_hosts, sort_ips
from gitdns.core.desired import Desired
from gitdns.core.health import State, TargetHealth
from gitdns.core.render import make_environment
from gitdns.errors import UnreachableError
from gitdns.orchestrator.service import PUBLISH_GAP, Orchestrator, ReadAhead, wait_after_wake
from gitdns.orchestrator.sources import DirectorySource
from tests.e2e.orchestrator_kit import tenant_yaml
from tests.orchestrator.test_orchestrator import CountingDelivery, FakeMonitor, ips

# out of order, IPv6 among IPv4, 10.0.0.10 after 10.0.0.9 (numerically), two nodes on one address
NODES = {"a": "10.0.0.10", "b": "2001:db8::1", "c": "10.0.0.9", "d": "192.168.1.1", "e": "10.0.0.9",
         "f": "10.0.0.2"}


def pool_yaml(nodes: dict[str, str]) -> str:
    lines = ["apiVersion: gitdns.io/v1alpha1", "kind: NodePool", "metadata: {name: edge}", "spec:", "  nodes:"]
    lines += [f"    - {{name: {name}, ip: \"{ip}\"}}" for name, ip in nodes.items()]
    return "\n".join(lines) + "\n"


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[tuple[Orchestrator, FakeMonitor, Path, Path]]:
    root = tmp_path / "desired"
    root.mkdir()
    (root / "pool.yaml").write_text(pool_yaml(NODES))
    (root / "a.yaml").write_text(tenant_yaml("tenant-a", "edge", ["api.tenant-a.io", "app.tenant-a.io"]))
    monitor = FakeMonitor()
    o = Orchestrator("edge", DirectorySource(root), CountingDelivery(tmp_path / "out", "edge"), monitor=monitor,
                     poll_interval=3600, clock=lambda: 0.0)  # type: ignore[arg-type]
    o.lease_state = o.lease.acquire()
    o.poll()
    yield o, monitor, root, tmp_path / "out" / "tenant-a.hosts"


def test_published_in_sort_ips_order_without_duplicates(rig: tuple[Orchestrator, FakeMonitor, Path, Path]) -> None:
    o, monitor, _, hosts = rig
    monitor.set(**{name: State.HEALTHY for name in NODES})
    o.publish()
    assert o.published.ips == sort_ips(NODES.values()) == ips(hosts)
    assert o.published.healthy == sort_ips(NODES.values())
    monitor.set(c=State.UNHEALTHY, b=State.UNHEALTHY)
    o.publish()
    # e is still up on c's address: the address stays, once
    assert ips(hosts) == o.published.ips == ["10.0.0.2", "10.0.0.9", "10.0.0.10", "192.168.1.1"]


def test_hosts_file_is_what_core_renders_and_checks(rig: tuple[Orchestrator, FakeMonitor, Path, Path]) -> None:
    o, monitor, _, hosts = rig
    monitor.set(**{name: State.HEALTHY for name in NODES})
    monitor.set(d=State.UNHEALTHY)
    o.publish()
    assert o.plan is not None
    block = o.plan.blocks[0]
    env = make_environment(load_template_sources())
    expected = render_hosts(env, "edge", block, ["2001:db8::1", "10.0.0.9", "10.0.0.10", "10.0.0.2"], len(NODES))
    assert hosts.read_text() == expected
    assert check_hosts(expected, block, o.published.ips) == [] == o.publisher._hosts(block, o.published.ips,
                                                                                       len(NODES))[1]


def test_a_bad_domain_is_refused_as_core_refuses_it(rig: tuple[Orchestrator, FakeMonitor, Path, Path]) -> None:
    o, _, _, _ = rig
    block = ZoneBlock("tenant-a.io", ("tenant-a",), ("api.tenant-a.io", "bad..name.tenant-a.io"), "tenant-a.hosts")
    text, problems = o.publisher._hosts(block, ["10.0.0.1"], 1)
    assert problems and problems == check_hosts(text, block, ["10.0.0.1"])
    with pytest.raises(ValueError, match="empty hosts file"):
        o.publisher._hosts(block, [], 1)


def test_node_order_follows_a_new_set_of_nodes(rig: tuple[Orchestrator, FakeMonitor, Path, Path]) -> None:
    o, monitor, root, hosts = rig
    monitor.set(**{name: State.HEALTHY for name in NODES})
    o.publish()
    (root / "pool.yaml").write_text(pool_yaml({**NODES, "g": "10.0.0.1"}))
    o.poll()
    monitor.set(g=State.HEALTHY)
    o.publish()
    assert ips(hosts) == sort_ips([*NODES.values(), "10.0.0.1"])


def test_fail_open_keeps_every_node_in_order(rig: tuple[Orchestrator, FakeMonitor, Path, Path]) -> None:
    o, monitor, _, hosts = rig
    monitor.set(**{name: State.UNHEALTHY for name in NODES})
    o.publish()
    assert o.published.fail_open and ips(hosts) == sort_ips(NODES.values()) and o.published.healthy == []


def test_thresholds_still_decide(rig: tuple[Orchestrator, FakeMonitor, Path, Path]) -> None:
    """One failed probe (unknown, below the failure threshold) withdraws nothing."""
    o, monitor, _, hosts = rig
    monitor.set(**{name: State.HEALTHY for name in NODES})
    o.publish()
    monitor.health["d"] = TargetHealth(State.HEALTHY, checks=5, failures=1)
    o.publish()
    assert "192.168.1.1" in ips(hosts)


def test_a_change_after_quiet_is_published_at_once_a_burst_waits_the_gap() -> None:
    assert wait_after_wake(woken=10.0, now=10.5) == 0.0  # quiet since the last pass woken by a change
    assert wait_after_wake(woken=10.0, now=10.0 + PUBLISH_GAP) == 0.0
    assert wait_after_wake(woken=10.0, now=10.01) == pytest.approx(PUBLISH_GAP - 0.01)
    assert PUBLISH_GAP <= 0.05  # part of the failover budget (docs/health.md)


def test_run_freezes_what_it_loaded_once_it_delivered(rig: tuple[Orchestrator, FakeMonitor, Path, Path]) -> None:
    o, monitor, _, hosts = rig
    monitor.set(**{name: State.HEALTHY for name in NODES})
    thread = threading.Thread(target=o.run, daemon=True)
    try:
        thread.start()
        for _ in range(200):
            if hosts.exists() and gc.get_freeze_count() > 0:
                break
            threading.Event().wait(0.02)
        assert hosts.exists() and gc.get_freeze_count() > 0
    finally:
        o.stopped.set()
        o.wake.set()
        thread.join(10)
        gc.unfreeze()


def test_addresses_are_written_as_sort_ips_writes_them(tmp_path: Path) -> None:
    """An address given in another spelling (upper case, a mapped IPv4) is published as
    `sort_ips` writes it, ordered as it orders it."""
    root = tmp_path / "desired"
    root.mkdir()
    spelled = {"a": "2001:DB8:0::2", "b": "::ffff:127.0.0.1", "c": "10.0.0.1"}
    (root / "pool.yaml").write_text(pool_yaml(spelled))
    (root / "a.yaml").write_text(tenant_yaml("tenant-a", "edge", ["api.tenant-a.io"]))
    monitor = FakeMonitor()
    o = Orchestrator("edge", DirectorySource(root), CountingDelivery(tmp_path / "out", "edge"), monitor=monitor,
                     poll_interval=3600, clock=lambda: 0.0)  # type: ignore[arg-type]
    o.lease_state = o.lease.acquire()
    o.poll()
    monitor.set(a=State.HEALTHY, b=State.HEALTHY, c=State.UNHEALTHY)
    o.publish()
    assert o.published.ips == sort_ips(["2001:DB8:0::2", "::ffff:127.0.0.1"]) == ["::ffff:7f00:1", "2001:db8::2"]
    assert ips(tmp_path / "out" / "tenant-a.hosts") == o.published.ips


class BlockingSource:
    """A directory source whose reads after the first wait for ``release`` (a git remote that
    hangs until its timeout)."""

    def __init__(self, root: Path) -> None:
        self.inner = DirectorySource(root)
        self.reads = 0
        self.release = threading.Event()
        self.blocked = threading.Event()

    def read(self) -> Desired | None:
        self.reads += 1
        if self.reads > 1:
            self.blocked.set()
            self.release.wait(30)
        return self.inner.read()


def wait(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    stop = threading.Event()
    for _ in range(int(timeout / 0.02)):
        if predicate():
            return True
        stop.wait(0.02)
    return predicate()


def test_a_health_change_is_published_while_the_desired_state_is_being_read(tmp_path: Path) -> None:
    root = tmp_path / "desired"
    root.mkdir()
    (root / "pool.yaml").write_text(pool_yaml({"a": "10.0.0.1", "b": "10.0.0.2"}))
    (root / "a.yaml").write_text(tenant_yaml("tenant-a", "edge", ["api.tenant-a.io"]))
    source = BlockingSource(root)
    monitor = FakeMonitor()
    monitor.set(a=State.HEALTHY, b=State.HEALTHY)
    o = Orchestrator("edge", source, CountingDelivery(tmp_path / "out", "edge"), monitor=monitor,  # type: ignore[arg-type]
                     poll_interval=0.05)
    hosts = tmp_path / "out" / "tenant-a.hosts"
    thread = threading.Thread(target=o.run, daemon=True)
    try:
        thread.start()
        assert wait(lambda: hosts.exists() and ips(hosts) == ["10.0.0.1", "10.0.0.2"])
        assert source.blocked.wait(10)  # the second read hangs
        monitor.set(b=State.UNHEALTHY)
        o.wake.set()
        assert wait(lambda: ips(hosts) == ["10.0.0.1"])  # published while the read still hangs
        assert source.blocked.is_set() and not source.release.is_set()
    finally:
        source.release.set()
        o.stopped.set()
        o.wake.set()
        thread.join(10)
        gc.unfreeze()


class ScriptedSource:
    def __init__(self, *results: Desired | Exception | None) -> None:
        self.results = list(results)

    def read(self) -> Desired | None:
        result = self.results.pop(0) if self.results else None
        if isinstance(result, Exception):
            raise result
        return result


def test_read_ahead_keeps_a_state_not_taken_yet_and_hands_over_errors(tmp_path: Path) -> None:
    root = tmp_path / "desired"
    root.mkdir()
    (root / "pool.yaml").write_text(pool_yaml({"a": "10.0.0.1"}))
    desired = DirectorySource(root).read()
    assert desired is not None
    stopped, woken = threading.Event(), threading.Event()
    reader = ReadAhead(ScriptedSource(desired, None, None))  # a state, then "unchanged" twice
    assert reader.read() is desired  # not started: a read in place
    reader = ReadAhead(ScriptedSource(desired, None, None))
    reader.start(lambda: 0.01, stopped, woken)
    try:
        assert woken.wait(5) and wait(lambda: reader.source.results == [])  # type: ignore[attr-defined]
        assert reader.handed() and reader.read() is desired  # the later "unchanged" did not drop it
        assert reader.read() is None  # nothing handed since
    finally:
        stopped.set()
    stopped = threading.Event()
    reader = ReadAhead(ScriptedSource(UnreachableError("remote down")))
    reader.start(lambda: 5.0, stopped, threading.Event())
    try:
        assert wait(reader.handed)
        with pytest.raises(UnreachableError, match="remote down"):
            reader.read()
    finally:
        stopped.set()
