"""Fail open end to end: two clusters behind one simple host on a real BIND zone (rfc2136), each
a real `gitdns agent` process probing real HTTP health servers on 127.0.0.21 and 127.0.0.22.

Health servers are stopped in sequence (both orders) and together, and brought back one at a
time; after every step the test asks BIND what it answers for the host.  When both are down the
zone answers with both addresses, whichever failure each agent saw first, and both agents report
``Healthy`` False ``AllTargetsUnhealthy``; as a server comes back, the other address — still
down — is withdrawn again.  Every wait is bounded; no test asserts how long anything took.
Without ``named`` the test skips, except under ``CI=true`` where it fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e import dns_servers
from tests.e2e.agent_kit import AgentProcess, DesiredRepo
from tests.e2e.dns_servers import DnsServer
from tests.e2e.orchestrator_kit import NodeServer, free_port

ZONE = dns_servers.ZONE
APP = f"app.{ZONE}"
ADDRESSES = {"c1": "127.0.0.21", "c2": "127.0.0.22"}


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


def policy_doc(port: int) -> str:
    return f"""apiVersion: gitdns.io/v1alpha1
kind: DNSPolicy
metadata: {{name: app}}
spec:
  targetRef: {{gateway: gw, namespace: ingress}}
  strategy: simple
  ttl: {{simple: 5}}
  healthCheck: {{protocol: HTTP, port: {port}, path: /healthz/ready, interval: 0.3, timeout: 0.3,
                 failureThreshold: 2, successThreshold: 1}}
"""


def cluster_doc(name: str, address: str) -> str:
    return f"""apiVersion: gitdns.io/v1alpha1
kind: Cluster
metadata: {{name: {name}}}
spec:
  id: id-{name}
  gateways:
    - name: gw
      namespace: ingress
      addresses: [{address}]
      listeners:
        - hostname: {APP}
"""


class Rig:
    def __init__(self, tmp: Path, bind: DnsServer) -> None:
        self.tmp = tmp
        self.bind = bind
        port = free_port("127.0.0.21")
        self.servers = {name: NodeServer(name, ip, port).start() for name, ip in ADDRESSES.items()}
        secret = tmp / "credentials" / "tsig.env"
        secret.parent.mkdir()
        secret.write_text(f"TSIG_SECRET={dns_servers.SECRET}\n")
        self.repo = DesiredRepo(tmp / "repo")
        for sub in ("zones", "clusters", "policies", "groups", "records", "tenants"):
            for old in (self.repo.work / sub).glob("*.yaml"):
                old.unlink()
        self.repo.write("zones/example-test.yaml", zone_doc(bind.port, secret))
        self.repo.write("policies/app.yaml", policy_doc(port))
        for name, address in ADDRESSES.items():
            self.repo.write(f"clusters/{name}.yaml", cluster_doc(name, address))
        self.repo.commit("two clusters behind one simple host, health-checked")
        extra = ["--poll-interval", "1", "--validate-delay", "1", "--rfc2136-servers",
                 f"127.0.0.1:{bind.port}", "--credentials-dir", str(secret.parent)]
        self.agents = {name: AgentProcess(self.repo, name, tmp / f"state-{name}", *extra) for name in ADDRESSES}

    def answers(self) -> set[str]:
        return set(self.bind.query(APP, "A"))

    def healthy(self, name: str) -> tuple[str, str]:
        summary = self.agents[name].status().get("summary.yaml")
        if not isinstance(summary, dict):
            return "", ""
        found = [c for c in summary.get("conditions", []) if c.get("type") == "Healthy"]
        return (found[0]["status"], found[0]["reason"]) if found else ("", "")

    def wait_for(self, check: Callable[[], bool], what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            for agent in self.agents.values():
                if agent.proc.poll() is not None:
                    raise AssertionError(f"agent exited {agent.proc.returncode}: {agent.log.read_text()[-3000:]}")
            time.sleep(0.1)
        logs = "\n".join(f"--- {n}\n{a.log.read_text()[-2500:]}" for n, a in self.agents.items())
        raise AssertionError(f"timed out waiting for {what}; BIND answers {sorted(self.answers())}; "
                             f"Healthy: {[self.healthy(n) for n in self.agents]}\n{logs}")

    def expect(self, addresses: set[str], what: str, **conditions: str) -> None:
        """Wait until BIND answers exactly ``addresses`` and each agent named reports that
        Healthy reason; then check that the answer holds while the agents keep running."""
        self.wait_for(lambda: self.answers() == addresses
                      and all(self.healthy(n)[1] == reason for n, reason in conditions.items()), what)
        for _ in range(10):  # several probe rounds and agent passes later it is still the answer
            time.sleep(0.2)
            assert self.answers() == addresses, f"{what}: the answer moved to {sorted(self.answers())}"

    def stop(self, *names: str) -> None:
        for name in names:
            self.servers[name].stop()

    def start(self, *names: str) -> None:
        for name in names:
            self.servers[name].start()

    def close(self) -> None:
        for agent in self.agents.values():
            agent.stop()
        for server in self.servers.values():
            server.stop()


@pytest.fixture
def rig(tmp_path: Path, bind: DnsServer) -> Iterator[Rig]:
    r = Rig(tmp_path, bind)
    try:
        yield r
    finally:
        r.close()


BOTH = set(ADDRESSES.values())
C1, C2 = ADDRESSES["c1"], ADDRESSES["c2"]
ALL_DOWN = {"c1": "AllTargetsUnhealthy", "c2": "AllTargetsUnhealthy"}


def test_every_target_down_publishes_both_in_any_order_and_recovery_withdraws_again(rig: Rig) -> None:
    rig.expect(BOTH, "both published", c1="TargetsHealthy", c2="TargetsHealthy")
    for name, agent in rig.agents.items():  # each reports its own target only
        health = agent.status().get("health.yaml")
        assert isinstance(health, dict) and set(health["targets"]) == {f"{APP}|{ADDRESSES[name]}"}

    # in sequence, c1 first: c1 is withdrawn; then c2 goes too and both are published again
    rig.stop("c1")
    rig.expect({C2}, "c1 withdrawn", c1="TargetsWithdrawn", c2="TargetsHealthy")
    rig.stop("c2")
    rig.expect(BOTH, "both published: every target down", **ALL_DOWN)
    for name, agent in rig.agents.items():  # the metric the agent alert reads
        series = f'gitdns_health_all_targets_unhealthy{{host="{APP}",zone="'
        rig.wait_for(lambda a=agent, s=series: any(line.startswith(s) and line.endswith(" 1.0")
                                                   for line in a.get("/metrics")[1].decode().splitlines()),
                     f"{name}: gitdns_health_all_targets_unhealthy for {APP}")

    # recovery one at a time: the one still down is withdrawn again
    rig.start("c1")
    rig.expect({C1}, "c1 back, c2 withdrawn", c1="TargetsHealthy", c2="TargetsWithdrawn")
    assert not any(line.startswith("gitdns_health_all_targets_unhealthy{")  # the series goes with the state
                   for line in rig.agents["c1"].get("/metrics")[1].decode().splitlines())
    rig.start("c2")
    rig.expect(BOTH, "both back", c1="TargetsHealthy", c2="TargetsHealthy")

    # together: each agent may see either failure first; both addresses end published
    rig.stop("c1", "c2")
    rig.expect(BOTH, "both published after stopping together", **ALL_DOWN)
    rig.start("c2")
    rig.expect({C2}, "c2 back, c1 withdrawn", c1="TargetsWithdrawn", c2="TargetsHealthy")

    # in sequence, the other order: the survivor is never the last one detected
    rig.stop("c2")
    rig.expect(BOTH, "both published: c2 down while c1 still down", **ALL_DOWN)
    rig.start("c1", "c2")
    rig.expect(BOTH, "both back", c1="TargetsHealthy", c2="TargetsHealthy")
    rig.stop("c2")
    rig.expect({C1}, "c2 withdrawn", c1="TargetsHealthy", c2="TargetsWithdrawn")
    rig.stop("c1")
    rig.expect(BOTH, "both published: c1 down last", **ALL_DOWN)
