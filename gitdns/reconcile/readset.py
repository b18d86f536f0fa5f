"""Which names a pass reads: its own first, its co-owners' ownership TXT only when a write needs them.

A pass that knows which keys it looks at (its changed keys after a new revision, every key of
its intent on a first pass or a validation pass) reads in two steps:

1. **Its own names**: each key's data name (every type and set identifier at that name comes
   back with it), this owner's ownership TXT names for it, and for a key others build too the
   ownership TXT of two of them (enough to see that a record it joins with the same content is
   owned, not foreign).  It plans on that.
2. **Its co-owners' TXT names, when a write needs them**: when that plan updates or deletes a
   data record another owner builds (git says so), deletes its ownership TXT of a key another
   owner builds without a co-owner seen keeping the record (the plan's present guard on that
   co-owner's TXT makes the delete conditional on it), yields, conflicts or stalls, or when the names read show
   a record of another address type at one of its names, the pass reads again with the
   ownership TXT names of every owner git says builds each key (and, for the address types,
   every owner building another address type at the name) and plans again.  Only that plan is
   written.

A plan that only creates records, updates keys only this owner builds, or adds its own
ownership TXT to a record it shares with the same content cannot lose another owner's write:
every data record it writes was read, and compare-and-swap refuses it if it
moved.  A plan that takes anything away from a shared record reads every co-owner first, as
before (`gitdns.core.reads`).  Who builds what comes from git: the records of every Cluster in
the zone's desired state, built once per revision (`key_owners`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass

from gitdns.core.builder import desired_for_zone
from gitdns.core.model import DesiredState, Mode, Zone
from gitdns.core.plan.values import Plan
from gitdns.core.records import Action, RecordKey, ZoneSnapshot
from gitdns.core.registry import txt_name

ADDRESS = ("A", "AAAA", "CNAME")


@dataclass(frozen=True, slots=True)
class KeyOwners:
    """Who builds each key of a zone at one revision, and each (name, type)."""

    by_key: dict[RecordKey, frozenset[str]]
    by_name: dict[tuple[str, str], frozenset[str]]

    @property
    def records(self) -> int:
        """The zone's size as git foretells it: every key, one ownership TXT per owner of each,
        one heartbeat per owner (the read-cost estimate before a whole-zone read measured it)."""
        owners = set().union(*self.by_key.values()) if self.by_key else set()
        return len(self.by_key) + sum(len(v) for v in self.by_key.values()) + len(owners)

    def shared(self, key: RecordKey, me: str) -> bool:
        return bool(self.by_key.get(key, frozenset()) - {me})

    def others_at(self, name: str, rtype: str, me: str) -> frozenset[str]:
        return self.by_name.get((name, rtype), frozenset()) - {me}


_CACHE: dict[tuple[int, str], tuple[DesiredState, KeyOwners | None]] = {}
_LOCK = threading.Lock()


def key_owners(state: DesiredState, zone: Zone) -> KeyOwners | None:
    """The owners of every key of ``zone`` at ``state`` (built once per state and zone).  None
    where git alone cannot say: primaries publish their remotes' records, which git does not hold."""
    ident = (id(state), zone.name)
    with _LOCK:
        hit = _CACHE.get(ident)
        if hit is not None and hit[0] is state:
            return hit[1]
    found: KeyOwners | None = None
    if not any(c.mode is Mode.PRIMARY for c in state.clusters):
        by_key: dict[RecordKey, set[str]] = {}
        by_name: dict[tuple[str, str], set[str]] = {}
        for cluster in state.clusters:
            for rec in desired_for_zone(state, cluster, zone):
                by_key.setdefault(rec.key, set()).add(cluster.id)
                by_name.setdefault((rec.name, rec.type), set()).add(cluster.id)
        found = KeyOwners({k: frozenset(v) for k, v in by_key.items()},
                          {k: frozenset(v) for k, v in by_name.items()})
    with _LOCK:
        if len(_CACHE) > 8:
            _CACHE.clear()
        _CACHE[ident] = (state, found)
    return found


SAMPLE = 2  # co-owners of a shared key whose ownership TXT step 1 reads


def own_names(keys: Iterable[RecordKey], me: str, zone: str, index: KeyOwners) -> frozenset[str]:
    """Step 1: the keys' data names, this owner's ownership TXT names for them and, for a key
    others build too, `SAMPLE` of those co-owners' (so a shared record it joins with the same
    content is seen as owned, not foreign)."""
    out: set[str] = set()
    for key in keys:
        out.add(key.name)
        out.add(txt_name(me, key.type, key.name, zone))
        others = sorted(index.by_key.get(key, frozenset()) - {me})[:SAMPLE]
        out.update(txt_name(o, key.type, key.name, zone) for o in others)
    return frozenset(out)


def co_owner_names(keys: Iterable[RecordKey], index: KeyOwners, me: str, zone: str) -> frozenset[str]:
    """Step 2: step 1's names, and the ownership TXT names of every owner git says builds each
    key (for the address types, also of every owner of another address type at the name, which
    decides a type clash)."""
    out: set[str] = set()
    for key in keys:
        out.add(key.name)
        owners = {me} | set(index.by_key.get(key, ()))
        out.update(txt_name(o, key.type, key.name, zone) for o in owners)
        if key.type in ADDRESS:
            for other in ADDRESS:
                out.update(txt_name(o, other, key.name, zone)
                           for o in {me} | set(index.by_name.get((key.name, other), ())))
    return frozenset(out)


def needs_co_owners(plan: Plan, snapshot: ZoneSnapshot, keys: Iterable[RecordKey], index: KeyOwners,
                    me: str) -> bool:
    """Whether a plan made from step 1's read must be made again from step 2's."""
    if plan.stalled or plan.conflicts:
        return True
    kept_for = {g.group for g in plan.guards if g.present}  # a co-owner seen, its claim a condition
    for change in plan.changes:
        group = change.group
        if not index.shared(group, me):
            continue
        if change.key == group and change.action is not Action.CREATE:
            return True  # a shared record's content changes or goes
        if change.key != group and change.action is Action.DELETE and group not in kept_for:
            return True  # our claim goes and no co-owner was seen keeping the record
    mine = {k.name: k.type for k in keys}
    for rec in snapshot.records:  # another address type at one of our names: the clash rules read TXT
        want = mine.get(rec.name)
        if want in ADDRESS and rec.type in ADDRESS and rec.type != want:
            return True
    return False
