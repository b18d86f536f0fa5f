"""`gitdns failover simulate`: the merged zone after an active-groups switch (the site A /
site B story of Kuadrant's "DNS Failover" proposal)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from gitdns.cli import main
from gitdns.commands import EXIT_OK, failover
from gitdns.core.records import Action, Change
from gitdns.reconcile.engine import default_factory, load

ZONE_DOC = """\
apiVersion: gitdns.io/v1alpha1
kind: Zone
metadata: {name: example-com}
spec:
  domain: example.com
  provider: {type: local, settings: {path: .gitdns/zones}}
"""
POLICY_DOC = """\
apiVersion: gitdns.io/v1alpha1
kind: DNSPolicy
metadata: {name: api}
spec:
  targetRef: {gateway: api-gw}
  strategy: simple
"""
GROUPS_DOC = """\
# Which site serves example.com.
apiVersion: gitdns.io/v1alpha1
kind: ActiveGroups
metadata:
  name: example-com-groups
spec:
  zone: example-com
  serial: {serial}   # bumped on every change
  groups: [{groups}]
"""

# Site A and site B run the same workload (api.example.com); one cluster is ungrouped.
SITES = (
    ("a-1", "0a000000-0000-4000-8000-000000000001", "site-a", "192.0.2.1"),
    ("a-2", "0a000000-0000-4000-8000-000000000002", "site-a", "192.0.2.2"),
    ("b-1", "0b000000-0000-4000-8000-000000000001", "site-b", "198.51.100.1"),
    ("b-2", "0b000000-0000-4000-8000-000000000002", "site-b", "198.51.100.2"),
)
A_IPS = {"192.0.2.1", "192.0.2.2"}
B_IPS = {"198.51.100.1", "198.51.100.2"}


def cluster_doc(name: str, cid: str, group: str | None, ip: str, host: str = "api.example.com") -> str:
    group_line = f"  group: {group}\n" if group else ""
    return (f"apiVersion: gitdns.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\nspec:\n"
            f"  id: {cid}\n{group_line}  gateways:\n    - name: api-gw\n      namespace: ingress\n"
            f"      addresses: [{ip}]\n      listeners:\n        - hostname: {host}\n")


def write_repo(root: Path, clusters: Sequence[tuple[str, str, str | None, str]] = SITES,
               active: Sequence[str] = ("site-a",), serial: int = 1) -> Path:
    for rel, text in (("zones/example-com.yaml", ZONE_DOC), ("policies/api.yaml", POLICY_DOC),
                      ("groups/example-com.yaml",
                       GROUPS_DOC.format(serial=serial, groups=", ".join(active)))):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    (root / "clusters").mkdir(exist_ok=True)
    for name, cid, group, ip in clusters:
        (root / "clusters" / f"{name}.yaml").write_text(cluster_doc(name, cid, group, ip), encoding="utf-8")
    return root


def publish_current(root: Path) -> None:
    """Put the zone in the state the agents reach for git's current active groups."""
    desired = load(root)
    assert not desired.problems, [p.format() for p in desired.problems]
    zone = desired.state.zones[0]
    provider = default_factory(root)(zone)
    active, serial, _ = failover.effective_groups(desired, zone, None)
    now = provider.read(zone.domain)
    sim = failover.simulate_switch(desired, zone, now, active, serial=serial)
    old = now.by_key()
    changes = [Change(Action.CREATE if k not in old else Action.UPDATE, old.get(k), r, k)
               for k, r in sim.after.by_key().items() if old.get(k) != r]
    assert provider.apply(zone.domain, changes).ok


def values_at(switch: failover.Switch, name: str, rtype: str = "A") -> set[str]:
    return {v for r in switch.after.records if r.name == name and r.type == rtype for v in r.values}


@pytest.fixture
def story(tmp_path: Path) -> Path:
    root = write_repo(tmp_path / "repo")
    publish_current(root)
    return root


def switch_to(root: Path, *target: str) -> failover.Switch:
    desired = load(root)
    zone = desired.state.zones[0]
    now = default_factory(root)(zone).read(zone.domain)
    return failover.simulate_switch(desired, zone, now, target)


def test_site_a_serves_before_the_switch(story: Path) -> None:
    sim = switch_to(story, "site-a")
    assert values_at(sim, "api.example.com") == A_IPS
    assert sim.diff.empty


def test_switching_to_site_b_removes_every_a_endpoint_and_adds_every_b_endpoint(story: Path) -> None:
    sim = switch_to(story, "site-b")
    assert {e.value for e in sim.diff.removed} == A_IPS
    assert {e.value for e in sim.diff.added} == B_IPS
    assert values_at(sim, "api.example.com") == B_IPS
    assert set(sim.silent) == {"a-1", "a-2"} and set(sim.publishing) == {"b-1", "b-2"}
    # the switch is reviewed: exempt from the mass-change guard, and stated as an authority
    assert all(not p.stalled for _, p in sim.plans)
    assert any(p.authority.value == "inactive-groups" for _, p in sim.plans)
    # no ownership TXT of site A is left behind
    owners = " ".join(v for r in sim.after.records if r.type == "TXT" for v in r.values)
    assert "0a000000" not in owners and "0b000000" in owners
    # the TXT mirror carries the new groups with a higher serial
    assert {v for r in sim.after.records if r.name == "gitdns-active-groups.example.com" for v in r.values} == {
        "version=1;serial=2;groups=site-b"}


def test_switching_back_reverses_it(story: Path) -> None:
    to_b = switch_to(story, "site-b")
    provider = default_factory(story)(load(story).state.zones[0])
    old, new = to_b.before.by_key(), to_b.after.by_key()
    changes = [Change(Action.DELETE, r, None, k) for k, r in old.items() if k not in new]
    changes += [Change(Action.CREATE if k not in old else Action.UPDATE, old.get(k), r, k)
                for k, r in new.items() if old.get(k) != r]
    assert provider.apply("example.com", changes).ok
    write_repo(story, active=("site-b",), serial=2)
    back = switch_to(story, "site-a")
    assert {e.value for e in back.diff.removed} == B_IPS
    assert {e.value for e in back.diff.added} == A_IPS
    assert values_at(back, "api.example.com") == A_IPS


def test_ungrouped_clusters_keep_publishing(tmp_path: Path) -> None:
    root = write_repo(tmp_path / "repo",
                      clusters=(*SITES, ("shared", "0c000000-0000-4000-8000-000000000001", None, "203.0.113.9")))
    publish_current(root)
    sim = switch_to(root, "site-b")
    assert values_at(sim, "api.example.com") == B_IPS | {"203.0.113.9"}
    assert "shared" in sim.publishing


def test_group_membership_is_exact(tmp_path: Path) -> None:
    clusters = (("east-1", "0e000000-0000-4000-8000-000000000001", "east", "192.0.2.50"),
                ("us-east-1", "0e000000-0000-4000-8000-000000000002", "us-east", "192.0.2.60"))
    root = write_repo(tmp_path / "repo", clusters=clusters, active=("east", "us-east"))
    publish_current(root)
    only_us_east = switch_to(root, "us-east")
    assert values_at(only_us_east, "api.example.com") == {"192.0.2.60"}
    assert [e.value for e in only_us_east.diff.removed] == ["192.0.2.50"]
    assert only_us_east.silent == ("east-1",)
    only_east = switch_to(root, "east")
    assert values_at(only_east, "api.example.com") == {"192.0.2.50"}
    assert only_east.silent == ("us-east-1",)


def test_empty_target_means_every_group(story: Path) -> None:
    sim = switch_to(story)
    assert values_at(sim, "api.example.com") == A_IPS | B_IPS
    assert not sim.diff.removed and {e.value for e in sim.diff.added} == B_IPS


def test_cli_text_and_markdown(story: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["failover", "simulate", "example.com", "--to", "site-b", "--repo", str(story)]) == EXIT_OK
    out = capsys.readouterr().out
    assert "site-a -> site-b" in out and "endpoints added: 2, removed: 2" in out
    assert "- api.example.com A 192.0.2.1" in out and "+ api.example.com A 198.51.100.1" in out
    assert "zone after the switch:" in out
    assert main(["failover", "simulate", "example-com", "--to", "site-b", "--repo", str(story),
                 "--format", "markdown"]) == EXIT_OK
    md = capsys.readouterr().out
    assert md.startswith("## Failover of example.com") and "```diff" in md and "<details>" in md


def test_unreadable_zone_compares_with_the_desired_state(tmp_path: Path) -> None:
    root = write_repo(tmp_path / "repo")  # nothing published: the store is empty but readable
    desired = load(root)
    zone = desired.state.zones[0]
    now, note = failover.current_zone(desired, zone, None)
    assert note and {v for r in now.records if r.name == "api.example.com" for v in r.values} == A_IPS
    sim = failover.simulate_switch(desired, zone, now, ("site-b",), notes=[note])
    assert {e.value for e in sim.diff.removed} == A_IPS and sim.notes == (note,)
