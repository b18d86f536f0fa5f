"""Owners of a zone, heartbeats, and explicit take-overs (`gitdns owners`, `adopt`).

Heartbeat (future work in Kuadrant's "Distributed DNS Load Balancing" RFC): each publishing
agent refreshes ``gitdns-heartbeat-<hash8(owner)>.<zone> TXT "owner=<id>,time=<unix seconds>"``.
It is not an ownership record (its heritage is not external-dns), so no planner ever touches it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from gitdns.core.names import short_hash
from gitdns.core.planner import decode_zone
from gitdns.core.records import Action, Change, RecordKey, RecordSet, ZoneSnapshot
from gitdns.core.registry import OwnerLabels, label_error, ownership_record

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


@dataclass(frozen=True, slots=True)
class OwnerRow:
    owner: str
    records: int  # data records it owns
    groups: tuple[str, ...]
    revisions: tuple[str, ...]
    heartbeat: int | None  # unix seconds of the last heartbeat
    known: bool  # a Cluster in git names this owner

    def stale(self, now: float, after: float) -> bool:
        """Eligible for automatic removal: unknown to git and silent for ``after`` seconds."""
        return not self.known and self.heartbeat is not None and now - self.heartbeat > after


def owners(snapshot: ZoneSnapshot, known: Collection[str]) -> list[OwnerRow]:
    obs = decode_zone(snapshot)
    counts: dict[str, int] = {}
    groups: dict[str, set[str]] = {}
    revs: dict[str, set[str]] = {}
    for key, entries in obs.owners.items():
        for owner, entry in entries.items():
            counts[owner] = counts.get(owner, 0) + (1 if key in obs.data else 0)
            if entry.labels.group:
                groups.setdefault(owner, set()).add(entry.labels.group)
            if entry.labels.rev:
                revs.setdefault(owner, set()).add(entry.labels.rev)
    beats: dict[str, int] = {}
    for rec in snapshot.records:
        parsed = parse_heartbeat(rec)
        if parsed is not None:
            beats[parsed[0]] = parsed[1]
    names = sorted(set(counts) | set(beats))
    return [OwnerRow(o, counts.get(o, 0), tuple(sorted(groups.get(o, ()))), tuple(sorted(revs.get(o, ()))),
                     beats.get(o), o in known) for o in names]


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
