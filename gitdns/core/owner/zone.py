"""Owners of a zone, heartbeats, and explicit take-overs (`gitdns owners`, `adopt`).

On a zone shared with Kuadrant's dns-operator an owner is one of `OwnerKind`: a gitdns
cluster, a dns-operator cluster (its current TXT format), a legacy owner (only the format
dns-operator wrote before it versioned its registry) or unknown.

Heartbeat (future work in Kuadrant's "Distributed DNS Load Balancing" RFC): each publishing
agent refreshes ``gitdns-heartbeat-<hash8(owner)>.<zone> TXT "owner=<id>,time=<unix seconds>"``.
It is not an ownership record (its heritage is not external-dns), so no planner ever touches it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from gitdns.core.names import short_hash
from gitdns.core.plan.planner import decode_zone
from gitdns.core.records import Action, Change, RecordKey, RecordSet, ZoneSnapshot
from gitdns.core.registry import (
    OwnerLabels,
    OwnershipEntry,
    add_entry,
    decode_entries,
    label_error,
    ownership_record,
    parse_txt_name,
)

HEARTBEAT_PREFIX = "gitdns-heartbeat-"


def heartbeat_name(owner: str, zone: str) -> str:
    return f"{HEARTBEAT_PREFIX}{short_hash(owner, 8)}.{zone}"


def heartbeat_record(owner: str, zone: str, now: float) -> RecordSet:
    """This owner's heartbeat TXT.  Raises ``ValueError`` for an owner id that could add fields
    to the value (`gitdns.core.registry.label_error`)."""
    wrong = label_error(owner)
    if wrong is not None:
        raise ValueError(f"no heartbeat can be written for this owner id: {wrong}")
    return RecordSet(heartbeat_name(owner, zone), "TXT", 60, (f"owner={owner},time={int(now)}",))


def parse_heartbeat(rec: RecordSet) -> tuple[str, int] | None:
    if rec.type != "TXT" or not rec.name.startswith(HEARTBEAT_PREFIX) or not rec.values:
        return None
    fields = dict(part.partition("=")[::2] for part in rec.values[0].strip('"').split(","))
    owner, time = fields.get("owner", ""), fields.get("time", "")
    if not owner or not time.isdigit() or short_hash(owner, 8) != rec.name[len(HEARTBEAT_PREFIX):][:8]:
        return None
    return owner, int(time)


def heartbeat_change(snapshot: ZoneSnapshot, owner: str, zone: str, now: float) -> Change:
    """Create or refresh this owner's heartbeat (compare-and-swap on what was read)."""
    new = heartbeat_record(owner, zone, now)
    old = next((r for r in snapshot.records if r.key == new.key), None)
    return Change(Action.CREATE if old is None else Action.UPDATE, old, new, new.key)


class OwnerKind(StrEnum):
    """Who an owner of a shared zone is, as far as the zone and git tell."""

    GITDNS = "gitdns"  # a Cluster in git, or its TXT carry a gitdns `rev` label, or it beats a heartbeat
    DNS_OPERATOR = "dns-operator"  # Kuadrant's versioned TXT (hashed name, version=1), no `rev`
    LEGACY = "legacy"  # only Kuadrant's unversioned TXT (its `&&` joint form included)
    UNKNOWN = "unknown"  # anything else: another version, or version=1 under a legacy name


@dataclass(frozen=True, slots=True)
class OwnerRow:
    owner: str
    records: int  # data records it owns
    groups: tuple[str, ...]
    revisions: tuple[str, ...]
    heartbeat: int | None  # unix seconds of the last heartbeat
    known: bool  # a Cluster in git names this owner
    kind: OwnerKind = OwnerKind.UNKNOWN
    keys: tuple[RecordKey, ...] = ()  # the data records it owns, sorted
    orphans: int = 0  # its ownership TXT whose data record is not in the zone
    shared_with: tuple[str, ...] = ()  # the other owners its joint legacy TXT name

    def stale(self, now: float, after: float) -> bool:
        """Eligible for automatic removal: unknown to git and silent for ``after`` seconds."""
        return not self.known and self.heartbeat is not None and now - self.heartbeat > after


def _kind(entries: list[OwnershipEntry], known: bool, beats: bool) -> OwnerKind:
    if known or beats or any(e.labels.rev for e in entries):
        return OwnerKind.GITDNS
    hashed = [parse_txt_name(e.txt.name) for e in entries]
    if any(e.versioned and p is not None and p[0] is not None for e, p in zip(entries, hashed, strict=True)):
        return OwnerKind.DNS_OPERATOR
    if entries and all(e.labels.version is None for e in entries):
        return OwnerKind.LEGACY
    return OwnerKind.UNKNOWN


def owners(snapshot: ZoneSnapshot, known: Collection[str]) -> list[OwnerRow]:
    """Every owner with an ownership TXT or a heartbeat in the zone.  A joint legacy TXT counts
    for each owner it names; the records, groups and revisions of an owner are those of the
    entry that counts (`gitdns.core.registry.prefer`), its kind is judged on all of them."""
    data: set[RecordKey] = set()
    counted: dict[RecordKey, dict[str, OwnershipEntry]] = {}
    every: dict[str, list[OwnershipEntry]] = {}
    beats: dict[str, int] = {}
    for rec in snapshot.records:
        entries = decode_entries(rec) if rec.type == "TXT" else ()
        for entry in entries:
            add_entry(counted, entry)
            every.setdefault(entry.owner, []).append(entry)
        beat = parse_heartbeat(rec) if not entries else None
        if beat is not None:
            beats[beat[0]] = beat[1]
        elif not entries:
            data.add(rec.key)
    keys: dict[str, list[RecordKey]] = {}
    orphans: dict[str, int] = {}
    for key, found in counted.items():
        for owner in found:
            if key in data:
                keys.setdefault(owner, []).append(key)
            else:
                orphans[owner] = orphans.get(owner, 0) + 1
    rows: list[OwnerRow] = []
    for owner in sorted(set(every) | set(beats)):
        mine = [found[owner] for found in counted.values() if owner in found]
        shared = {o for e in every.get(owner, ()) for o in e.joint if o != owner}
        rows.append(OwnerRow(
            owner, len(keys.get(owner, ())), tuple(sorted({e.labels.group for e in mine if e.labels.group})),
            tuple(sorted({e.labels.rev for e in mine if e.labels.rev})), beats.get(owner), owner in known,
            _kind(every.get(owner, []), owner in known, owner in beats), tuple(sorted(keys.get(owner, ()))),
            orphans.get(owner, 0), tuple(sorted(shared))))
    return rows


def foreign_records(snapshot: ZoneSnapshot, names: Iterable[str], rtype: str | None = None) -> list[RecordSet]:
    """Data records at ``names`` that no ownership TXT claims."""
    obs = decode_zone(snapshot)
    wanted = set(names)
    return [rec for key, rec in sorted(obs.data.items())
            if key.name in wanted and (rtype is None or key.type == rtype) and not obs.owners.get(key)
            and parse_heartbeat(rec) is None]


def adopt_changes(records: Sequence[RecordSet], owner: str, zone: str, *, rev: str | None,
                  group: str | None) -> list[Change]:
    """This owner's ownership TXT for each foreign record: it claims the record as it is."""
    out: list[Change] = []
    for rec in records:
        labels = OwnerLabels(owner=owner, group=group, rev=rev, targets=rec.values)
        txt, _ = ownership_record(rec, labels, zone)
        out.append(Change(Action.CREATE, None, txt, rec.key, reason="adopt"))
    return out


def keys_of(records: Iterable[RecordSet]) -> set[RecordKey]:
    return {r.key for r in records}
