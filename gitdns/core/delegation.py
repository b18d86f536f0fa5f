"""Delegation through git (Kuadrant's "Cluster Aware DNSRecord Delegation" RFC, carried over the
status branches): what a primary publishes for remotes.

A remote agent holds no provider credentials: it builds and health-checks its own records and
puts them on its status branch (``zones/<zone>.yaml`` → ``endpoints``).  A primary reads every
status branch and, per zone, turns them into ONE record set it publishes under its own owner id:

1. **Who is a remote**: a Cluster in git with ``mode: remote``, or whose status says it runs as
   one (a ``--mode`` override).  A status branch of a cluster git does not name is ignored.
2. **Fresh or stale**: a remote whose status heartbeat is older than ``stale_after`` of its poll
   intervals is withdrawn — unless that would leave a name with nothing at all (fail open: its
   last values stay for that name).
3. **Checked against git**: a remote may publish only what git lets it build: every record's key
   must be one its Cluster yields in git, and its values a subset of the values git gives it
   (health may remove values or set a weighted row to weight 0, nothing more).  Routing fields
   (TTL, weight, geo) come from git, so a remote cannot re-route a host; an unknown name or value
   is refused alone, the remote's other records merge.
4. **Groups**: a remote in a failover group that is not active contributes nothing (the CoreDNS
   considerations of Kuadrant's "DNS Failover" proposal: the primary applies the group filter).
5. **Merge**: values of one key are united; a name claimed as a CNAME by one cluster and
   as address records by another is a conflict: the side already published (``previous``) keeps
   it, else the primary's own records, else the cluster id sorting first; the loser is reported.

Pure: status documents in, records and verdicts out.

**CoreDNS primaries** (issue 7 item 5, docs/coredns-primaries.md).  A Zone whose provider is
``local`` is *served by primaries* as soon as one Cluster in git with ``mode: primary`` declares
``spec.nameserver``: every primary keeps its own store of it and serves its rendered views.
Every primary adds to its intent (`primaries_records`):

* in a served zone: the apex NS listing EVERY git primary's nameserver (sorted) and A/AAAA
  glue for the nameserver names inside the zone (`nameserver_records`);
* in the closest enclosing Zone in git of a served zone (any provider): ``<zone> NS`` with the
  same names and glue for the names inside that parent (`delegation_records`).

All primaries compute the same records from git, so their stores and the parent hold one
content; a primary removed from git drops out of every NS set, and the claims it left in a
primary's store or the parent are retired (`former_primaries`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gitdns.core import builder
from gitdns.core.model import Cluster, DesiredState, Mode, Nameserver, Zone
from gitdns.core.records import RecordKey, RecordSet, in_zone, normalize_name
from gitdns.core.registry import decode_entries

STATE_MERGED = "merged"  # fresh, every record accepted
STATE_PARTIAL = "partial"  # fresh, some records refused
STATE_STALE = "stale"  # heartbeat too old: withdrawn
STATE_KEPT = "stale-kept"  # stale, but some of its values stay (fail open)
STATE_INACTIVE = "inactive"  # its failover group is not active
STATE_MISSING = "missing"  # no status for this zone (never pushed, or branch gone)


@dataclass(frozen=True, slots=True)
class Payload:
    """One remote's endpoints for one zone, as its status branch says."""

    cluster_id: str
    records: tuple[RecordSet, ...]
    heartbeat: float  # seconds since the epoch, rounded by the remote
    poll_interval: float  # the remote's poll interval, seconds
    revision: str | None = None  # the desired revision the remote built them from
    mode: str = "remote"


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the primary did with one remote's payload."""

    cluster_id: str
    state: str
    accepted: int = 0
    refused: tuple[str, ...] = ()
    heartbeat: float = 0.0
    revision: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"state": self.state, "accepted": self.accepted, "refused": list(self.refused),
                "heartbeat": int(self.heartbeat), "revision": self.revision}


@dataclass(frozen=True, slots=True)
class Merged:
    records: tuple[RecordSet, ...]
    verdicts: tuple[Verdict, ...]
    conflicts: tuple[str, ...] = ()


@dataclass(slots=True)
class Side:
    cluster_id: str
    records: list[RecordSet] = field(default_factory=list)


# --- reading payloads from status documents --------------------------------------------------


def record_from_dict(doc: Mapping[str, Any]) -> RecordSet:
    """The inverse of `gitdns.core.plan.fmt.record_dict`; raises ValueError on a bad document."""
    try:
        values = doc["values"]
        if not isinstance(values, list):
            raise ValueError("values is not a list")
        weight = doc.get("weight")
        geo = doc.get("geo")
        return RecordSet(normalize_name(str(doc["name"])), str(doc["type"]).upper(), int(doc["ttl"]),
                         tuple(str(v) for v in values), str(doc.get("setIdentifier") or ""),
                         None if weight is None else int(weight), None if geo is None else str(geo))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a record: {exc}") from None


def payload_from_status(cluster_id: str, summary: Mapping[str, Any], zone_doc: Mapping[str, Any] | None
                        ) -> tuple[Payload | None, list[str]]:
    """A remote's payload for one zone (None when its zone document carries no endpoints)."""
    problems: list[str] = []
    if zone_doc is None or not isinstance(zone_doc.get("endpoints"), list):
        return None, problems
    records: list[RecordSet] = []
    for i, item in enumerate(zone_doc["endpoints"]):
        try:
            if not isinstance(item, Mapping):
                raise ValueError("not a mapping")
            records.append(record_from_dict(item))
        except ValueError as exc:
            problems.append(f"endpoints[{i}]: {exc}")
    try:
        heartbeat = float(summary.get("heartbeat") or 0)
        poll = float(summary.get("pollInterval") or 0)
    except (TypeError, ValueError):
        heartbeat, poll = 0.0, 0.0
    revision = zone_doc.get("appliedRevision")
    return Payload(cluster_id, tuple(records), heartbeat, poll, str(revision) if revision else None,
                   str(summary.get("mode") or "remote")), problems


# --- who, fresh, allowed -----------------------------------------------------------------------


def remotes_of(state: DesiredState, status_modes: Mapping[str, str], own_id: str) -> list[Cluster]:
    """Clusters a primary publishes for: remote in git, or running as remote (their status)."""
    return [c for c in state.clusters if c.id != own_id and (
        c.mode is Mode.REMOTE or status_modes.get(c.id) == Mode.REMOTE.value)]


def is_stale(payload: Payload, now: float, stale_after: float, default_poll: float) -> bool:
    poll = payload.poll_interval if payload.poll_interval > 0 else default_poll
    return now - payload.heartbeat > stale_after * poll


def check(state: DesiredState, cluster: Cluster, zone: Zone, records: Iterable[RecordSet],
          weight_zero: bool = True) -> tuple[list[RecordSet], list[str]]:
    """The records git allows ``cluster`` in ``zone`` (routing from git), and what was refused.
    A weighted row the remote set to weight 0 (all its targets unhealthy) keeps weight 0, or
    is withdrawn where the provider cannot publish weight 0 (``weight_zero`` False)."""
    allowed = {r.key: r for r in builder.desired_for_zone(state, cluster, zone)}
    accepted: list[RecordSet] = []
    refused: list[str] = []
    for rec in records:
        want = allowed.get(rec.key)
        if want is None:
            refused.append(f"{rec.key}: not a record Cluster {cluster.name} publishes in git")
            continue
        extra = sorted(set(rec.values) - set(want.values))
        if extra:
            refused.append(f"{rec.key}: value(s) {', '.join(extra)} not declared for Cluster {cluster.name}")
            continue
        if not rec.values:
            continue
        if rec.weight == 0 and want.weight is not None:  # health withdrew the row
            if weight_zero:
                accepted.append(replace(want, values=rec.values, weight=0))
            continue
        accepted.append(replace(want, values=rec.values))
    return accepted, refused


# --- the merge --------------------------------------------------------------------------------


def _conflicting(a: Iterable[RecordSet], b: Iterable[RecordSet]) -> set[str]:
    """Names where one side has a CNAME and the other any other type."""
    def kinds(recs: Iterable[RecordSet]) -> dict[str, set[bool]]:
        out: dict[str, set[bool]] = {}
        for r in recs:
            out.setdefault(r.name, set()).add(r.type == "CNAME")
        return out
    ka, kb = kinds(a), kinds(b)
    return {n for n in ka.keys() & kb.keys() if ka[n] | kb[n] == {True, False}}


def _order(sides: Sequence[Side], own_id: str, previous: Mapping[RecordKey, RecordSet]) -> list[Side]:
    def rank(side: Side) -> tuple[int, int, str]:
        published = sum(1 for r in side.records if r.key in previous)
        return (0 if side.cluster_id == own_id else 1, -published, side.cluster_id)
    return sorted(sides, key=rank)


def merge_sides(sides: Sequence[Side], own_id: str, previous: Mapping[RecordKey, RecordSet]
                ) -> tuple[tuple[RecordSet, ...], list[str]]:
    kept: list[RecordSet] = []
    conflicts: list[str] = []
    for side in _order(sides, own_id, previous):
        clash = _conflicting(kept, side.records)
        for name in sorted(clash):
            conflicts.append(f"{name}: {side.cluster_id} publishes a different record type than "
                             "what is already merged; its records for the name are left out")
        kept.extend(r for r in side.records if r.name not in clash)
    return builder.merge_records(kept), conflicts


def merge(*, own: Cluster | None, own_records: Sequence[RecordSet], state: DesiredState, zone: Zone,
          payloads: Mapping[str, Payload], remotes: Sequence[Cluster], now: float, stale_after: float,
          default_poll: float, active: frozenset[str] | None = None,
          previous: Sequence[RecordSet] = (), weight_zero: bool = True) -> Merged:
    """The record set a primary publishes for ``zone``: its own plus every accepted remote's."""
    prev = {r.key: r for r in previous}
    fresh: list[Side] = []
    stale: list[tuple[Cluster, Payload, list[RecordSet], list[str]]] = []
    verdicts: dict[str, Verdict] = {}
    for remote in remotes:
        payload = payloads.get(remote.id)
        if payload is None:
            verdicts[remote.id] = Verdict(remote.id, STATE_MISSING)
            continue
        if active is not None and remote.group and remote.group not in active:
            verdicts[remote.id] = Verdict(remote.id, STATE_INACTIVE, heartbeat=payload.heartbeat,
                                          revision=payload.revision)
            continue
        accepted, refused = check(state, remote, zone, payload.records, weight_zero)
        if is_stale(payload, now, stale_after, default_poll):
            stale.append((remote, payload, accepted, refused))
            continue
        fresh.append(Side(remote.id, accepted))
        verdicts[remote.id] = Verdict(remote.id, STATE_PARTIAL if refused else STATE_MERGED, len(accepted),
                                      tuple(refused), payload.heartbeat, payload.revision)
    sides = ([Side(own.id, list(own_records))] if own is not None else []) + fresh
    records, conflicts = merge_sides(sides, own.id if own else "", prev)
    for remote, payload, accepted, refused in stale:  # fail open: keep what alone answers a host
        keep = _last_paths(state, remote, zone, accepted, records)
        if keep:
            records, more = merge_sides([Side("", list(records)), Side(remote.id, keep)], "", prev)
            conflicts.extend(more)
        verdicts[remote.id] = Verdict(remote.id, STATE_KEPT if keep else STATE_STALE, len(keep), tuple(refused),
                                      payload.heartbeat, payload.revision)
    return Merged(records, tuple(verdicts[k] for k in sorted(verdicts)), tuple(conflicts))


def _last_paths(state: DesiredState, cluster: Cluster, zone: Zone, accepted: Sequence[RecordSet],
                merged: Sequence[RecordSet]) -> list[RecordSet]:
    """A stale remote's records that are the only answer for one of its hosts: the host names no
    one else answers, and every name their CNAME chains reach within the remote's records."""
    covered = {r.name for r in merged}
    by_name: dict[str, list[RecordSet]] = {}
    for rec in accepted:
        by_name.setdefault(rec.name, []).append(rec)
    todo = [h.host for h in builder.build_hosts(state, cluster, zone) if h.host not in covered]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name in covered:
            continue
        seen.add(name)
        for rec in by_name.get(name, ()):
            if rec.type == "CNAME":
                todo.extend(rec.values)
    return [r for n in sorted(seen) for r in by_name.get(n, ())]


def zones_for_primary(state: DesiredState, own: Cluster | None, remotes: Sequence[Cluster]) -> list[Zone]:
    """Zones a primary reconciles: its own and every remote's; with nameservers declared, also
    every zone served by primaries and their parent zones (`nameserver_zones`)."""
    names: dict[str, Zone] = {}
    for cluster in ([own] if own is not None else []) + list(remotes):
        for zone in builder.zones_for_cluster(state, cluster):
            names.setdefault(zone.name, zone)
    for zone in nameserver_zones(state) if own is not None else ():
        names.setdefault(zone.name, zone)
    return [names[n] for n in sorted(names)]


# --- CoreDNS primaries: nameservers, apex NS, the parent's delegation ------------------------

SERVED_PROVIDER = "local"  # zones of this provider type are served from rendered views
NAMESERVER_TTL = 300  # apex NS, delegation NS and glue


def primary_nameservers(state: DesiredState) -> tuple[Nameserver, ...]:
    """Every git primary's nameserver, one per name (addresses united), sorted by name."""
    by_name: dict[str, set[str]] = {}
    for cluster in state.clusters:
        if cluster.mode is Mode.PRIMARY and cluster.nameserver is not None:
            by_name.setdefault(cluster.nameserver.name, set()).update(cluster.nameserver.addresses)
    return tuple(Nameserver(name, tuple(sorted(by_name[name]))) for name in sorted(by_name))


def is_served(state: DesiredState, zone: Zone) -> bool:
    """Served by primaries: provider ``local`` and at least one git primary has a nameserver."""
    return zone.provider.type == SERVED_PROVIDER and bool(primary_nameservers(state))


def served_zones(state: DesiredState) -> list[Zone]:
    if not primary_nameservers(state):
        return []
    return sorted((z for z in state.zones if z.provider.type == SERVED_PROVIDER), key=lambda z: z.domain)


def parent_zone(state: DesiredState, zone: Zone) -> Zone | None:
    """The closest enclosing Zone in git (None for a zone with no parent there)."""
    _, dot, rest = zone.domain.partition(".")
    return state.zone_for_host(rest) if dot else None


def nameserver_zones(state: DesiredState) -> list[Zone]:
    """The zones primaries publish nameserver records in: served zones and their parents."""
    out: dict[str, Zone] = {}
    for zone in served_zones(state):
        out.setdefault(zone.name, zone)
        parent = parent_zone(state, zone)
        if parent is not None:
            out.setdefault(parent.name, parent)
    return [out[n] for n in sorted(out)]


def _glue(state: DesiredState, nameservers: Sequence[Nameserver], zones: Collection[str]) -> list[RecordSet]:
    """A/AAAA for the nameserver names whose closest Zone in git is one of ``zones``."""
    out: list[RecordSet] = []
    for ns in nameservers:
        home = state.zone_for_host(ns.name)
        if home is None or home.domain not in zones:
            continue
        for rtype, values in (("A", [a for a in ns.addresses if ":" not in a]),
                              ("AAAA", [a for a in ns.addresses if ":" in a])):
            if values:
                out.append(RecordSet(ns.name, rtype, NAMESERVER_TTL, tuple(values)))
    return out


def _ns(name: str, nameservers: Sequence[Nameserver]) -> RecordSet:
    return RecordSet(name, "NS", NAMESERVER_TTL, tuple(ns.name for ns in nameservers))


def nameserver_records(state: DesiredState, zone: Zone) -> tuple[RecordSet, ...]:
    """A served zone's apex NS (every git primary's nameserver) and glue for the names inside
    it; nothing for a zone not served by primaries."""
    if not is_served(state, zone):
        return ()
    nameservers = primary_nameservers(state)
    return builder.merge_records([_ns(zone.domain, nameservers), *_glue(state, nameservers, {zone.domain})])


def delegation_records(state: DesiredState, zone: Zone) -> tuple[RecordSet, ...]:
    """In ``zone``: ``<child> NS`` to every primary for each served zone whose closest parent
    in git is ``zone``, plus glue for the names inside ``zone`` or below the cut."""
    nameservers = primary_nameservers(state)
    out: list[RecordSet] = []
    for child in served_zones(state):
        parent = parent_zone(state, child)
        if parent is None or parent.domain != zone.domain:
            continue
        out.append(_ns(child.domain, nameservers))
        out.extend(_glue(state, nameservers, {zone.domain, child.domain}))
    return builder.merge_records(out)


def primaries_records(state: DesiredState, zone: Zone) -> tuple[RecordSet, ...]:
    """What every primary adds to its intent in ``zone`` (the merge step)."""
    return builder.merge_records([*nameserver_records(state, zone), *delegation_records(state, zone)])


def nameserver_keys(state: DesiredState, zone: Zone) -> frozenset[RecordKey]:
    """The NS keys primaries own in ``zone``: its apex when served, each served child's cut."""
    keys = {RecordKey(zone.domain, "NS")} if is_served(state, zone) else set()
    keys |= {RecordKey(child.domain, "NS") for child in served_zones(state)
             if (parent := parent_zone(state, child)) is not None and parent.domain == zone.domain}
    return frozenset(keys)


def retire_keys(state: DesiredState, zone: Zone) -> frozenset[RecordKey]:
    """The NS keys primaries own or owned in ``zone``: `nameserver_keys`, but also when no
    primary declares a nameserver any more (the last one's claims must still go)."""
    local = [z for z in state.zones if z.provider.type == SERVED_PROVIDER]
    keys = {RecordKey(zone.domain, "NS")} if zone.provider.type == SERVED_PROVIDER else set()
    keys |= {RecordKey(child.domain, "NS") for child in local
             if (parent := parent_zone(state, child)) is not None and parent.domain == zone.domain}
    return frozenset(keys)


def former_primaries(state: DesiredState, zone: Zone, records: Iterable[RecordSet], own_id: str) -> tuple[str, ...]:
    """Owners whose claims a primary retires from ``zone`` (read whole in ``records``):

    * in a served zone (a primary's own store, written only by it for itself and its peers):
      every owner claiming the apex NS that git does not name as a primary — a primary removed
      from git or moved to another mode;
    * in a parent zone (which other clusters may share): owners claiming a served child's NS
      that git does not name at all — a removed primary that is not there to withdraw itself.
    """
    keys = retire_keys(state, zone)
    if not keys:
        return ()
    primaries = {c.id for c in state.clusters if c.mode is Mode.PRIMARY}
    known = {c.id for c in state.clusters}
    apex = RecordKey(zone.domain, "NS")
    out: set[str] = set()
    for rec in records:
        if rec.type != "TXT" or not in_zone(rec.name, zone.domain):
            continue
        for entry in decode_entries(rec):  # a legacy joint TXT names several owners
            if entry.key not in keys or entry.owner == own_id:
                continue
            if (entry.key == apex and entry.owner not in primaries) or entry.owner not in known:
                out.add(entry.owner)
    return tuple(sorted(out))
