"""A `flattened` loadbalanced policy: the plan says that geo and weights are ignored.

docs/providers/rfc2136.md promises it ("a policy with `flattened: true` gives one multi-value
A/AAAA of every healthy target, and the plan says that geo and weights are ignored"), and so
does docs/records.md.  The note comes from the builder (`builder.notes_for_zone`) and is on
every plan of the cluster in the zone: `gitdns plan` (one cluster and every cluster),
`gitdns apply`, and the agent's own plan — here on an rfc2136 zone, through the rfc2136
provider over the in-memory RFC 2136 server of the provider's unit tests.
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

from gitdns.core import builder
from gitdns.core.model import (
    Cluster,
    DesiredState,
    DNSPolicy,
    Gateway,
    Listener,
    ProviderRef,
    Strategy,
    TargetRef,
    Zone,
)
from gitdns.core.plan.values import Authority, Plan, annotated

ZONE = Zone(name="example-test", domain="example.test", provider=ProviderRef("rfc2136", (("server", "127.0.0.1"),)))
HOST = "www.example.test"
FLAT = DNSPolicy("web", TargetRef(gateway="gw"), Strategy.LOADBALANCED, flattened=True, default_weight=120,
                 default_geo="GEO-EU")
NOTE = (f"{HOST}: DNSPolicy web is loadbalanced with flattened: true: one multi-value A/AAAA of every healthy "
        "target; geo and weights are ignored (this cluster: geo {geo}, weight {weight})")


def cluster(name: str, ip: str, geo: str | None) -> Cluster:
    return Cluster(name=name, id=f"{name}-uid", geo=geo,
                   gateways=(Gateway("gw", "ingress", (ip,), (Listener(HOST),)),))


def test_the_builder_notes_a_flattened_host() -> None:
    eu, us = cluster("eu", "192.0.2.1", "GEO-EU"), cluster("us", "192.0.2.2", None)
    state = DesiredState(zones=(ZONE,), clusters=(eu, us), policies=(FLAT,))
    assert builder.notes_for_zone(state, eu, ZONE) == (NOTE.format(geo="GEO-EU", weight=120),)
    assert builder.notes_for_zone(state, us, ZONE) == (NOTE.format(geo="-", weight=120),)
    assert [(r.name, r.type, r.values) for r in builder.desired_for_zone(state, eu, ZONE)] == [
        (HOST, "A", ("192.0.2.1",))]


def test_no_note_for_a_simple_or_routed_policy() -> None:
    eu = cluster("eu", "192.0.2.1", "GEO-EU")
    for policy in (dataclasses.replace(FLAT, strategy=Strategy.SIMPLE, flattened=False),
                   dataclasses.replace(FLAT, flattened=False)):
        state = DesiredState(zones=(ZONE,), clusters=(eu,), policies=(policy,))
        assert builder.notes_for_zone(state, eu, ZONE) == ()


def test_annotated_adds_each_note_once_after_the_plans_own() -> None:
    plan = Plan(zone="example.test", owner="o", authority=Authority.OWN, notes=("own",))
    again = annotated(annotated(plan, ["b", "a", "b"]), ["a", "own"])
    assert again.notes == ("own", "b", "a")
    assert annotated(plan, []) is plan


# --- the commands: plan (one cluster, every cluster) and apply ---------------------------------

def write_repo(root: Path, provider: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "zone.yaml").write_text(
        "apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata: {name: example-test}\n"
        f"spec:\n  domain: example.test\n  provider: {provider}\n")
    (root / "policy.yaml").write_text(
        "apiVersion: gitdns.io/v1alpha1\nkind: DNSPolicy\nmetadata: {name: web}\n"
        "spec:\n  targetRef: {gateway: gw, namespace: ingress}\n  strategy: loadbalanced\n  flattened: true\n"
        "  loadBalancing:\n    weighted: {defaultWeight: 120}\n    geo: {defaultGeo: GEO-EU}\n")
    for name, ip, geo in (("eu", "192.0.2.1", "GEO-EU"), ("us", "192.0.2.2", "US")):
        (root / f"{name}.yaml").write_text(
            f"apiVersion: gitdns.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\n"
            f"spec:\n  id: {name}-uid\n  geo: {geo}\n  gateways:\n    - name: gw\n      namespace: ingress\n"
            f"      addresses: [{ip}]\n      listeners:\n        - hostname: {HOST}\n")
    return root


LOCAL = "{type: local, settings: {path: zones}}"


def test_plan_for_one_cluster_shows_the_note(tmp_path: Path) -> None:
    from gitdns.commands.plan.command import plan

    result = plan(write_repo(tmp_path / "repo", LOCAL), cluster="eu")
    assert result.code == 0, result.err
    assert f"  note: {NOTE.format(geo='GEO-EU', weight=120)}" in "".join(result.out).splitlines()


def test_plan_for_every_cluster_shows_each_clusters_note(tmp_path: Path) -> None:
    from gitdns.commands.plan.command import plan

    result = plan(write_repo(tmp_path / "repo", LOCAL), all_clusters=True, fmt="json")
    assert result.code == 0, result.err
    [zone] = json.loads("".join(result.out))["zones"]
    notes = {p["cluster"]: p["notes"] for p in zone["plans"]}
    assert notes == {"eu": [NOTE.format(geo="GEO-EU", weight=120)], "us": [NOTE.format(geo="US", weight=120)]}


def test_apply_shows_the_note(tmp_path: Path) -> None:
    from gitdns.commands.apply import apply

    result = apply(write_repo(tmp_path / "repo", LOCAL), cluster="us")
    assert result.code == 0, result.err
    assert f"  note: {NOTE.format(geo='US', weight=120)}" in "\n".join(result.out).splitlines()


# --- the agent, on an rfc2136 zone --------------------------------------------------------------

def test_the_agents_plan_on_an_rfc2136_zone_carries_the_note(tmp_path: Path) -> None:
    from gitdns.agent.config import AgentConfig
    from gitdns.agent.cycle import Agent
    from gitdns.agent.ports import AgentPorts
    from gitdns.providers.base import Provider
    from gitdns.providers.rfc2136.provider import Rfc2136Provider
    from tests.agent.fakes import Clock, FakeSource
    from tests.providers.test_rfc2136_unit import FakeServer

    root = write_repo(tmp_path / "repo", "{type: rfc2136, settings: {server: 127.0.0.1}}")
    source = FakeSource()
    source.commit({p.name: p.read_text() for p in sorted(root.glob("*.yaml"))}, "flattened on rfc2136")
    server = FakeServer("example.test")

    def factory(zone: Zone) -> Provider:
        return Rfc2136Provider(zone.domain, server)

    agents = {name: Agent(AgentConfig(repo="mem://", cluster=name, state_dir=str(tmp_path / name)),
                          AgentPorts(source=source, factory=factory, clock=Clock(), rng=random.Random(1)))
              for name in ("eu", "us")}
    for name, agent in agents.items():
        cycle = agent.run()
        [outcome] = cycle.outcomes
        assert outcome.errors == [] and outcome.plan is not None
        geo = "GEO-EU" if name == "eu" else "US"
        assert NOTE.format(geo=geo, weight=120) in outcome.plan.notes
        # and the status branch's zone document says it (what `gitdns status` and auditors read)
        from gitdns.core.status.report import zone_document

        report = agent.last_report
        assert report is not None
        [zone_report] = report.zones
        assert NOTE.format(geo=geo, weight=120) in zone_document(zone_report)["notes"]
        # and `gitdns agent --once` prints it, once
        from gitdns.commands.daemons import once_report

        printed = "".join(once_report(cycle, report).out).splitlines()
        notes = [line for line in printed if line.endswith(NOTE.format(geo=geo, weight=120))]
        assert notes == [f"zone {zone_report.zone}: note: {NOTE.format(geo=geo, weight=120)}"], printed
    published = {str(n).rstrip("."): sorted(r.to_text() for r in rdatas)
                 for (n, t), (_, rdatas) in server.rrsets.items() if str(n).startswith("www.")}
    assert published == {HOST: ["192.0.2.1", "192.0.2.2"]}  # one multi-value A: no geo, no weights
