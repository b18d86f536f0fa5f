"""The pure part of `gitdns history`: what a name (or a value) resolves to at one revision of
the desired state, and what changed between two revisions.  No git and no I/O here.

    Merged, Snapshot, RecordDiff, Applied, Entry    the values a history is made of
    merge(per_cluster) -> tuple[Merged, ...]        the fleet's records per key
    diff(old, new) -> tuple[RecordDiff, ...]
    Query(text, by_value=, names=)                  NAME (its host family) or VALUE
    snapshot(desired, name | query, fallback_zone) -> Snapshot
    holders(desired, query) -> set[str]             the record names holding VALUE
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from gitdns.adapters.git.source import CommitInfo
from gitdns.commands.history.walk import Commit
from gitdns.commands.history.walk import iso_date as iso_date  # where the history modules and tests take it from
from gitdns.core import builder
from gitdns.core.desired import Desired
from gitdns.core.groups import ZoneGroups, decide, is_active
from gitdns.core.model import Cluster, DesiredState, Zone
from gitdns.core.names import root_host_of
from gitdns.core.problems import blocked_zones
from gitdns.core.records import MULTI_VALUE_TYPES, RecordKey, RecordSet, normalize_name

if TYPE_CHECKING:
    from gitdns.commands.history.who import Who

# -- values ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Merged:
    """The fleet's records for one key: one variant, or several when clusters disagree.
    ``owners[i]`` are the clusters (metadata.name) wanting ``variants[i]``; not compared."""

    key: RecordKey
    variants: tuple[RecordSet, ...]
    owners: tuple[tuple[str, ...], ...] = field(default=(), compare=False)

    @property
    def conflict(self) -> bool:
        return len(self.variants) > 1


@dataclass(frozen=True, slots=True)
class Snapshot:
    """NAME's merged records at one revision; ``problems`` non-empty: the zone is held there."""

    zone: str  # the zone's domain ("" when no zone holds NAME); by value, the domains of the names followed
    zone_name: str  # its metadata.name
    records: tuple[Merged, ...] = ()
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # the zone's active groups
    clusters: frozenset[str] | None = None  # ids and names of the Clusters in git (None: not known)
    roster: tuple[tuple[str, str], ...] = ()  # (spec.id, metadata.name) of the Clusters in git

    def by_key(self) -> dict[RecordKey, Merged]:
        return {m.key: m for m in self.records}


@dataclass(frozen=True, slots=True)
class RecordDiff:
    op: str  # "+" added, "-" removed, "~" changed
    key: RecordKey
    old: Merged | None
    new: Merged | None


@dataclass(frozen=True, slots=True)
class Applied:
    """When one cluster applied a revision: ``revision`` is the entry's commit or a later one
    that contains it (``exact`` False); ``at`` 0 and ``status_sha`` "": it never did.
    ``held_since``: it applied such a revision (``revision``, by ``status_sha``) but held the
    entry's zone ``held_zone`` at its last good revision ``last_good`` since then, for
    ``held_reason``: the change is not applied there."""

    cluster: str
    revision: str = ""
    at: int = 0
    status_sha: str = ""
    exact: bool = False
    in_git: bool = True  # False: git named no such Cluster at the entry's commit nor just before it
    branch: bool = True  # False: git names the Cluster at the entry's commit, but it has no status branch
    held_since: int = 0
    held_zone: str = ""
    last_good: str = ""  # a sha7 ("" when the zone document does not say)
    held_reason: str = ""


@dataclass(frozen=True, slots=True)
class Entry:
    commit: CommitInfo | Commit
    zone: str
    status: str  # "changed" | "invalid" (zone held, skipped) | "fixed" (valid again) | "health"
    changes: tuple[RecordDiff, ...] = ()
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # e.g. "active groups [a] -> [a, b]"
    mark: str = ""  # git's %G? of the commit
    who: Who | None = None  # its author(s), pull request and who merged it (`history.who.attribute`)
    applied: tuple[Applied, ...] = ()
    cluster: str = ""  # status == "health": the cluster reporting
    in_git: frozenset[str] | None = None  # ids and names of the Clusters git names at the commit
    roster: tuple[tuple[str, str], ...] = ()  # (spec.id, metadata.name) of the Clusters git names at the commit

    @property
    def time(self) -> int:
        c = self.commit
        return c.time if isinstance(c, Commit) else c.revision.time

    @property
    def date(self) -> str:
        return iso_date(self.time)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted({d.key.name for d in self.changes}))


# -- merging and diffing (pure) ------------------------------------------------------------------


def _order(rec: RecordSet) -> tuple[int, int, str, tuple[str, ...]]:
    return (rec.ttl, -1 if rec.weight is None else rec.weight, rec.geo or "", rec.values)


def merge(per_cluster: Iterable[tuple[str, Iterable[RecordSet]]]) -> tuple[Merged, ...]:
    """Per key: multi-value records without a set identifier united (per TTL and routing),
    everything else one record; distinct contents are kept as conflicting variants."""
    by_key: dict[RecordKey, dict[RecordSet, tuple[RecordSet, set[str]]]] = {}
    for cluster, records in per_cluster:
        for rec in records:
            unite = rec.type in MULTI_VALUE_TYPES and not rec.set_id
            shape = replace(rec, values=()) if unite else rec
            variants = by_key.setdefault(rec.key, {})
            have = variants.get(shape)
            if have is None:
                variants[shape] = (rec, {cluster})
            else:
                merged = have[0].with_values(set(have[0].values) | set(rec.values)) if unite else have[0]
                variants[shape] = (merged, have[1] | {cluster})
    out: list[Merged] = []
    for key in sorted(by_key):
        found = sorted(by_key[key].values(), key=lambda v: _order(v[0]))
        out.append(Merged(key, tuple(r for r, _ in found), tuple(tuple(sorted(o)) for _, o in found)))
    return tuple(out)


def diff(old: Sequence[Merged], new: Sequence[Merged]) -> tuple[RecordDiff, ...]:
    before = {m.key: m for m in old}
    after = {m.key: m for m in new}
    out: list[RecordDiff] = []
    for key in sorted(before.keys() | after.keys()):
        was, now = before.get(key), after.get(key)
        if was is None:
            out.append(RecordDiff("+", key, None, now))
        elif now is None:
            out.append(RecordDiff("-", key, was, None))
        elif was != now:
            out.append(RecordDiff("~", key, was, now))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Query:
    """NAME (its host family), or VALUE: an address or target; ``names`` the record names that
    held VALUE somewhere in the walk (the second pass follows those names)."""

    text: str
    by_value: bool = False
    names: frozenset[str] = frozenset()

    def wants(self, rec: RecordSet) -> bool:
        if self.by_value:
            return rec.name in self.names
        return root_host_of(rec.name) == root_host_of(self.text)

    def holds(self, rec: RecordSet) -> bool:
        return any(canonical_value(v) == self.text for v in rec.values)


def canonical_value(text: str) -> str:
    """A value as compared: an address in its canonical form (``2001:DB8:0::10`` is
    ``2001:db8::10``), a name lower-case without the final dot."""
    bare = text.strip().strip('"')
    try:
        return str(ipaddress.ip_address(bare))
    except ValueError:
        return bare.lower().rstrip(".")


def is_value(text: str) -> bool:
    """An IP address is searched as a value; anything else as a name first."""
    try:
        ipaddress.ip_address(text.strip())
    except ValueError:
        return False
    return True


def _active(state: DesiredState, zone: Zone, cluster: Cluster) -> bool:
    """Whether ``cluster`` publishes in ``zone`` under git's ActiveGroups, as the agents decide
    (`gitdns.core.groups.decide` with no higher serial in the zone; `is_active`)."""
    groups = state.groups_for_zone(zone.name)
    active = decide(groups, ZoneGroups(None, None, None), zone.domain).active
    return is_active(cluster.group, active)


def _groups_note(state: DesiredState, zone: Zone) -> str:
    groups = state.groups_for_zone(zone.name)
    if groups is None:
        return "every group"
    return f"serial {groups.serial} [{', '.join(sorted(groups.groups))}]" if groups.groups else \
        f"serial {groups.serial} [] (every group)"


def zone_records(state: DesiredState, zone: Zone, keep: Callable[[RecordSet], bool]) -> tuple[Merged, ...]:
    per_cluster = []
    for cluster in state.clusters:
        if zone not in builder.zones_for_cluster(state, cluster) or not _active(state, zone, cluster):
            continue
        records = builder.desired_for_zone(state, cluster, zone)
        per_cluster.append((cluster.name, [r for r in records if keep(r)]))
    return merge(per_cluster)


def snapshot(desired: Desired, name: str | Query, fallback_zone: str = "") -> Snapshot:
    """The query's merged records in ``desired`` (inactive groups publish nothing); with NAME,
    ``fallback_zone`` (metadata.name of the zone that held NAME last time) is judged held when
    this revision lost the zone to a broken file."""
    query = name if isinstance(name, Query) else Query(normalize_name(name))
    state = desired.state
    if query.by_value:
        held = blocked_zones(desired.problems, [z.name for z in state.zones])
        if any(p.blocks_all for p in desired.problems):
            return Snapshot("", "", (), tuple(p.format() for p in desired.problems if p.blocks_all))
        # a zone holding a name followed that does not validate here is held, as by name: the
        # agents keep its last valid revision (its records are not removed)
        stuck = [z for z in state.zones if z.name in held and any(state.zone_for_host(n) is z for n in query.names)]
        if stuck:
            names = {z.name for z in stuck}
            return Snapshot(", ".join(sorted(z.domain for z in stuck)), "", (),
                            tuple(p.format() for p in desired.problems if p.blocks_all or names & set(p.zones)))
        found: list[Merged] = []
        notes: list[str] = []
        domains: list[str] = []
        for zone in state.zones:
            if zone.name in held:
                continue
            got = zone_records(state, zone, query.wants)
            # the zone's active groups while it holds a name that held VALUE (also when a switch
            # has just taken VALUE away: the switch is the reason)
            if got or any(state.zone_for_host(n) is zone for n in query.names):
                notes.append(f"{zone.domain}: active groups {_groups_note(state, zone)}")
                domains.append(zone.domain)
            found.extend(got)
        return Snapshot(", ".join(sorted(domains)), "", tuple(sorted(found, key=lambda m: m.key)), (), tuple(notes))
    found_zone = state.zone_for_host(query.text)
    zone_name = found_zone.name if found_zone is not None else fallback_zone
    if zone_name:
        known = [z.name for z in state.zones] + [zone_name]
        if zone_name in blocked_zones(desired.problems, known):
            problems = tuple(p.format() for p in desired.problems if p.blocks_all or zone_name in p.zones)
            return Snapshot(found_zone.domain if found_zone is not None else "", zone_name, (), problems)
    if found_zone is None:
        return Snapshot("", "")
    return Snapshot(found_zone.domain, found_zone.name, zone_records(state, found_zone, query.wants), (),
                    (f"active groups {_groups_note(state, found_zone)}",))


def holders(desired: Desired, query: Query) -> set[str]:
    """The record names holding VALUE in ``desired`` (every zone, every active cluster)."""
    state = desired.state
    out: set[str] = set()
    for zone in state.zones:
        for m in zone_records(state, zone, query.holds):
            out.add(m.key.name)
    return out
