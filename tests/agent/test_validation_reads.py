"""What the validation loop reads: after a write, only what that write changed; a quiet
validation, every key of the intent; and no quiet validation sooner than the agent's share of
the account pays for the last one (the ramp after a write is floored by the budget)."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Collection, Sequence
from pathlib import Path

from gitdns.agent.budget import Budgets
from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent
from gitdns.agent.ports import AgentPorts
from gitdns.core.model import Zone
from gitdns.core.records import Change, Guard, ZoneSnapshot
from gitdns.providers.base import ApplyResult, Provider
from gitdns.providers.memory import MemoryProvider
from tests.agent.fakes import Clock, FakeSource, example_files

CLUSTER = "eu-west-1"
ZONE = "example.com"


class PagedProvider(MemoryProvider):
    """The memory provider as a paged API (one request per name, or per 2 records of a whole
    read), each request counted and each read's names logged."""

    def __init__(self) -> None:
        super().__init__()
        self.capabilities = dataclasses.replace(self.capabilities, page_size=2, reads_per_minute=60,
                                                writes_per_minute=60, one_budget=True)
        self.requests = 0
        self.reads: list[tuple[str, ...] | None] = []

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        self.reads.append(tuple(sorted(names)) if names is not None else None)
        snap = super().read(zone, names)
        self.requests += len(set(names)) if names is not None else max(1, -(-len(snap.records) // 2))
        return snap

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        self.requests += 1
        return super().apply(zone, changes, guards)


def build(tmp_path: Path, source: FakeSource, clock: Clock, providers: dict[str, PagedProvider],
          fleet: int = 1, budgeted: bool = False) -> Agent:
    budgets = Budgets(lambda: fleet, clock=clock, sleep=clock.advance, uniform=lambda a, b: a)

    def factory(zone: Zone) -> Provider:
        inner = providers.setdefault(zone.domain, PagedProvider())
        return budgets.wrap(inner) if budgeted else inner

    wrapped: dict[str, Provider] = {}

    def cached(zone: Zone) -> Provider:  # one budgeted provider per zone, as the agent's factory keeps
        if zone.domain not in wrapped:
            wrapped[zone.domain] = factory(zone)
        return wrapped[zone.domain]

    cfg = AgentConfig(repo="mem://", cluster=CLUSTER, state_dir=str(tmp_path))
    return Agent(cfg, AgentPorts(source=source, factory=cached, clock=clock, rng=random.Random(1)))


def moved_mail(files: dict[str, str]) -> dict[str, str]:
    out = dict(files)
    out["records/example-com.yaml"] = out["records/example-com.yaml"].replace("192.0.2.25]", "192.0.2.99]")
    assert out != files
    return out


def moved_gateway(files: dict[str, str]) -> dict[str, str]:
    """eu-west-1's api gateway moves to a new address: a record only this cluster builds."""
    out = dict(files)
    out["clusters/eu-west-1.yaml"] = out["clusters/eu-west-1.yaml"].replace("192.0.2.10,", "192.0.2.12,")
    assert out != files
    return out


def ungrouped(files: dict[str, str]) -> dict[str, str]:
    """The example without its active groups (no cluster in a group)."""
    out = {k: v for k, v in files.items() if not k.startswith("groups/")}
    for k, v in out.items():
        if k.startswith("clusters/"):
            out[k] = "\n".join(line for line in v.splitlines() if not line.strip().startswith("group:")) + "\n"
    return out


def names_of(reads: list[tuple[str, ...] | None]) -> set[str]:
    """The names read by name (a whole-zone read, None, is the grouped zone's prune step)."""
    return {name for names in reads if names is not None for name in names}


def test_the_validation_after_a_write_reads_what_the_write_changed_and_the_next_reads_every_key(
        tmp_path: Path) -> None:
    source, clock = FakeSource(), Clock()
    providers: dict[str, PagedProvider] = {}
    source.commit(example_files(), "initial")
    agent = build(tmp_path, source, clock, providers)
    agent.run()
    prov = providers[ZONE]
    agent.validate()  # the validation after the first write
    clock.advance(10_000)
    agent.validate()  # a quiet one: the intent's every key
    track = next(t for t in agent.state.tracks.values() if t.desired and t.last and t.last.zone.domain == ZONE)
    assert track.memory.intent is not None
    every = {r.name for r in track.memory.intent}

    source.commit(moved_mail(source.commits[source.head]), "mail moves")
    agent.run()
    mail = f"mail.{ZONE}"
    assert any(r.name == mail and r.values == ("192.0.2.99",) for r in prov.read(ZONE).records)
    start = len(prov.reads)
    clock.advance(20)
    agent.validate()  # after the write: what it changed, nothing else
    after_write = names_of(prov.reads[start:])
    assert mail in after_write
    assert after_write & every == {mail}, sorted(after_write & every)
    assert all(name == mail or name.endswith(f"-{mail}") or "active-groups" in name for name in after_write), \
        sorted(after_write)
    assert not track.memory.recheck  # read once: the next validation looks at everything again

    start = len(prov.reads)
    clock.advance(10_000)
    agent.validate()
    quiet = prov.reads[start:]
    assert None in quiet or every <= names_of(quiet)  # the whole zone, or every name


def test_a_record_deleted_behind_the_agents_back_after_a_write_is_put_back_by_the_quiet_validation(
        tmp_path: Path) -> None:
    """The validation after a write looks only at what it wrote; the one after it looks at
    everything, so drift elsewhere is found one validation later, not never."""
    from gitdns.core.records import Action

    source, clock = FakeSource(), Clock()
    providers: dict[str, PagedProvider] = {}
    source.commit(example_files(), "initial")
    agent = build(tmp_path, source, clock, providers)
    agent.run()
    agent.validate()
    source.commit(moved_mail(source.commits[source.head]), "mail moves")
    agent.run()
    prov = providers[ZONE]
    api = next(r for r in prov.read(ZONE).records if r.name == f"api.{ZONE}")
    prov.apply(ZONE, [Change(Action.DELETE, api, None, api.key)])
    clock.advance(20)
    agent.validate()
    clock.advance(10_000)
    agent.validate()
    assert any(r.key == api.key for r in prov.read(ZONE).records)


def test_quiet_validations_come_no_sooner_than_half_the_agents_share_pays_for(tmp_path: Path) -> None:
    """In a fleet of 200 on an account of 60 requests a minute, one agent gets a request every
    250 s: a validation of N requests is followed by the next no sooner than 2 x N x 250 s,
    however early the ramp after a write would put it."""
    source, clock = FakeSource(), Clock()
    providers: dict[str, PagedProvider] = {}
    source.commit(example_files(), "initial")
    agent = build(tmp_path, source, clock, providers, fleet=200, budgeted=True)
    agent.run()
    prov = providers[ZONE]
    track = next(t for t in agent.state.tracks.values() if t.last and t.last.zone.domain == ZONE)
    share = 60 / 60 * 0.8 / 200  # requests per second this agent may send
    checked = 0
    for turn in range(5):  # the ramp: 5 s, 10 s, 20 s ... unless the budget says otherwise
        due = track.next_validation
        assert due is not None
        clock.now = max(clock.now, due)
        before = prov.requests
        agent.validate()
        cost = prov.requests - before
        if turn == 0 or track.next_validation == due:
            continue  # the check after the write, or this zone was not due
        assert track.next_validation is not None
        gap = track.next_validation - clock.now
        assert gap >= cost / share / 2 * 0.999, (turn, cost, gap)
        checked += 1
    assert checked >= 2


def test_a_change_after_a_quiet_validation_is_not_queued_behind_its_debt(tmp_path: Path) -> None:
    """A quiet validation waits until the agent's share holds its cost and a change's reserve
    (`budget.RESERVE`), so a change pushed right after it is written at once: in a fleet of 200
    (one request per 250 s), a validation of 30 requests would otherwise leave the change
    waiting about 6,000 s."""
    from gitdns.agent.budget import RESERVE

    source, clock = FakeSource(), Clock()
    providers: dict[str, PagedProvider] = {}
    source.commit(ungrouped(example_files()), "initial")  # no groups: a change pass reads by name only
    agent = build(tmp_path, source, clock, providers, fleet=200, budgeted=True)
    agent.run()
    prov = providers[ZONE]
    track = next(t for t in agent.state.tracks.values() if t.last and t.last.zone.domain == ZONE)
    ran = 0
    for _ in range(40):  # through the ramp, until two quiet validations ran
        due = agent.next_validation()
        assert due is not None
        clock.now = max(clock.now, due)
        before = prov.requests
        agent.validate()
        ran += track.quiet_cost > 0 and prov.requests - before >= track.quiet_cost
        if ran >= 2:
            break
    assert ran >= 2 and track.quiet_cost > RESERVE
    source.commit(moved_gateway(source.commits[source.head]), "eu-west-1 moves")
    start, before = clock.now, prov.requests
    agent.run()
    spent = prov.requests - before
    assert any("192.0.2.12" in r.values for r in prov.read(ZONE).records)
    share = 60 / 60 * 0.8 / 200
    # what the change itself costs beyond the reserve, at most; never the validation's debt
    assert spent <= RESERVE + 2, spent  # the change's names, its write
    assert clock.now - start <= max(0, spent - RESERVE) / share + 1, (clock.now - start, spent)


class FailsFirstWrite(PagedProvider):
    def __init__(self) -> None:
        super().__init__()
        self.failures = 1

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        if self.failures:
            self.failures -= 1
            from gitdns.errors import RetryableError

            raise RetryableError("503 Service Unavailable")
        return super().apply(zone, changes, guards)


def test_a_revision_whose_pass_failed_is_applied_once_validation_levels_the_zone(tmp_path: Path) -> None:
    """The first pass fails (the provider answers 503); the validation loop writes what it
    wanted; the revision is then recorded as applied, so the next revision reads what changed
    (not every record, nor what our records carry as after a restart)."""
    source, clock = FakeSource(), Clock()
    providers: dict[str, PagedProvider] = {}
    source.commit(ungrouped(example_files()), "initial")
    cfg = AgentConfig(repo="mem://", cluster=CLUSTER, state_dir=str(tmp_path))

    def factory(zone: Zone) -> Provider:
        return providers.setdefault(zone.domain, FailsFirstWrite() if zone.domain == ZONE else PagedProvider())

    agent = Agent(cfg, AgentPorts(source=source, factory=factory, clock=clock, rng=random.Random(1)))
    agent.run()
    assert agent.state.applied_sha is None  # its pass failed
    for _ in range(6):
        due = agent.next_validation()
        assert due is not None
        clock.now = max(clock.now, due)
        agent.validate()
        if agent.state.applied_sha is not None:
            break
    assert agent.state.applied_sha == source.head
    prov = providers[ZONE]
    source.commit(moved_gateway(source.commits[source.head]), "eu-west-1 moves")
    start = len(prov.reads)
    agent.run()
    reads = prov.reads[start:]
    assert None not in reads, reads  # neither a whole-zone read nor the restart's look at our records
    assert any("192.0.2.12" in r.values for r in prov.read(ZONE).records)


class StaleOnce(PagedProvider):
    """Answers the next read with the zone as it was before (`stale`), as an eventually
    consistent API or a lagging replica can."""

    def __init__(self) -> None:
        super().__init__()
        self.stale: ZoneSnapshot | None = None

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        fresh = super().read(zone, names)
        if self.stale is None:
            return fresh
        old, self.stale = self.stale, None
        wanted = None if names is None else set(names)
        return dataclasses.replace(fresh, records=tuple(r for r in old.records if wanted is None or r.name in wanted))


def test_a_record_dropped_from_git_on_a_stale_read_is_read_again_by_the_next_validation(tmp_path: Path) -> None:
    """The revision drops a record; the pass's read is stale and does not show it, so the pass
    writes nothing.  The record is in no intent any more, so a validation of the intent's keys
    would never look at it again (only the drift check would): the validation after the pass
    reads the keys the revision changed, soon, and takes it away."""
    source, clock = FakeSource(), Clock()
    providers: dict[str, PagedProvider] = {ZONE: StaleOnce()}
    files = ungrouped(example_files())
    source.commit(files, "initial")
    prov = providers[ZONE]
    assert isinstance(prov, StaleOnce)
    from gitdns.core.records import Action, RecordSet

    others = [RecordSet(f"h{i}.{ZONE}", "A", 60, (f"10.0.{i // 250}.{i % 250 + 1}",)) for i in range(200)]
    prov.apply(ZONE, [Change(Action.CREATE, None, r, r.key) for r in others])  # a large zone: names cost less
    before = prov.read(ZONE)  # the zone before the agent, as a lagging read would still show it
    agent = build(tmp_path, source, clock, providers)
    agent.run()
    mail = f"mail.{ZONE}"
    assert any(r.name == mail for r in prov.read(ZONE).records)
    for _ in range(3):
        clock.advance(10_000)
        agent.validate()
    assert prov.reads[-1] is not None  # the validations read by name (a whole-zone read sees everything)
    dropped = dict(files)
    dropped["records/example-com.yaml"] = files["records/example-com.yaml"].replace(
        "    - name: mail\n      type: A\n      values: [192.0.2.25]\n", "")
    assert dropped != files
    source.commit(dropped, "mail goes")
    prov.stale = before
    agent.run()
    assert any(r.name == mail for r in prov.read(ZONE).records)  # the stale read showed nothing to delete
    track = next(t for t in agent.state.tracks.values() if t.last and t.last.zone.domain == ZONE)
    assert track.next_validation is not None and track.next_validation - clock.now <= 60  # soon, not quiet
    clock.now = track.next_validation
    agent.validate()
    held = prov.read(ZONE).records
    assert not any(r.name == mail for r in held), "the dropped record is still in the zone"
    assert not any(r.type == "TXT" and r.name.endswith(f"-a-{mail}") for r in held)  # nor its ownership TXT
