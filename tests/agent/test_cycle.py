"""The agent cycle with an in-memory git source, the memory provider and a fake clock."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent
from gitdns.agent.ports import AgentPorts
from gitdns.core.model import Zone
from gitdns.core.records import Action, Change, RecordKey, RecordSet
from gitdns.errors import UnreachableError
from gitdns.providers.base import Provider
from gitdns.providers.memory import MemoryProvider
from tests.agent.fakes import Clock, FakeSource, example_files

CLUSTER = "eu-west-1"


class CountingProvider(MemoryProvider):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.log: list[tuple[str, tuple[str, ...] | None]] = []  # ("read" | "apply", names read)

    def read(self, zone, names=None):  # type: ignore[no-untyped-def,override]
        self.calls += 1
        self.log.append(("read", tuple(sorted(names)) if names is not None else None))
        return super().read(zone, names)

    def apply(self, zone, changes, guards=()):  # type: ignore[no-untyped-def,override]
        self.calls += 1
        self.log.append(("apply", None))
        return super().apply(zone, changes, guards)


@pytest.fixture
def world(tmp_path: Path) -> tuple[FakeSource, dict[str, CountingProvider], Clock]:
    source = FakeSource()
    source.commit(example_files(), "initial")
    return source, {}, Clock()


def make_agent(world: tuple[FakeSource, dict[str, CountingProvider], Clock], tmp_path: Path,
               cluster: str = CLUSTER, **config: object) -> Agent:
    source, providers, clock = world

    def factory(zone: Zone) -> Provider:
        return providers.setdefault(zone.domain, CountingProvider())

    cfg = AgentConfig(repo="mem://", cluster=cluster, state_dir=str(tmp_path), **config)  # type: ignore[arg-type]
    return Agent(cfg, AgentPorts(source=source, factory=factory, clock=clock, rng=random.Random(1)))


def data(provider: MemoryProvider, zone: str = "example.com") -> dict[RecordKey, tuple[str, ...]]:
    return {r.key: r.values for r in provider.read(zone).records if not r.name.startswith("kuadrant-")}


def test_first_cycle_applies_and_reports_ready(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    agent = make_agent(world, tmp_path)
    agent.run()
    source, providers, _ = world
    assert RecordKey("api.example.com", "CNAME") in data(providers["example.com"])
    assert agent.state.applied_sha == source.head
    report = agent.last_report
    assert report is not None and report.ready, report.conditions


def test_idle_poll_reads_only_the_active_groups_records(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """An idle poll writes nothing and reads only the two active-groups TXT of each zone with
    groups (so a break-glass switch in the zone is followed within a poll interval)."""
    from gitdns.core.groups import gitdns_name, kuadrant_name

    agent = make_agent(world, tmp_path)
    agent.run()
    _, providers, _ = world
    before = {zone: len(p.log) for zone, p in providers.items()}
    agent.run()
    after = {zone: p.log[before[zone]:] for zone, p in providers.items()}
    grouped = {zone for zone, g in agent.state.group_results.items() if g}
    assert grouped, "the example has a zone with active groups"
    for zone, calls in after.items():
        expected = [("read", tuple(sorted([gitdns_name(zone), kuadrant_name(zone)])))] if zone in grouped else []
        assert calls == expected, zone


def test_validation_ramps_and_reapplies_missing_records(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    agent = make_agent(world, tmp_path)
    agent.run()
    _, providers, clock = world
    track = next(t for t in agent.state.tracks.values() if t.last and t.last.zone.domain == "example.com")
    first = track.next_validation
    assert first is not None and 1005.0 <= first <= 1010.0  # 5 s + up to 5 s jitter
    clock.now = 1010.0
    agent.validate()
    second = track.next_validation
    assert second is not None and second - clock.now >= 10  # success: the interval ramps up
    # someone deletes our record: the next validation re-applies it
    prov = providers["example.com"]
    rec = next(r for r in prov.read("example.com").records if r.name == "api.example.com")
    prov.apply("example.com", [Change(Action.DELETE, rec, None, rec.key)])
    clock.now = second
    assert agent.validate() == 1
    assert RecordKey("api.example.com", "CNAME") in data(prov)


def test_invalid_commit_holds_only_its_zone(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    source, providers, _ = world
    agent = make_agent(world, tmp_path)
    agent.run()
    files = example_files()
    lb = next(k for k, v in files.items() if "loadbalanced" in v and "DNSPolicy" in v)
    files[lb] = files[lb].replace("defaultWeight: 120", "defaultWeight: -1")
    org = next(k for k, v in files.items() if "kind: Zone" in v and "example.org" in v)
    files[org] = files[org].replace("ttl:", "ttl:", 1)
    before_com = data(providers["example.com"])
    source.commit(files, "break the loadbalanced policy")
    agent.run()
    assert data(providers["example.com"]) == before_com
    report = agent.last_report
    assert report is not None and not report.ready
    held = [z for z in report.zones if z.held]
    assert [z.zone for z in held] == ["example.com"]
    assert any(lb in p for p in held[0].problems)


def test_restarted_on_an_invalid_commit_reports_the_last_good_revision(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    source, _, _ = world
    first = make_agent(world, tmp_path)
    first.run()
    good = source.head
    files = example_files()
    lb = next(k for k, v in files.items() if "loadbalanced" in v and "DNSPolicy" in v)
    files[lb] = files[lb].replace("defaultWeight: 120", "defaultWeight: -1")
    source.commit(files, "break the loadbalanced policy")
    restarted = make_agent(world, tmp_path)  # a new process (agent --once), the same state directory
    restarted.run()
    report = restarted.last_report
    assert report is not None
    held = next(z for z in report.zones if z.held)
    # it was "appliedRevision: null": gitdns status showed LAST GOOD unknown
    assert held.applied_revision == source.revision_at(good).label
    assert held.owned  # the records it holds at that revision


def test_unreachable_remote_keeps_the_zone_and_reports(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    source, providers, clock = world
    agent = make_agent(world, tmp_path)
    agent.run()
    before = data(providers["example.com"])
    source.up = False
    agent.run()  # the last good revision stays in force: no exception, the pass is reported
    assert data(providers["example.com"]) == before
    assert agent.state.source_condition.reason == "GitUnreachable"
    report = agent.last_report
    assert report is not None and not report.ready
    assert next(c for c in report.conditions if c.type == "Ready").reason == "GitUnreachable"
    source.up = True
    source.calls.clear()
    agent.run(force=True)  # git backs off (0.75 s first): not tried yet
    assert "remote_head" not in source.calls and not agent.state.source_condition.status
    clock.advance(1.0)
    agent.run(force=True)
    assert agent.state.source_condition.status
    assert agent.state.git_wait.failures == 0


def test_nothing_in_force_and_git_down_raises(tmp_path: Path) -> None:
    source = FakeSource()
    source.commit(example_files(), "initial")
    source.up = False
    agent = make_agent((source, {}, Clock()), tmp_path)
    with pytest.raises(UnreachableError):
        agent.run()


def test_force_push_to_an_older_commit_is_refused(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    source, providers, _ = world
    agent = make_agent(world, tmp_path)
    first = source.head
    agent.run()
    files = example_files()
    files["records/extra.yaml"] = ("apiVersion: gitdns.io/v1alpha1\nkind: RecordSet\nmetadata:\n  name: extra\n"
                                   "spec:\n  zone: example-com\n  records:\n    - {name: extra, type: A, "
                                   "values: [192.0.2.99]}\n")
    second = source.commit(files, "add extra")
    agent.run()
    assert agent.state.applied_sha == second
    source.commit(source.files_at(first), "force-push back", parent=None)  # unrelated history
    agent.run()
    assert agent.state.applied_sha == second
    assert agent.state.source_condition.reason == "RollbackRefused"
    assert RecordKey("extra.example.com", "A") in data(providers["example.com"])


def test_rollback_allowed_when_configured(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    source, _, _ = world
    agent = make_agent(world, tmp_path, allow_rollback=True)
    first = source.head
    agent.run()
    source.commit(source.files_at(first), "force-push back", parent=None)
    agent.run()
    assert agent.state.applied_sha == source.head


def test_removed_cluster_cleans_its_own_records_only(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    source, providers, _ = world
    agents = [make_agent(world, tmp_path / c, cluster=c) for c in ("eu-west-1", "us-east-1")]
    for agent in agents:
        agent.run()
    prov = providers["example.com"]
    us_a = [k for k in data(prov) if k.name.startswith("280y1b")]
    assert us_a
    files = example_files()
    us_file = next(k for k, v in files.items() if "kind: Cluster" in v and "us-east-1" in v)
    del files[us_file]
    source.commit(files, "decommission us-east-1")
    agents[1].run()
    remaining = data(prov)
    assert not [k for k in remaining if k.name.startswith("280y1b")]
    assert RecordKey("api.example.com", "CNAME") in remaining  # eu-west-1 still owns it


def test_lease_held_by_another_blocks_writes(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from gitdns.agent.lease import TxtLease

    _source, providers, clock = world
    prov = providers.setdefault("example.com", CountingProvider())
    holder = TxtLease(prov, "example.com", "owner", duration=60, clock=clock, identity="first")
    assert holder.acquire().held
    second = TxtLease(prov, "example.com", "owner", duration=60, clock=clock, identity="second")
    state = second.acquire()
    assert not state.held and "first" in state.message
    clock.advance(61)
    assert second.acquire().held
    assert not holder.acquire().held


def test_heartbeat_is_refreshed_and_stale_unknown_owners_pruned_when_opted_in(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from gitdns.core.owner.zone import heartbeat_record, owners
    from gitdns.core.registry import OwnerLabels, ownership_record

    _source, providers, clock = world
    prov = providers.setdefault("example.com", CountingProvider())
    ghost = RecordSet("ghost.example.com", "A", 60, ("198.51.100.77",))
    ghost_txt, _ = ownership_record(ghost, OwnerLabels("dead-cluster"), "example.com")
    clock.now = 50_000.0
    beat = heartbeat_record("dead-cluster", "example.com", clock.now - 10_000)
    for rec in (ghost_txt, ghost, beat):
        prov.apply("example.com", [Change(Action.CREATE, None, rec, rec.key)])
    agent = make_agent(world, tmp_path, prune_stale_owners_after=3600.0)
    agent.run()
    rows = {r.owner: r for r in owners(prov.read("example.com"), set())}
    assert rows[agent.state.known_cluster.id].heartbeat == int(clock.now)  # type: ignore[union-attr]
    assert ghost.key not in data(prov)
    assert "dead-cluster" not in {r.owner for r in owners(prov.read("example.com"), set()) if r.records}


def test_stale_owners_are_kept_without_the_opt_in(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from gitdns.core.owner.zone import heartbeat_record
    from gitdns.core.registry import OwnerLabels, ownership_record

    _source, providers, _clock = world
    prov = providers.setdefault("example.com", CountingProvider())
    ghost = RecordSet("ghost.example.com", "A", 60, ("198.51.100.77",))
    ghost_txt, _ = ownership_record(ghost, OwnerLabels("dead-cluster"), "example.com")
    for rec in (ghost_txt, ghost, heartbeat_record("dead-cluster", "example.com", 0)):
        prov.apply("example.com", [Change(Action.CREATE, None, rec, rec.key)])
    make_agent(world, tmp_path).run()
    assert ghost.key in data(prov)


def test_a_one_record_change_reads_only_that_name_and_its_owners_txt(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import dataclasses

    from gitdns.providers.base import Capabilities

    class PagedProvider(CountingProvider):
        def __init__(self) -> None:
            super().__init__()
            self.capabilities: Capabilities = dataclasses.replace(self.capabilities, page_size=1)
            self.reads: list[object] = []
            self.writes = 0

        def read(self, zone, names=None):  # type: ignore[no-untyped-def,override]
            self.reads.append(None if names is None else frozenset(names))
            return super().read(zone, names)

        def apply(self, zone, changes, guards=()):  # type: ignore[no-untyped-def,override]
            self.writes += 1
            return super().apply(zone, changes, guards)

    source, providers, _clock = world
    prov = providers.setdefault("example.com", PagedProvider())
    agent = make_agent(world, tmp_path, lease="none")
    agent.run()
    assert None in prov.reads  # first pass: the whole zone
    files = example_files()
    records = next(k for k, v in files.items() if "kind: RecordSet" in v)
    files[records] = files[records].replace("values: [192.0.2.25]", "values: [192.0.2.26]")
    source.commit(files, "renumber mail")
    prov.reads.clear()
    prov.writes = 0
    agent.run()
    assert prov.reads and all(r is not None for r in prov.reads), prov.reads  # never a whole-zone read
    read = next(r for r in prov.reads if isinstance(r, frozenset) and "mail.example.com" in r)
    assert all(n == "mail.example.com" or n.startswith("kuadrant-") for n in read)
    assert prov.writes == 1
    assert data(prov)[RecordKey("mail.example.com", "A")] == ("192.0.2.26",)
