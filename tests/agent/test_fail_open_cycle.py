"""Fail open through the agent cycle: agents that see every target of a host fail — in any
order — publish all of them and report AllTargetsUnhealthy; as targets recover, the ones
still down are withdrawn again.  Each agent's probes are scripted (what it has detected so
far), the zone is one shared memory store."""

from __future__ import annotations

import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent
from gitdns.agent.metrics import Metrics
from gitdns.agent.ports import AgentPorts
from gitdns.core.health.filter import HealthTarget, host_targets
from gitdns.core.model import Zone
from gitdns.core.records import RecordKey, RecordSet
from gitdns.providers.base import Provider
from gitdns.providers.memory import MemoryProvider
from tests.agent.fakes import Clock, FakeSource, example_files

APP = "app.example.org"  # simple: eu-west-1 192.0.2.20, us-east-1 203.0.113.20
API = "api.example.com"  # loadbalanced, three clusters
EU, US = "192.0.2.20", "203.0.113.20"


class Probes:
    """One agent's probes: the targets it was given, unhealthy once it has seen them fail."""

    def __init__(self) -> None:
        self.targets: list[HealthTarget] = []
        self.seen_down: set[str] = set()
        self.changed = False

    def set_targets(self, targets: list[HealthTarget]) -> None:
        self.targets = targets

    def unhealthy(self) -> frozenset[str]:
        return frozenset(t.target_id for t in self.targets if t.address in self.seen_down)

    def take_changed(self) -> bool:
        changed, self.changed = self.changed, False
        return changed

    def states(self) -> Mapping[str, Mapping[str, Any]]:
        return {t.target_id: {"state": "unhealthy" if t.address in self.seen_down else "healthy"}
                for t in self.targets if t.own}

    def detect(self, *down: str, up: tuple[str, ...] = ()) -> None:
        self.seen_down = (self.seen_down | set(down)) - set(up)
        self.changed = True


def _files(*, lb_check: bool = False) -> dict[str, str]:
    files = example_files()
    web = next(k for k, v in files.items() if "kind: DNSPolicy" in v and "strategy: simple" in v)
    files[web] = files[web].rstrip("\n") + "\n  healthCheck: {protocol: HTTP, port: 80, path: /healthz}\n"
    if not lb_check:
        api = next(k for k, v in files.items() if "kind: DNSPolicy" in v and "strategy: loadbalanced" in v)
        files[api] = files[api].split("  healthCheck:")[0] + "  excludeAddresses: [10.0.0.0/8]\n"
    return files


class Fleet:
    def __init__(self, tmp: Path, files: dict[str, str], names: tuple[str, ...] = ("eu-west-1", "us-east-1")) -> None:
        self.source = FakeSource()
        self.source.commit(files)
        self.providers: dict[str, MemoryProvider] = {}
        self.probes = {name: Probes() for name in names}
        self.agents = {name: self._agent(tmp, name) for name in names}

    def _agent(self, tmp: Path, name: str) -> Agent:
        def factory(zone: Zone) -> Provider:
            return self.providers.setdefault(zone.domain, MemoryProvider())

        return Agent(AgentConfig(repo="mem://", cluster=name, state_dir=str(tmp / name)),
                     AgentPorts(source=self.source, factory=factory, clock=Clock(), rng=random.Random(1),
                                probes=self.probes[name]))

    def run(self, *names: str) -> None:
        for name in names or tuple(self.agents):
            self.agents[name].run()

    def records(self, domain: str) -> dict[RecordKey, RecordSet]:
        return {r.key: r for r in self.providers[domain].read(domain).records}

    def app(self) -> set[str]:
        rec = self.records("example.org").get(RecordKey(APP, "A"))
        return set(rec.values) if rec is not None else set()

    def healthy(self, name: str) -> tuple[bool, str, str]:
        report = self.agents[name].last_report
        assert report is not None
        c = next(c for c in report.conditions if c.type == "Healthy")
        return c.status, c.reason, c.message

    def failing_open(self, name: str) -> dict[str, list[str]]:
        return {zone: r.fail_open for zone, r in self.agents[name].state.health_results.items() if r.fail_open}


def test_each_agent_probes_every_target_of_its_hosts_and_reports_only_its_own(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path, _files())
    fleet.run()
    eu = fleet.probes["eu-west-1"]
    assert {(t.target_id, t.own) for t in eu.targets} == {(f"{APP}|{EU}", True), (f"{APP}|{US}", False)}
    report = fleet.agents["eu-west-1"].last_report
    assert report is not None and set(report.health) == {f"{APP}|{EU}"}


def test_stopped_together_and_seen_in_opposite_orders_every_target_is_published(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path, _files())
    fleet.run()
    assert fleet.app() == {EU, US}
    eu, us = fleet.probes["eu-west-1"], fleet.probes["us-east-1"]
    eu.detect(EU)  # each agent sees its own target fail first
    us.detect(US)
    fleet.run("eu-west-1", "us-east-1")
    assert fleet.app(), "the host never loses every value"
    eu.detect(US)
    us.detect(EU)
    fleet.run("us-east-1", "eu-west-1")
    assert fleet.app() == {EU, US}
    for name in ("eu-west-1", "us-east-1"):
        status, reason, message = fleet.healthy(name)
        assert (status, reason) == (False, "AllTargetsUnhealthy") and APP in message
        assert fleet.failing_open(name) == {"example-org": [APP]}
    fleet.run()  # stable: nothing moves once both agree
    assert fleet.app() == {EU, US}


def test_stopped_in_sequence_the_survivor_is_not_the_last_detected(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path, _files())
    fleet.run()
    eu, us = fleet.probes["eu-west-1"], fleet.probes["us-east-1"]
    eu.detect(EU)
    us.detect(EU)
    fleet.run()
    assert fleet.app() == {US}
    assert fleet.healthy("eu-west-1")[1] == "TargetsWithdrawn"
    us.detect(US)
    fleet.run("us-east-1")
    assert fleet.app() == {US}  # eu-west-1's agent has not seen it yet: its own stays withdrawn
    eu.detect(US)
    fleet.run("eu-west-1")
    assert fleet.app() == {EU, US}  # eu-west-1 re-adds its own: every target is down
    fleet.run()
    assert fleet.app() == {EU, US}
    assert fleet.healthy("eu-west-1")[1] == fleet.healthy("us-east-1")[1] == "AllTargetsUnhealthy"

    # recovery, one at a time: the one still down is withdrawn again, by its own agent
    eu.detect(up=(EU,))
    us.detect(up=(EU,))
    fleet.run()
    assert fleet.app() == {EU}
    assert fleet.healthy("us-east-1")[1] == "TargetsWithdrawn"
    assert fleet.healthy("eu-west-1")[:2] == (True, "TargetsHealthy")
    assert fleet.failing_open("us-east-1") == {}
    eu.detect(up=(US,))
    us.detect(up=(US,))
    fleet.run()
    assert fleet.app() == {EU, US}
    assert fleet.healthy("us-east-1")[:2] == (True, "TargetsHealthy")


def test_an_agent_that_has_not_seen_the_other_recover_keeps_its_own(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path, _files())
    fleet.run()
    eu, us = fleet.probes["eu-west-1"], fleet.probes["us-east-1"]
    for probes in (eu, us):
        probes.detect(EU, US)
    fleet.run()
    assert fleet.app() == {EU, US}
    eu.detect(up=(EU,))  # eu-west-1's agent sees its own back; us-east-1's has not probed it yet
    fleet.run()
    assert fleet.app() == {EU, US}
    us.detect(up=(EU,))
    fleet.run()
    assert fleet.app() == {EU}


def test_loadbalanced_every_target_down_keeps_every_weight_and_reports_it(tmp_path: Path) -> None:
    names = ("eu-west-1", "eu-central-1", "us-east-1")
    fleet = Fleet(tmp_path, _files(lb_check=True), names)
    fleet.run()
    before = {k: r for k, r in fleet.records("example.com").items() if r.weight is not None}
    assert before and all(r.weight for r in before.values())
    addresses = {t.address for t in fleet.probes["eu-west-1"].targets if t.host == API}
    assert addresses == {"192.0.2.10", "192.0.2.11", "198.51.100.10", "203.0.113.10", "2001:db8::10"}
    fleet.probes["eu-west-1"].detect("192.0.2.10", "192.0.2.11")  # one cluster down: weight 0, as before
    fleet.run("eu-west-1")
    weights = {k.set_id: r.weight for k, r in fleet.records("example.com").items() if r.weight is not None}
    assert sorted(weights.values()) == [0, 120, 200]
    for name in names:
        fleet.probes[name].detect(*addresses)
    fleet.run()
    after = {k: r for k, r in fleet.records("example.com").items() if r.weight is not None}
    assert after == before  # every row back at its weight: no all-zero answer to lean on
    for name in names:
        assert fleet.healthy(name)[1] == "AllTargetsUnhealthy"
        assert fleet.failing_open(name) == {"example-com": [API]}


def test_the_metric_follows_the_zones_failing_open(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path, _files())
    fleet.run()
    for probes in fleet.probes.values():
        probes.detect(EU, US)
    fleet.run()
    metrics = Metrics()
    metrics.set_all_targets_unhealthy(fleet.failing_open("us-east-1"))
    labels = {"zone": "example-org", "host": APP}
    assert metrics.value("gitdns_health_all_targets_unhealthy", labels) == 1
    for probes in fleet.probes.values():
        probes.detect(up=(US,))
    fleet.run()
    metrics.set_all_targets_unhealthy(fleet.failing_open("us-east-1"))
    assert metrics.value("gitdns_health_all_targets_unhealthy", labels) is None


def test_clusters_of_a_group_git_marks_inactive_do_not_count(tmp_path: Path) -> None:
    files = _files()
    groups = next(k for k, v in files.items() if "kind: ActiveGroups" in v and "zone: example-org" in v)
    files[groups] = files[groups].replace("groups: [site-a, site-b]", "groups: [site-a]")
    fleet = Fleet(tmp_path, files)
    fleet.run("eu-west-1")
    desired = fleet.agents["eu-west-1"].state.current
    assert desired is not None
    cluster = desired.state.cluster(next(c.id for c in desired.state.clusters if c.name == "eu-west-1"))
    assert cluster is not None
    targets = host_targets(desired.state, cluster)
    assert [t.address for t in targets[APP].targets] == [EU]  # us-east-1 (site-b) publishes nothing there
