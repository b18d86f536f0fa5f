"""Readiness that means serving (docs/health.md, "Readiness and conditions"): /readyz is 200 once
a revision holding the pool is loaded and the first delivery was tried (or another holder of
the lease is seen), and stays so; failed deliveries, a lost lease and all nodes down are
conditions and metrics.  The two HTTP addresses: --listen the probes only, --admin-listen
/status and /metrics too (the agent's rule)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gitdns.adapters.coredns_delivery import DeliveryResult, DirectoryDelivery
from gitdns.adapters.leases import FileLease, LeaseState, NoLease
from gitdns.adapters.listen import endpoints
from gitdns.core.health import State
from gitdns.errors import UnreachableError
from gitdns.orchestrator.service import Orchestrator
from gitdns.orchestrator.sources import DirectorySource
from gitdns.orchestrator.wiring import servers
from tests.e2e.orchestrator_kit import tenant_yaml
from tests.orchestrator.kube_kit import FakeMonitor
from tests.orchestrator.test_kube_access import POOL_YAML


class Failing(DirectoryDelivery):
    def deliver(self, files: Mapping[str, str]) -> DeliveryResult:
        raise UnreachableError("the API server does not answer")


class Switch:
    """A lease the test takes away."""

    def __init__(self) -> None:
        self.held = True

    def acquire(self) -> LeaseState:
        return (LeaseState(True, "me", float("inf"), "holding") if self.held
                else LeaseState(False, "other-pod", 0.0, "held by other-pod"))

    def release(self) -> None: ...


def desired(tmp_path: Path) -> Path:
    root = tmp_path / "desired"
    root.mkdir()
    (root / "pool.yaml").write_text(POOL_YAML)
    (root / "a.yaml").write_text(tenant_yaml("tenant-a", "edge", ["api.tenant-a.io"]))
    return root


def make(tmp_path: Path, *, delivery: Any = None, lease: Any = None,
         source: Any = None) -> tuple[Orchestrator, FakeMonitor]:
    monitor = FakeMonitor()
    o = Orchestrator("edge", source or DirectorySource(desired(tmp_path)),
                     delivery or DirectoryDelivery(tmp_path / "out", "edge"), monitor=monitor,  # type: ignore[arg-type]
                     lease=lease or NoLease(), poll_interval=3600, clock=lambda: 0.0)
    return o, monitor


def condition(o: Orchestrator, kind: str) -> tuple[str, str]:
    found = next(c for c in o.status()["conditions"] if c["type"] == kind)
    return found["status"], found["reason"]


def test_not_ready_before_a_revision_nor_before_the_first_delivery(tmp_path: Path) -> None:
    o, monitor = make(tmp_path)
    assert not o.ready and condition(o, "Ready") == ("False", "DesiredStateNotLoaded")
    o.step()
    assert not o.ready and condition(o, "Ready") == ("False", "FirstDeliveryPending")  # no probe round yet
    monitor.set(n1=State.HEALTHY, n2=State.HEALTHY, n3=State.HEALTHY)
    o.step()
    assert o.ready and condition(o, "Ready") == ("True", "Serving")
    assert o.metrics.value("health_orchestrator_ready") == 1


def test_an_unreadable_desired_state_is_not_ready(tmp_path: Path) -> None:
    class Down:
        def read(self) -> Any:
            raise UnreachableError("git.example.com: connection refused")

    o, monitor = make(tmp_path, source=Down())
    monitor.set(n1=State.HEALTHY)
    o.step()
    assert not o.ready
    assert condition(o, "Ready") == ("False", "DesiredStateNotLoaded")
    assert condition(o, "DesiredLoaded") == ("False", "Unreachable")
    assert "connection refused" in o.readiness()


def test_a_failing_delivery_is_a_condition_not_notready(tmp_path: Path) -> None:
    o, monitor = make(tmp_path, delivery=Failing(tmp_path / "out", "edge"))
    monitor.set(n1=State.HEALTHY, n2=State.HEALTHY, n3=State.HEALTHY)
    o.step()
    assert o.ready
    assert condition(o, "Delivered") == ("False", "Unreachable")
    assert o.metrics.value("health_orchestrator_delivery_errors_total", {"reason": "Unreachable"}) == 1
    o.refresh_metrics()
    assert o.metrics.value("health_orchestrator_condition", {"type": "Delivered", "reason": "Unreachable"}) == 0
    assert o.metrics.value("health_orchestrator_condition", {"type": "Ready", "reason": "Serving"}) == 1


def test_all_nodes_down_and_a_lost_lease_keep_it_ready(tmp_path: Path) -> None:
    lease = Switch()
    o, monitor = make(tmp_path, lease=lease)
    monitor.set(n1=State.HEALTHY, n2=State.HEALTHY, n3=State.HEALTHY)
    o.step()
    assert o.ready
    monitor.set(n1=State.UNHEALTHY, n2=State.UNHEALTHY, n3=State.UNHEALTHY)
    o.publish()
    assert o.ready and condition(o, "NodesHealthy") == ("False", "AllNodesDown")
    lease.held = False
    o._renew_lease(0.0)
    o.step()
    assert o.ready
    assert condition(o, "LeaseHeld") == ("False", "LeaseHeldByAnother")
    assert condition(o, "Delivered") == ("False", "NotLeaseHolder")
    o.refresh_metrics()
    assert o.metrics.value("health_orchestrator_ready") == 1
    assert o.metrics.value("health_orchestrator_lease_held") == 0


def test_a_standby_waiting_for_the_lease_is_ready(tmp_path: Path) -> None:
    holder = FileLease(tmp_path / "orchestrator-edge.lock")
    assert holder.acquire().held
    try:
        o, monitor = make(tmp_path, lease=FileLease(tmp_path / "orchestrator-edge.lock"))
        monitor.set(n1=State.HEALTHY, n2=State.HEALTHY, n3=State.HEALTHY)
        o.step()
        assert o.ready and condition(o, "Ready") == ("True", "StandingBy")
        assert condition(o, "LeaseHeld") == ("False", "LeaseHeldByAnother")
        assert not (tmp_path / "out").exists()  # a standby delivers nothing
    finally:
        holder.release()


def test_the_probe_address_serves_the_probes_only(tmp_path: Path) -> None:
    o, monitor = make(tmp_path)
    monitor.set(n1=State.HEALTHY, n2=State.HEALTHY, n3=State.HEALTHY)
    o.step()
    probe, admin = servers(o, lambda build: endpoints("127.0.0.1:0", "127.0.0.2:0", build))
    with probe, admin:
        def get(server: Any, path: str) -> tuple[int, str]:
            try:
                with urllib.request.urlopen(f"http://{server.host}:{server.port}{path}", timeout=5) as response:
                    return response.status, response.read().decode()
            except urllib.error.HTTPError as exc:
                return exc.code, exc.read().decode()

        assert get(probe, "/readyz") == (200, "ready: Serving: a desired revision is loaded and the first delivery "
                                              "was tried; the other conditions say how it goes\n")
        assert get(probe, "/healthz")[0] == 200
        for path in ("/status", "/metrics", "/webhook"):
            assert get(probe, path)[0] == 404, path
        assert get(admin, "/readyz")[0] == 200
        assert json.loads(get(admin, "/status")[1])["conditions"][0]["type"] == "Ready"
        assert "health_orchestrator_condition{" in get(admin, "/metrics")[1]


def test_a_pool_without_nodes_is_ready_with_nothing_to_deliver(tmp_path: Path) -> None:
    o, _ = make(tmp_path)
    (tmp_path / "desired" / "pool.yaml").write_text("apiVersion: gitdns.io/v1alpha1\nkind: NodePool\n"
                                                    "metadata: {name: edge}\nspec:\n  nodes: []\n")
    o.step()
    assert o.pool is not None and o.ready
    assert condition(o, "Delivered") == ("False", "NoNodes") and condition(o, "NodesHealthy") == ("False", "NoNodes")
