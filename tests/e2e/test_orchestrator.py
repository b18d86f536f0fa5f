"""The orchestrator end to end: real HTTP nodes on 127.0.0.x, a real dnsmasq serving the hosts
files the orchestrator delivers to a directory (SIGHUP after each write).

dnsmasq stands in for CoreDNS's ``hosts`` plugin (same file format; CoreDNS cannot run here).
Every wait is bounded but no test asserts how long anything took (bench/bench_failover.py
measures that).  CI=true turns a missing dnsmasq into a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitdns.adapters.coredns_delivery import DirectoryDelivery
from gitdns.core.reach import ProbeReach
from gitdns.orchestrator.service import Orchestrator
from gitdns.orchestrator.sources import DirectorySource
from tests.e2e.orchestrator_kit import (
    Dnsmasq,
    NodeServer,
    dnsmasq_path,
    free_port,
    start_nodes,
    tenant_yaml,
    wait_for,
    write_desired,
)

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
    nodes: list[NodeServer]
    desired: Path
    out: Path
    dnsmasq: Dnsmasq
    orchestrator: Orchestrator

    def ips(self, *names: str) -> set[str]:
        return {n.ip for n in self.nodes if n.name in names} if names else {n.ip for n in self.nodes}

    def answer_is(self, name: str, expected: set[str]) -> bool:
        return self.dnsmasq.answers(name) == expected


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    binary = require_dnsmasq()
    nodes = start_nodes(3)
    desired, out = tmp_path / "desired", tmp_path / "out"
    write_desired(desired, POOL, nodes, {"tenant-a": [API, "app.tenant-a.test"]}, interval=0.2, timeout=0.2)
    dnsmasq = Dnsmasq(out, tmp_path, binary).start()
    orchestrator = Orchestrator(POOL, DirectorySource(desired),
                                DirectoryDelivery(out, POOL, pid_file=dnsmasq.pid_file), poll_interval=0.2,
                                reach=ProbeReach.parse("127.0.0.0/8"))  # the nodes: on loopback
    thread = threading.Thread(target=orchestrator.run, daemon=True)
    thread.start()
    try:
        yield Rig(nodes, desired, out, dnsmasq, orchestrator)
    finally:
        orchestrator.stopped.set()
        orchestrator.wake.set()
        thread.join(10)
        dnsmasq.stop()
        for node in nodes:
            node.stop()


def test_a_failed_node_leaves_the_answer_and_comes_back(rig: Rig) -> None:
    wait_for(lambda: rig.answer_is(API, rig.ips()), what="all three nodes answered")
    assert rig.answer_is("app.tenant-a.test", rig.ips())
    rig.nodes[1].stop()
    wait_for(lambda: rig.answer_is(API, rig.ips("node-1", "node-3")), what="node-2 withdrawn")
    hosts = (rig.out / "tenant-a.hosts").read_text()
    assert rig.nodes[1].ip not in hosts
    rig.nodes[1].start()
    wait_for(lambda: rig.answer_is(API, rig.ips()), what="node-2 back")
    status = rig.orchestrator.status()
    assert status["total_nodes"] == 3 and sorted(status["healthy_nodes"]) == ["node-1", "node-2", "node-3"]
    assert rig.orchestrator.metrics.value("health_orchestrator_dns_updates_total") >= 3  # type: ignore[operator]


def test_all_nodes_down_publishes_every_node(rig: Rig) -> None:
    wait_for(lambda: rig.answer_is(API, rig.ips()), what="all three nodes answered")
    rig.nodes[1].stop()  # one down first: withdrawn
    wait_for(lambda: rig.answer_is(API, rig.ips("node-1", "node-3")), what="node-2 withdrawn")
    for node in rig.nodes:
        node.stop()
    metrics = rig.orchestrator.metrics
    wait_for(lambda: metrics.value("health_orchestrator_fail_open") == 1, what="fail open")
    wait_for(lambda: metrics.value("health_orchestrator_healthy_nodes") == 0, what="no healthy node")
    # every node of the pool is published (as Route53 and dns-operator answer), not the last set
    wait_for(lambda: rig.answer_is(API, rig.ips()), what="every node published")
    assert set(rig.orchestrator.published.ips) == rig.ips()
    lines = [line for line in (rig.out / "tenant-a.hosts").read_text().splitlines() if not line.startswith("#")]
    assert {line.split()[0] for line in lines} == rig.ips()
    assert rig.orchestrator.status()["fail_open"] is True
    rig.nodes[0].start()
    wait_for(lambda: metrics.value("health_orchestrator_fail_open") == 0, what="fail open ends")
    wait_for(lambda: rig.answer_is(API, rig.ips("node-1")), what="node-1 alone after recovery")


def test_a_tenant_added_in_the_desired_directory_appears_without_a_restart(rig: Rig) -> None:
    wait_for(lambda: rig.answer_is(API, rig.ips()), what="tenant-a served")
    assert rig.dnsmasq.answers("shop.tenant-b.test") == set()
    (rig.desired / "tenant-b.yaml").write_text(tenant_yaml("tenant-b", POOL, ["shop.tenant-b.test"]))
    wait_for(lambda: rig.answer_is("shop.tenant-b.test", rig.ips()), what="tenant-b served")
    assert (rig.out / "tenant-b.hosts").exists()
    server = (rig.out / "gitdns-edge.server").read_text()
    assert "shop.tenant-b.test:53 {" in server and "tenant-a.test:53 {" in server
    (rig.desired / "tenant-b.yaml").unlink()
    wait_for(lambda: not (rig.out / "tenant-b.hosts").exists(), what="tenant-b's file removed")
    wait_for(lambda: rig.dnsmasq.answers("shop.tenant-b.test") == set(), what="tenant-b gone from dnsmasq")


def test_an_invalid_revision_keeps_the_last_good_state(rig: Rig) -> None:
    wait_for(lambda: rig.answer_is(API, rig.ips()), what="tenant-a served")
    (rig.desired / "broken.yaml").write_text("kind: [unclosed\n")
    wait_for(lambda: any("held the last good" in n for n in rig.orchestrator.status()["notes"]), what="held")
    rig.nodes[2].stop()
    wait_for(lambda: rig.answer_is(API, rig.ips("node-1", "node-2")), what="health still acts on the held state")


def test_the_cli_serves_status_metrics_and_probes(tmp_path: Path) -> None:
    nodes = start_nodes(2, first=31)
    desired, out = tmp_path / "desired", tmp_path / "out"
    write_desired(desired, POOL, nodes, {"tenant-a": [API]}, interval=0.2, timeout=0.2)
    port, admin = free_port(), free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitdns.cli", "orchestrator", "--repo", str(desired), "--node-pool", POOL,
         "--out", str(out), "--listen", f"127.0.0.1:{port}", "--admin-listen", f"127.0.0.1:{admin}",
         "--state-dir", str(tmp_path / "state"), "--poll-interval", "0.2", "--probe-allow-ranges", "127.0.0.0/8"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def get(path: str, at: int = admin) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{at}{path}", timeout=2) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, ""
        except OSError:
            return 0, ""

    try:
        wait_for(lambda: get("/readyz")[0] == 200, what="ready")
        assert get("/healthz")[0] == 200
        status = json.loads(get("/status")[1])
        assert status["total_nodes"] == 2 and status["node_pool"] == POOL and status["last_check"]
        assert status["lease"]["held"] is True
        metrics = get("/metrics")[1]
        for name in ("health_orchestrator_healthy_nodes", "health_orchestrator_check_duration_seconds_bucket",
                     "health_orchestrator_dns_updates_total", "health_orchestrator_last_check_duration_seconds",
                     'health_orchestrator_node_status{node_ip="127.0.0.31",node_name="node-1"}'):
            assert name in metrics, name
        assert "gitdns_" not in metrics  # a registry of its own
        # the probe address serves the probes only: publishing it exposes no status or metrics
        assert get("/readyz", port)[0] == 200 and get("/healthz", port)[0] == 200
        assert get("/status", port)[0] == 404 and get("/metrics", port)[0] == 404
        state = tmp_path / "state"
        assert (out / "tenant-a.hosts").exists() and state.is_dir()
        assert (state / f"orchestrator-{POOL}.lock").exists()
        second = subprocess.run(
            [sys.executable, "-m", "gitdns.cli", "orchestrator", "--repo", str(desired), "--node-pool", POOL,
             "--out", str(out), "--listen", "", "--admin-listen", "", "--state-dir", str(state), "--once",
             "--probe-allow-ranges", "127.0.0.0/8"],
            capture_output=True, text=True, timeout=60)
        assert second.returncode != 0 and "locked" in second.stdout + second.stderr
    finally:
        proc.terminate()
        proc.wait(10)
        for node in nodes:
            node.stop()
