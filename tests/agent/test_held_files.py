"""Which files hold zones as they were (`AgentLoader._held`): only a file whose problem holds
something (a zone it names, or every zone).  A problem that holds nothing (a health-check
target the probe fence refuses: the target is withdrawn, fail open) leaves the revision's
changes to go out, as `validate` and `plan` say they will."""

from __future__ import annotations

import random
from pathlib import Path

from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent
from gitdns.agent.ports import AgentPorts
from gitdns.core.model import Zone
from gitdns.providers.base import Provider
from gitdns.providers.memory import MemoryProvider
from tests.agent.fakes import Clock, FakeSource

FILES = {
    "zone.yaml": "apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata: {name: example-com}\n"
                 "spec:\n  domain: example.com\n  provider: {type: local}\n",
    "cluster.yaml": "apiVersion: gitdns.io/v1alpha1\nkind: Cluster\nmetadata: {name: lo}\nspec:\n"
                    "  id: 2f0c4b8a-1d3e-4a5b-9c6d-7e8f9a0b1c2d\n  gateways:\n"
                    "    - name: app-gw\n      namespace: ingress\n"
                    "      addresses: [127.0.0.1]\n      listeners: [{hostname: app.example.com}]\n",
    "policy.yaml": "apiVersion: gitdns.io/v1alpha1\nkind: DNSPolicy\nmetadata: {name: app}\nspec:\n"
                   "  targetRef: {gateway: app-gw}\n",
}
REFUSED_PROBE = "  healthCheck: {protocol: HTTP, port: 8080, path: /healthz}\n"  # on loopback: the fence refuses it
EXTRA = ("apiVersion: gitdns.io/v1alpha1\nkind: RecordSet\nmetadata: {name: extra}\nspec:\n  zone: example-com\n"
         "  records:\n    - {name: www, type: CNAME, values: [app.example.com.]}\n")


def test_a_problem_that_holds_nothing_holds_no_zone_as_it_was(tmp_path: Path) -> None:
    source = FakeSource()
    provider = MemoryProvider()

    def factory(zone: Zone) -> Provider:
        return provider

    agent = Agent(AgentConfig(repo="mem://", cluster="lo", state_dir=str(tmp_path)),
                  AgentPorts(source=source, factory=factory, clock=Clock(), rng=random.Random(1)))
    source.commit(FILES, "c1")
    agent.run()
    with_problem = {**FILES, "policy.yaml": FILES["policy.yaml"] + REFUSED_PROBE}
    source.commit(with_problem, "c2")
    agent.run()
    assert agent.state.current is not None
    problems = agent.state.current.problems
    assert problems and all(not p.zones and not p.blocks_all for p in problems), problems
    source.commit({**with_problem, "records.yaml": EXTRA}, "c3")
    cycle = agent.run()
    assert not any(o.errors for o in cycle.outcomes), [o.errors for o in cycle.outcomes]
    names = {r.name for r in provider.read("example.com").records}
    assert "www.example.com" in names  # the static record went out: the policy's file holds nothing


def test_a_problem_whose_zones_cannot_be_read_holds_what_its_file_was(tmp_path: Path) -> None:
    """The agent's Cluster replaced by another whose gateway the policy does not name: the policy's
    problem (no cluster has its gateway) names no zone, since the gateway it names is nowhere; the
    zone its file touched at the applied revision is held, and this cluster's records stay (found
    by tests/fuzz: they were removed as a cluster's that left git)."""
    source = FakeSource()
    provider = MemoryProvider()
    agent = Agent(AgentConfig(repo="mem://", cluster="lo", state_dir=str(tmp_path)),
                  AgentPorts(source=source, factory=lambda zone: provider, clock=Clock(), rng=random.Random(1)))
    source.commit(FILES, "c1")
    agent.run()
    before = {r.key: r.values for r in provider.read("example.com").records}
    assert any(k.name == "app.example.com" for k in before)
    other = (FILES["cluster.yaml"].replace("name: lo", "name: other").replace("2f0c4b8a", "3f0c4b8a")
             .replace("app-gw", "api-gw"))
    source.commit({**FILES, "cluster.yaml": other}, "c2")
    agent.run()
    assert agent.state.current is not None
    assert [p.code for p in agent.state.current.problems] == ["UnknownReference"]
    assert {r.key: r.values for r in provider.read("example.com").records} == before
