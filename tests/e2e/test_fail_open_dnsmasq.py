"""Fail open end to end for the orchestrator: three real HTTP nodes on 127.0.0.31-33, a real
dnsmasq serving the hosts files the orchestrator delivers (SIGHUP after each write).

Nodes are stopped in sequence and together, and brought back one at a time; after every step
the test asks dnsmasq what it answers.  With every node down the tenant's name answers with
all three nodes (never the last one seen alive), ``health_orchestrator_fail_open`` is 1 and
``NodesHealthy`` reads ``AllNodesDown``; as nodes recover they alone are answered again.
Every wait is bounded; no test asserts how long anything took.  CI=true turns a missing
dnsmasq into a failure.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitdns.adapters.coredns_delivery import DirectoryDelivery
from gitdns.core.reach import ProbeReach
from gitdns.orchestrator.service import Orchestrator
from gitdns.orchestrator.sources import DirectorySource
from tests.e2e.orchestrator_kit import Dnsmasq, NodeServer, dnsmasq_path, start_nodes, wait_for, write_desired

POOL = "edge"
API = "api.tenant-a.test"


def require_dnsmasq() -> str:
    found = dnsmasq_path()
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("dnsmasq is required in CI: apt-get install -y --no-install-recommends dnsmasq-base")
        pytest.skip("dnsmasq not installed (apt-get install -y --no-install-recommends dnsmasq-base)")
    return found


@dataclass
class Rig:
    nodes: dict[str, NodeServer]
    out: Path
    dnsmasq: Dnsmasq
    orchestrator: Orchestrator

    def ips(self, *names: str) -> set[str]:
        return {self.nodes[n].ip for n in (names or tuple(self.nodes))}

    def signals(self) -> tuple[float | None, bool, str]:
        o = self.orchestrator
        o.refresh_metrics()
        nodes = next(c for c in o.status()["conditions"] if c["type"] == "NodesHealthy")
        return o.metrics.value("health_orchestrator_fail_open"), bool(o.status()["fail_open"]), nodes["reason"]

    def expect(self, names: tuple[str, ...], what: str, *, all_down: bool = False) -> None:
        """dnsmasq answers exactly the nodes ``names`` (and the hosts file lists them), with the
        all-nodes-down signals on or off; the answer then holds over several probe rounds."""
        expected = self.ips(*names)
        signals = (1, True, "AllNodesDown") if all_down else (0, False, "NodesHealthy")
        wait_for(lambda: self.dnsmasq.answers(API) == expected and self.signals() == signals,
                 timeout=30, what=f"{what}: {sorted(expected)} {signals}")
        lines = [ln for ln in (self.out / "tenant-a.hosts").read_text().splitlines() if not ln.startswith("#")]
        assert {ln.split()[0] for ln in lines} == expected
        for _ in range(10):
            time.sleep(0.1)
            assert self.dnsmasq.answers(API) == expected, f"{what}: the answer moved"

    def stop(self, *names: str) -> None:
        for name in names:
            self.nodes[name].stop()

    def start(self, *names: str) -> None:
        for name in names:
            self.nodes[name].start()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    binary = require_dnsmasq()
    nodes = start_nodes(3, first=31)
    desired, out = tmp_path / "desired", tmp_path / "out"
    write_desired(desired, POOL, nodes, {"tenant-a": [API]}, interval=0.2, timeout=0.2)
    dnsmasq = Dnsmasq(out, tmp_path, binary).start()
    orchestrator = Orchestrator(POOL, DirectorySource(desired),
                                DirectoryDelivery(out, POOL, pid_file=dnsmasq.pid_file), poll_interval=0.2,
                                reach=ProbeReach.parse("127.0.0.0/8"))  # the nodes: on loopback
    thread = threading.Thread(target=orchestrator.run, daemon=True)
    thread.start()
    try:
        yield Rig({n.name: n for n in nodes}, out, dnsmasq, orchestrator)
    finally:
        orchestrator.stopped.set()
        orchestrator.wake.set()
        thread.join(10)
        dnsmasq.stop()
        for node in nodes:
            node.stop()


def test_every_node_down_publishes_every_node_and_recovery_withdraws_again(rig: Rig) -> None:
    rig.expect((), "all three answered")

    # in sequence: withdrawn one by one, then the last one goes and every node is answered
    rig.stop("node-1")
    rig.expect(("node-2", "node-3"), "node-1 withdrawn")
    rig.stop("node-2")
    rig.expect(("node-3",), "node-2 withdrawn")
    rig.stop("node-3")
    rig.expect((), "every node down: all three answered", all_down=True)

    # recovery one by one: only the recovered nodes, the others (still down) withdrawn again
    rig.start("node-2")
    rig.expect(("node-2",), "node-2 back alone")
    rig.start("node-3")
    rig.expect(("node-2", "node-3"), "node-3 back")
    rig.start("node-1")
    rig.expect((), "all back")

    # together: the probes see the three failures at different moments; all three end answered
    rig.stop("node-1", "node-2", "node-3")
    rig.expect((), "stopped together: all three answered", all_down=True)
    rig.start("node-3")
    rig.expect(("node-3",), "node-3 back alone")
    rig.stop("node-3")
    rig.expect((), "node-3 down again: all three answered", all_down=True)
