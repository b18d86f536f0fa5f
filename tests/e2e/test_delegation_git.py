"""Delegation through git (Kuadrant's Cluster Aware DNSRecord Delegation RFC) end to end: two
primaries and two remotes, each a real `gitdns agent` process, one real BIND zone, one bare git
repository with the status branches.

Remotes hold no provider credentials (their Zone's credentials file does not even exist for
them: only primaries are given it).  Without ``named`` the test skips, except under ``CI=true``
where it fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.agent.delegation_kit import POLICY, cluster_doc
from tests.e2e import dns_servers
from tests.e2e.agent_kit import AgentProcess, DesiredRepo, git
from tests.e2e.dns_servers import DnsServer

ZONE = dns_servers.ZONE
APP = f"app.{ZONE}"
SOLO = f"solo1.{ZONE}"
POLL = "1"


@pytest.fixture
def bind(tmp_path: Path) -> Iterator[DnsServer]:
    with dns_servers.bind_server(tmp_path / "bind") as server:
        yield server


def zone_doc(port: int, secret: Path) -> str:
    return f"""apiVersion: gitdns.io/v1alpha1
kind: Zone
metadata: {{name: example-test}}
spec:
  domain: {ZONE}
  provider:
    type: rfc2136
    settings: {{server: 127.0.0.1, port: "{port}", tsigKeyName: {dns_servers.KEY_NAME}, timeout: "5"}}
    credentials: {{file: {secret}}}
"""


class Fleet:
    def __init__(self, tmp: Path, bind: DnsServer) -> None:
        self.tmp = tmp
        self.bind = bind
        self.secret = tmp / "primary-only" / "tsig.env"
        self.secret.parent.mkdir()
        self.secret.write_text(f"TSIG_SECRET={dns_servers.SECRET}\n")
        self.repo = DesiredRepo(tmp / "repo")
        for path in (self.repo.work / "zones", self.repo.work / "clusters", self.repo.work / "policies",
                     self.repo.work / "groups", self.repo.work / "records", self.repo.work / "tenants"):
            for old in path.glob("*.yaml"):
                old.unlink()
        self.repo.write("zones/example-test.yaml", zone_doc(bind.port, self.secret))
        self.repo.write("policies/app.yaml", POLICY % {"name": "app", "gateway": "gw", "strategy": "simple"})
        self.repo.write("clusters/p1.yaml", cluster_doc("p1", "primary"))
        self.repo.write("clusters/p2.yaml", cluster_doc("p2", "primary"))
        self.repo.write("clusters/r1.yaml", cluster_doc("r1", "remote", ["10.0.0.1"], (APP, SOLO)))
        self.repo.write("clusters/r2.yaml", cluster_doc("r2", "remote", ["10.0.0.2"], (APP,)))
        self.repo.commit("two primaries, two remotes")
        self.agents: dict[str, AgentProcess] = {}

    def start(self, name: str) -> AgentProcess:
        extra = ["--poll-interval", POLL, "--validate-delay", "1"]
        if name.startswith("p"):
            extra += ["--stale-after", "4"]
        extra += ["--rfc2136-servers", f"127.0.0.1:{self.bind.port}", "--credentials-dir", str(self.secret.parent)]
        agent = AgentProcess(self.repo, name, self.tmp / f"state-{name}", *extra)
        self.agents[name] = agent
        return agent

    def answers(self, name: str) -> list[str]:
        return self.bind.query(name, "A")

    def wait_for(self, check: Callable[[], bool], what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            for agent in self.agents.values():
                if agent.proc.poll() is not None and agent.proc.returncode not in (0, -15):
                    raise AssertionError(f"agent exited: {agent.log.read_text()[-3000:]}")
            time.sleep(0.2)
        logs = "\n".join(f"--- {n}\n{a.log.read_text()[-2500:]}" for n, a in self.agents.items())
        raise AssertionError(f"timed out waiting for {what}; zone: {self.bind.rrsets()}\n{logs}")

    def stop_all(self) -> None:
        for agent in self.agents.values():
            agent.stop()


@pytest.fixture
def fleet(tmp_path: Path, bind: DnsServer) -> Iterator[Fleet]:
    f = Fleet(tmp_path, bind)
    try:
        yield f
    finally:
        f.stop_all()


def forge_status(fleet: Fleet, cluster_id: str) -> None:
    """Push a status commit claiming a host and an address r2's Cluster does not have."""
    work = fleet.tmp / "forge"
    git("clone", "-q", "-b", f"gitdns-status/{cluster_id}", str(fleet.repo.bare), str(work))
    path = work / "zones" / f"{ZONE}.yaml"
    text = path.read_text()
    assert "endpoints:\n" in text
    path.write_text(text.replace("endpoints:\n", f"endpoints:\n  - name: evil.{ZONE}\n    ttl: 60\n    type: A\n"
                                 "    values:\n      - 6.6.6.6\n", 1))
    git("-c", "user.name=x", "-c", "user.email=x@example.com", "commit", "-qam", "forged", cwd=work)
    git("push", "-q", "origin", f"HEAD:refs/heads/gitdns-status/{cluster_id}", cwd=work)


def test_two_primaries_two_remotes_on_one_bind_zone(fleet: Fleet) -> None:
    for name in ("r1", "r2", "p1", "p2"):
        fleet.start(name)
    fleet.wait_for(lambda: fleet.answers(APP) == ["10.0.0.1", "10.0.0.2"] and fleet.answers(SOLO) == ["10.0.0.1"],
                   "the merged records")

    # a remote claiming a host outside its Cluster: refused, the rest stays merged
    fleet.agents["r2"].stop()
    forge_status(fleet, "id-r2")
    fleet.wait_for(lambda: "RemoteRecordsRefused" in str(fleet.agents["p1"].status()), "the refusal")
    assert fleet.answers(f"evil.{ZONE}") == []
    assert fleet.answers(APP) == ["10.0.0.1", "10.0.0.2"]

    # r2 stays silent: it goes stale and its value leaves; r1's values stay
    fleet.wait_for(lambda: fleet.answers(APP) == ["10.0.0.1"], "r2 withdrawn as stale")
    assert fleet.answers(SOLO) == ["10.0.0.1"]
    # p1 may withdraw it first (and, as p2's peer, p2's claim too): p2 says so on its next poll
    fleet.wait_for(lambda: "RemotesStale" in str(fleet.agents["p2"].status()), "p2 reporting r2 stale")

    # one primary stopped: the other keeps the zone right (r2 back, then r1 removed from git)
    fleet.agents["p1"].stop()
    fleet.start("r2")
    fleet.wait_for(lambda: fleet.answers(APP) == ["10.0.0.1", "10.0.0.2"], "r2 back through p2 alone")
    (fleet.repo.work / "clusters" / "r1.yaml").unlink()
    fleet.repo.commit("remove r1")
    fleet.wait_for(lambda: fleet.answers(APP) == ["10.0.0.2"] and fleet.answers(SOLO) == [],
                   "r1's values gone, r2's kept")
    owners = [txt for name, kind in fleet.bind.rrsets() if kind == "TXT"
              for txt in fleet.bind.query(name, "TXT")]
    assert not any("id-r1" in t or "id-r2" in t for t in owners), owners  # remotes never own anything
