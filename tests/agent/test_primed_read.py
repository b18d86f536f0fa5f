"""A restarted agent with no record of the revision it applied reads each zone once in its
first cycle: the whole-zone read that looked for its own revision is lent to the zone's pass
(gitdns/agent/zones/primed.py), and the pass's writes stay compare-and-swap on it."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Collection, Sequence
from pathlib import Path

from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent
from gitdns.agent.ports import AgentPorts
from gitdns.agent.zones.primed import Primed
from gitdns.core.model import Zone
from gitdns.core.records import Action, Change, Guard, RecordKey, RecordSet, ZoneSnapshot
from gitdns.providers.base import ApplyResult, Provider
from tests.agent.fakes import Clock, FakeSource, example_files
from tests.agent.test_validation_reads import CLUSTER, PagedProvider, moved_mail, ungrouped

MAIL = RecordKey("mail.example.com", "A")


class Intruded(PagedProvider):
    """A whole page per read; after the first whole-zone read, another writer changes the mail
    server's address (between the agent's look at its own revision and its pass); refusals counted."""

    def __init__(self, intrude: bool = False) -> None:
        super().__init__()
        self.capabilities = dataclasses.replace(self.capabilities, page_size=1000)  # a whole read: 1 request
        self.intrude = intrude
        self.refused = 0

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        snap = super().read(zone, names)
        if self.intrude and names is None and zone == "example.com":
            self.intrude = False
            old = next(r for r in snap.records if r.key == MAIL)
            new = dataclasses.replace(old, values=("192.0.2.77",))
            assert not other_writer(self, zone, [Change(Action.UPDATE, old, new, MAIL)]).refused
        return snap

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        result = super().apply(zone, changes, guards)
        self.refused += len(result.refused)
        return result


def other_writer(prov: PagedProvider, zone: str, changes: list[Change]) -> ApplyResult:
    """Another writer: straight into the store, past the counting."""
    return super(PagedProvider, prov).apply(zone, changes)


def agent(state_dir: Path, source: FakeSource, clock: Clock, providers: dict[str, Intruded]) -> Agent:
    def factory(zone: Zone) -> Provider:
        return providers.setdefault(zone.domain, Intruded())
    cfg = AgentConfig(repo="mem://", cluster=CLUSTER, state_dir=str(state_dir))
    return Agent(cfg, AgentPorts(source=source, factory=factory, clock=clock, rng=random.Random(1)))


def whole_reads(providers: dict[str, Intruded]) -> dict[str, int]:
    return {zone: sum(1 for names in p.reads if names is None) for zone, p in providers.items()}


def test_a_restarted_agent_reads_each_zone_once_in_its_first_cycle(tmp_path: Path) -> None:
    source, clock = FakeSource(), Clock()
    providers: dict[str, Intruded] = {}
    source.commit(ungrouped(example_files()), "initial")
    agent(tmp_path / "first", source, clock, providers).run()
    for p in providers.values():
        p.reads.clear()
    restarted = agent(tmp_path / "restarted", source, clock, providers)  # no state directory, no status branch
    restarted.run()
    assert set(providers) == {"example.com", "example.org"}
    assert whole_reads(providers) == {"example.com": 1, "example.org": 1}, {z: p.reads for z, p in providers.items()}
    assert restarted.work.primed == {}  # nothing lent outlives the cycle
    for p in providers.values():
        p.reads.clear()
    source.commit(moved_mail(ungrouped(example_files())), "the mail server moves")
    restarted.run()
    assert providers["example.com"].reads  # the next cycle reads the provider afresh


def test_a_record_changed_after_the_lent_read_is_refused_and_read_again(tmp_path: Path) -> None:
    source, clock = FakeSource(), Clock()
    providers: dict[str, Intruded] = {}
    files = ungrouped(example_files())
    source.commit(files, "initial")
    agent(tmp_path / "first", source, clock, providers).run()
    source.commit(moved_mail(files), "the mail server moves")  # mail.example.com A: .25 -> .99
    providers["example.com"].intrude = True
    cycle = agent(tmp_path / "restarted", source, clock, providers).run()
    prov = providers["example.com"]
    assert prov.refused >= 1  # planned on the lent read: its DELETE of the value read was refused
    mail = next(r for r in prov.read("example.com").records if r.key == MAIL)
    assert mail.values == ("192.0.2.99",), (mail, cycle)


def test_a_lent_read_answers_until_the_first_write() -> None:
    inner = PagedProvider()
    rec = RecordSet("a.example.com", "A", 60, ("192.0.2.1",))
    inner.apply("example.com", [Change(Action.CREATE, None, rec, rec.key)])
    lent = Primed(inner, inner.read("example.com"))
    inner.reads.clear()
    assert lent.read("example.com").records == (rec,)
    by_name = lent.read("example.com", ["A.example.com.", "b.example.com"])
    assert by_name.records == (rec,) and by_name.names == frozenset({"a.example.com", "b.example.com"})
    assert lent.read("example.org").records == () and inner.reads == [None]  # another zone: the provider's
    new = dataclasses.replace(rec, values=("192.0.2.2",))
    assert not lent.apply("example.com", [Change(Action.UPDATE, rec, new, rec.key)]).refused
    assert lent.read("example.com").records == (new,) and inner.reads == [None, None]  # after a write: fresh
    assert lent.lent == 2


def test_a_lent_read_waits_only_for_the_writes_share_of_the_budget() -> None:
    class Budgeted(PagedProvider):
        def __init__(self) -> None:
            super().__init__()
            self.asked: list[tuple[str, tuple[str, ...] | None]] = []

        def ready_to_write(self, zone: str, names: Collection[str] | None = None) -> float:
            self.asked.append((zone, None if names is None else tuple(names)))
            return 0.5

    inner = Budgeted()
    rec = RecordSet("a.example.com", "A", 60, ("192.0.2.1",))
    inner.apply("example.com", [Change(Action.CREATE, None, rec, rec.key)])
    lent = Primed(inner, inner.read("example.com"))
    assert lent.ready_to_write("example.com", None) == 0.5  # the read is the loan's: nothing to hold for it
    assert lent.ready_to_write("example.org", ["x.example.org"]) == 0.5  # another zone: as asked
    lent.apply("example.com", [Change(Action.DELETE, rec, None, rec.key)])
    lent.ready_to_write("example.com", None)  # the loan ended with the write: the whole read's share
    assert inner.asked == [("example.com", ()), ("example.org", ("x.example.org",)), ("example.com", None)]
