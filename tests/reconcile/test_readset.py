"""What a pass reads (gitdns.reconcile.readset): its own names first, its co-owners' ownership
TXT only when the plan takes something from a record another owner builds; the drift check reads
the whole zone.  Writes stay compare-and-swap on what was read."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from pathlib import Path

from gitdns.core.desired import Desired
from gitdns.core.plan.values import Authority, Plan
from gitdns.core.records import Action, Change, Guard, RecordKey, RecordSet, ZoneSnapshot
from gitdns.core.registry import txt_name
from gitdns.providers.memory import MemoryProvider
from gitdns.reconcile.engine import from_files
from gitdns.reconcile.pipeline import Role, run
from gitdns.reconcile.readset import KeyOwners, key_owners, needs_co_owners
from gitdns.reconcile.zonepass import ZoneMemory, ZoneOutcome, ZonePass
from tests.agent.fakes import example_files

ZONE = "example.com"


class Recording(MemoryProvider):
    """A store whose reads are recorded (None: the whole zone) and whose per-name reads are
    worth choosing (a paged service's capabilities)."""

    def __init__(self) -> None:
        super().__init__()
        self.capabilities = dataclasses.replace(self.capabilities, page_size=1)  # type: ignore[misc]
        self.reads: list[frozenset[str] | None] = []

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        self.reads.append(None if names is None else frozenset(names))
        return super().read(zone, names)


def _desired(tmp_path: Path, files: dict[str, str] | None = None) -> Desired:
    return from_files(tmp_path, files or example_files(), None)


def _pass(desired: Desired, cluster: str, provider: MemoryProvider, memory: ZoneMemory | None = None,
          **kw: object) -> ZonePass:
    zone = desired.state.zone("example-com")
    found = desired.state.cluster(cluster)
    assert zone is not None and found is not None
    return ZonePass(zone, desired, found, provider, True, ZoneOutcome(zone), memory=memory or ZoneMemory(),
                    owners=tuple(c.id for c in desired.state.clusters), **kw)  # type: ignore[arg-type]


def _published(tmp_path: Path, provider: MemoryProvider, desired: Desired) -> dict[str, ZonePass]:
    done = {}
    for c in desired.state.clusters:
        p = _pass(desired, c.id, provider)
        run(p, Role.DEFAULT)
        assert p.outcome.ok, p.outcome.errors
        done[c.id] = p
    return done


def test_the_first_pass_of_an_agent_that_never_applied_reads_its_names_not_the_zone(tmp_path: Path) -> None:
    desired = _desired(tmp_path)
    store = Recording()
    clusters = [c.id for c in desired.state.clusters]
    for ident in clusters[:-1]:
        run(_pass(desired, ident, store), Role.DEFAULT)
    store.reads.clear()
    joiner = _pass(desired, clusters[-1], store, first_by_names=True)
    run(joiner, Role.DEFAULT)
    assert joiner.outcome.ok and joiner.outcome.applied > 0
    # the plan read its names once (after the active groups' two): never the whole zone
    assert joiner.names is not None and store.reads[1] == joiner.names
    assert store.reads.count(None) == 1  # the inactive groups' pruning reads the zone (once per serial)
    assert len(joiner.names) < len(store.read(ZONE).records)
    again = _pass(desired, clusters[-1], store)  # a whole-zone plan afterwards: nothing left to do
    run(again, Role.DEFAULT)
    assert again.outcome.plan is not None and not again.outcome.plan.changes


def test_validation_reads_its_own_names_and_the_drift_check_the_whole_zone(tmp_path: Path) -> None:
    desired = _desired(tmp_path)
    store = Recording()
    passes = _published(tmp_path, store, desired)
    ident = next(iter(passes))
    memory = passes[ident].memory
    memory.zone_size = 10_000  # a zone large enough that reading by name is cheaper
    store.reads.clear()
    checked = _pass(desired, ident, store, memory, validation=True)
    run(checked, Role.DEFAULT)
    assert checked.outcome.ok and checked.names is not None and store.reads[1] == checked.names
    store.reads.clear()
    drift = _pass(desired, ident, store, memory, validation=True, drift=True)
    run(drift, Role.DEFAULT)
    assert drift.names is None and store.reads[1] is None  # after the active groups' two names


def test_leaving_a_shared_record_reads_its_co_owners_and_keeps_the_record(tmp_path: Path) -> None:
    """Taking a claim off a record others build needs their ownership TXT (the record stays for
    them): the pass reads them before it writes, and the shared record survives."""
    desired = _desired(tmp_path)
    store = Recording()
    passes = _published(tmp_path, store, desired)
    leaver = next(iter(passes))
    files = example_files()
    gone = next(p for p, text in files.items() if "kind: Cluster" in text and leaver in text)
    del files[gone]
    after = from_files(tmp_path, files, None)
    found = desired.state.cluster(leaver)
    zone = after.state.zone("example-com")
    assert found is not None and zone is not None
    index = key_owners(after.state, zone)
    assert index is not None
    shared = {k for k, who in index.by_key.items() if len(who) > 1}
    assert shared
    store.reads.clear()
    p = ZonePass(zone, after, found, store, True, ZoneOutcome(zone), memory=passes[leaver].memory,
                 owners=tuple(c.id for c in after.state.clusters))
    run(p, Role.DEFAULT)
    assert p.outcome.ok, p.outcome.errors
    co_owner_txt = {txt_name(o, k.type, k.name, ZONE) for k in shared for o in index.by_key[k]}
    assert any(r is None or (r & co_owner_txt) for r in store.reads)  # the co-owners were read first
    left = store.read(ZONE).by_key()
    assert shared <= set(left)  # every record the others build is still there
    assert not any(r.type == "TXT" and r.name.startswith(txt_name(leaver, "", "", None)[:17])
                   for r in left.values())  # and nothing of the leaver's claims


KEY = RecordKey("api.example.com", "CNAME")
MINE = RecordKey("x1.klb.api.example.com", "A")


def _txt(key: RecordKey) -> RecordSet:
    return RecordSet(txt_name("me", key.type, key.name, ZONE), "TXT", 60, ('"heritage=external-dns"',))


def _plan(*changes: Change) -> Plan:
    return Plan(zone=ZONE, owner="me", authority=Authority.OWN, changes=changes)


def test_which_plans_read_the_co_owners_again() -> None:
    index = KeyOwners({KEY: frozenset({"me", "other"}), MINE: frozenset({"me"})},
                      {(KEY.name, "CNAME"): frozenset({"me", "other"}), (MINE.name, "A"): frozenset({"me"})})
    empty = ZoneSnapshot(ZONE, ())
    keys = [KEY, MINE]
    row = RecordSet(KEY.name, "CNAME", 300, ("klb.api.example.com",))
    a = RecordSet(MINE.name, "A", 60, ("192.0.2.1",))
    # adding its own claim to a shared record, creating and changing what it alone builds: no
    assert not needs_co_owners(_plan(Change(Action.CREATE, None, _txt(KEY), KEY)), empty, keys, index, "me")
    assert not needs_co_owners(_plan(Change(Action.CREATE, None, a, MINE),
                                     Change(Action.UPDATE, a, a, MINE)), empty, keys, index, "me")
    # taking its claim off a shared record with no co-owner seen keeping it, or changing or
    # deleting the record: yes
    leave = Change(Action.DELETE, _txt(KEY), None, KEY)
    assert needs_co_owners(_plan(leave), empty, keys, index, "me")
    other = RecordKey(txt_name("other", "CNAME", KEY.name, ZONE), "TXT")
    kept = dataclasses.replace(_plan(leave), guards=(Guard(other, True, KEY),))
    assert not needs_co_owners(kept, empty, keys, index, "me")  # the delete waits on the co-owner's claim
    assert needs_co_owners(_plan(Change(Action.UPDATE, row, row, KEY)), empty, keys, index, "me")
    assert needs_co_owners(_plan(Change(Action.DELETE, row, None, KEY)), empty, keys, index, "me")
    # another address type at one of its names: the type clash rules read every owner's TXT
    clash = ZoneSnapshot(ZONE, (RecordSet(KEY.name, "A", 60, ("192.0.2.9",)),))
    assert needs_co_owners(_plan(), clash, keys, index, "me")
    assert not needs_co_owners(_plan(), empty, keys, index, "me")


def test_git_foretells_the_zone_size(tmp_path: Path) -> None:
    desired = _desired(tmp_path)
    zone = desired.state.zone("example-com")
    assert zone is not None
    index = key_owners(desired.state, zone)
    assert index is not None and key_owners(desired.state, zone) is index  # built once per revision
    store = MemoryProvider()
    _published(tmp_path, store, desired)
    assert index.records >= len(store.read(ZONE).records) - 1  # within the heartbeats, which no pass writes


def test_step_two_reads_only_the_names_step_one_did_not(tmp_path: Path) -> None:
    """A shared record's content changes (the static ``mail`` A every cluster builds): step 1
    reads its names, the plan takes something from a shared record, so step 2 reads every
    co-owner's ownership TXT — and only those: step 1's names are not read again (at a
    thousand clusters each is a request at the agent's share), yet the plan sees them."""
    desired = _desired(tmp_path)
    store = Recording()
    passes = _published(tmp_path, store, desired)
    ident = next(iter(passes))
    memory = passes[ident].memory
    memory.zone_size = 10_000  # reading by name is cheaper
    intent = passes[ident].intent
    assert intent is not None
    memory.intent = intent.records  # as the agent remembers it: the next revision reads what changed
    files = example_files()
    files["records/example-com.yaml"] = files["records/example-com.yaml"].replace("192.0.2.25]", "192.0.2.99]")
    moved = from_files(tmp_path, files, None)
    store.reads.clear()
    p = _pass(moved, ident, store, memory)
    run(p, Role.DEFAULT)
    assert p.outcome.ok and p.outcome.applied, p.outcome.errors
    mail = f"mail.{ZONE}"
    by_name = [r for r in store.reads if r is not None and not any("active-groups" in n for n in r)]
    first = next(i for i, r in enumerate(by_name) if mail in r)
    step1, step2 = by_name[first], by_name[first + 1]
    assert step2 and not step1 & step2, sorted(step1 & step2)  # nothing read twice
    assert p.names is not None and step1 | step2 == p.names  # the plan saw both
    assert {txt_name(c.id, "A", mail, ZONE) for c in desired.state.clusters} <= p.names
    values = next(r.values for r in store.read(ZONE).records if r.name == mail)
    assert "192.0.2.99" in values  # its value; the others' stays until their agents move
