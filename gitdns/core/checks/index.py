"""What every check looks up: the state indexed once (`Index`), and how a problem is made.

A check is a function from an `Index` to problems (`gitdns.core.validate.CHECKS` lists them);
each problem names the file, YAML path, what is wrong, what would be right and the zones it
blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TypeVar, cast

from gitdns.core.addresses import host_error
from gitdns.core.model import (
    ActiveGroups,
    Cluster,
    DesiredState,
    DNSPolicy,
    NodePool,
    Origin,
    RecordSetDoc,
    Tenant,
    Zone,
)
from gitdns.core.model.build import ZoneLookup
from gitdns.core.problems import Path, Problem
from gitdns.core.reach import Network

Obj = Zone | Cluster | DNSPolicy | RecordSetDoc | Tenant | NodePool | ActiveGroups



class Site:
    """Where a host is written: a listener in a Cluster (its gateway's and its own index), or an
    entry of a policy's hosts (its path).  Made for every listener, so kept small: the path of a
    listener is spelt out only when asked (a problem names it)."""

    __slots__ = ("_at", "origin")

    def __init__(self, origin: Origin, at: Path | tuple[int, int]) -> None:
        self.origin = origin
        self._at = at  # a path, or (gateway index, listener index)

    @property
    def path(self) -> Path:
        at = self._at
        if len(at) == 2 and isinstance(at[0], int):
            return ("spec", "gateways", at[0], "listeners", at[1], "hostname")
        return at


_KINDS = ("zones", "clusters", "policies", "record_sets", "tenants", "node_pools", "active_groups")
_SOURCES = (*_KINDS, "revision", "rejected", "probe_ranges")  # everything a check may read
_METHODS = {"zone": ("zones",), "zone_for_host": ("zones",), "cluster": ("clusters",),
            "groups_for_zone": ("active_groups",)}  # DesiredState's methods and the fields they read


class CheckMemo:
    """What checks and the indexes they share found in earlier validations, each with what it
    read (`Index.derived`): reused while those are the very same objects (model objects are
    frozen, and a file whose blob is unchanged gives the same ones: `gitdns.core.blobcache`)."""

    __slots__ = ("entries", "host_errors", "zones")

    def __init__(self) -> None:
        self.entries: dict[str, tuple[tuple[tuple[str, object], ...], object]] = {}
        # the zones of an object that names its hosts itself, by the object and the Zones it was read against
        self.zones: dict[int, tuple[Obj, tuple[Zone, ...], tuple[str, ...]]] = {}
        self.host_errors: dict[str, str | None] = {}  # `addresses.host_error` of a name: a function of it alone

    def bounded(self) -> None:
        """Keep the per-object and per-name tables from growing without end across trees."""
        if len(self.zones) > _MAX_KEPT:
            self.zones.clear()
        if len(self.host_errors) > _MAX_KEPT:
            self.host_errors.clear()


_MAX_KEPT = 1 << 18


class _StateView:
    """The state as checks see it (`Index.state`): every field or method read is recorded."""

    __slots__ = ("_ix",)

    def __init__(self, ix: Index) -> None:
        self._ix = ix

    def __getattr__(self, name: str) -> object:
        ix = self._ix
        ix._touch(_METHODS.get(name) or ((name,) if name in _KINDS or name == "revision" else _SOURCES))
        return getattr(ix._state, name)


class Index:
    """The state with everything a check looks up, each built once (and, with a `CheckMemo`,
    kept across validations while what it was built from is unchanged).

    Whatever a check or an index reads of the state goes through here and is recorded
    (`derived`), so that a result is reused only when everything it read is the same."""

    def __init__(self, state: DesiredState, rejected: Collection[tuple[str, str]] = (),
                 probe_ranges: Sequence[Network] = (), memo: CheckMemo | None = None) -> None:
        self._state = state
        self._probe_ranges = tuple(probe_ranges)  # the operator's --probe-allow-ranges, when validate is told
        self._rejected = frozenset(rejected)
        self._rejected_kinds = {kind for kind, _ in self._rejected}
        self._memo = memo if memo is not None else CheckMemo()
        self._frames: list[set[str]] = []  # what each computation under way has read
        self._done: dict[str, tuple[tuple[str, ...], object]] = {}  # derived in this validation
        self._zone_cache: dict[int, tuple[str, ...]] = {}
        self.state = cast(DesiredState, _StateView(self))

    # --- what was read, and results kept by it -------------------------------------------------

    def _touch(self, sources: Iterable[str]) -> None:
        for frame in self._frames:
            frame.update(sources)

    def _value(self, source: str) -> object:
        if source == "rejected":
            return self._rejected
        if source == "probe_ranges":
            return self._probe_ranges
        return getattr(self._state, source)

    def _same(self, seen: tuple[tuple[str, object], ...]) -> bool:
        for source, before in seen:
            now = self._value(source)
            if source in _KINDS:
                assert isinstance(now, tuple) and isinstance(before, tuple)
                if not _same_objects(now, before):
                    return False
            elif now != before:
                return False
        return True

    def derived(self, key: str, build: Callable[[Index], T]) -> T:
        """``build(self)``, once per validation, and reused from the memo while everything it
        read of the state is the same objects as when it was built."""
        done = self._done.get(key)
        if done is None:
            kept = self._memo.entries.get(key)
            if kept is not None and self._same(kept[0]):
                done = tuple(s for s, _ in kept[0]), kept[1]
            else:
                frame: set[str] = set()
                self._frames.append(frame)
                try:
                    value: object = build(self)
                finally:
                    self._frames.pop()
                seen = tuple((s, self._value(s)) for s in sorted(frame))
                self._memo.entries[key] = (seen, value)
                done = tuple(frame), value
            self._done[key] = done
        self._touch(done[0])
        return cast(T, done[1])

    def reading(self, *sources: str) -> DesiredState:
        """The state itself, for a caller that reads only ``sources`` of it (recorded as read):
        where a loop would go through `state`'s recording view many times."""
        self._touch(sources)
        return self._state

    # --- the indexes -------------------------------------------------------------------------

    @property
    def probe_ranges(self) -> tuple[Network, ...]:
        self._touch(("probe_ranges",))
        return self._probe_ranges

    @property
    def rejected(self) -> frozenset[tuple[str, str]]:
        self._touch(("rejected",))
        return self._rejected

    @property
    def rejected_kinds(self) -> set[str]:
        self._touch(("rejected",))
        return self._rejected_kinds

    @property
    def zones(self) -> dict[str, Zone]:
        return self.derived("ix.zones", lambda ix: {z.name: z for z in reversed(ix.state.zones)})

    @property
    def lookup(self) -> ZoneLookup:
        return self.derived("ix.lookup", lambda ix: ZoneLookup((z.name, z.domain) for z in ix.state.zones))

    @property
    def host_clusters(self) -> dict[str, list[Cluster]]:
        return self.derived("ix.gateways", _gateways)[0]

    @property
    def gateway_sites(self) -> dict[tuple[str, str], list[tuple[str, Site]]]:
        return self.derived("ix.gateways", _gateways)[1]

    @property
    def policy_hosts(self) -> list[list[tuple[str, Site]]]:
        return self.derived("ix.policies", _policies)[0]

    @property
    def host_policies(self) -> dict[str, list[DNSPolicy]]:
        return self.derived("ix.policies", _policies)[2]

    def clusters_of(self, policy_index: int) -> list[Cluster]:
        hosts = dict.fromkeys(h for h, _ in self.policy_hosts[policy_index])
        host_clusters = self.host_clusters
        return list({id(c): c for h in hosts for c in host_clusters.get(h, ())}.values())

    def host_error(self, name: str) -> str | None:
        """`gitdns.core.addresses.host_error` of ``name``, kept across validations (it reads
        nothing else)."""
        known = self._memo.host_errors
        if name in known:
            return known[name]
        wrong = known[name] = host_error(name)
        return wrong

    def zones_of(self, obj: Obj) -> tuple[str, ...]:
        """The zones (metadata.name) a problem on ``obj`` blocks."""
        key = id(obj)
        found = self._zone_cache.get(key)
        if found is None and isinstance(obj, _SELF_NAMING):  # its own hosts and the Zones: kept across validations
            zones = self._state.zones
            kept = self._memo.zones.get(key)
            self._touch(("zones",))
            if kept is not None and kept[0] is obj and _same_objects(kept[1], zones):
                found = self._zone_cache[key] = kept[2]
            else:
                found = self._zone_cache[key] = tuple(sorted(self._zones_of(obj)))
                self._memo.zones[key] = (obj, zones, found)
        elif found is None:
            found = self._zone_cache[key] = tuple(sorted(self._zones_of(obj)))
        else:  # what finding them read, read again
            self._touch(("zones",))
            if isinstance(obj, DNSPolicy):
                self._touch(("policies", "clusters"))
            elif isinstance(obj, NodePool):
                self._touch(("tenants",))
        return found

    def _zones_of(self, obj: Obj) -> set[str]:
        if isinstance(obj, Zone):
            self._touch(("zones",))
            return {obj.name}
        if isinstance(obj, ActiveGroups):
            self._touch(("zones",))
            return {obj.zone}
        if isinstance(obj, Cluster):
            hosts: Iterable[str] = (ls.hostname for g in obj.gateways for ls in g.listeners)
        elif isinstance(obj, DNSPolicy):
            hosts = (h for h, _ in self.policy_hosts[self.derived("ix.policies", _policies)[1][id(obj)]])
        elif isinstance(obj, RecordSetDoc):
            self._touch(("zones",))
            return {obj.zone} if obj.zone else set(self.lookup.zones_of(r.name for r in obj.records))
        elif isinstance(obj, Tenant):
            hosts = obj.domains
        else:
            hosts = (d for t in self.state.tenants if t.node_pool == obj.name for d in t.domains)
        return set(self.lookup.zones_of(hosts))

    def provider(self, zone_name: str) -> str:
        return self.zones[zone_name].provider.type


T = TypeVar("T")
_SELF_NAMING = (Zone, ActiveGroups, Cluster, RecordSetDoc, Tenant)  # their zones read them and the Zones alone


def _same_objects(now: tuple[object, ...], before: tuple[object, ...]) -> bool:
    return len(now) == len(before) and all(a is b for a, b in zip(now, before, strict=True))


def _gateways(ix: Index) -> tuple[dict[str, list[Cluster]], dict[tuple[str, str], list[tuple[str, Site]]]]:
    host_clusters: dict[str, list[Cluster]] = {}
    gateway_sites: dict[tuple[str, str], list[tuple[str, Site]]] = {}
    for cluster in ix.state.clusters:
        origin = cluster.origin
        for gi, gw in enumerate(cluster.gateways):
            if not gw.listeners:
                continue
            sites = gateway_sites.setdefault((gw.name, gw.namespace), [])
            for li, listener in enumerate(gw.listeners):
                sites.append((listener.hostname, Site(origin, (gi, li))))
                found = host_clusters.get(listener.hostname)
                if found is None:
                    host_clusters[listener.hostname] = [cluster]
                else:
                    found.append(cluster)
    return host_clusters, gateway_sites


def _policies(ix: Index) -> tuple[list[list[tuple[str, Site]]], dict[int, int], dict[str, list[DNSPolicy]]]:
    """Each policy's hosts with where they are written; the policies' places; each host's policies."""
    policies = ix.state.policies
    gateway_sites = ix.gateway_sites
    covered_all: list[list[tuple[str, Site]]] = []
    for policy in policies:
        target = policy.target
        out = [(h, Site(policy.origin, ("spec", "targetRef", "hosts", i))) for i, h in enumerate(target.hosts)]
        if target.gateway is not None:
            for (name, namespace), sites in gateway_sites.items():
                if name == target.gateway and target.namespace in (None, namespace):
                    out.extend(sites)
        covered_all.append(out)
    host_policies: dict[str, list[DNSPolicy]] = {}
    for policy, covered in zip(policies, covered_all, strict=True):
        for host in dict.fromkeys(h for h, _ in covered):
            host_policies.setdefault(host, []).append(policy)
    return covered_all, {id(p): i for i, p in enumerate(policies)}, host_policies


def problem(origin: Origin, path: Path, message: str, hint: str, zones: Iterable[str], code: str) -> Problem:
    zones = tuple(sorted(set(zones)))
    return Problem(origin.file, path, message, hint=hint, line=origin.line, zones=zones, code=code)


def where(origin: Origin) -> str:
    return f"{origin.file}:{origin.line}" if origin.line else origin.file or "another document"


def on(ix: Index, obj: Obj, path: Path, message: str, hint: str, code: str) -> Problem:
    return problem(obj.origin, path, message, hint, ix.zones_of(obj), code)



def some(names: Iterable[str], limit: int = 10) -> str:
    ordered = sorted(set(names))
    if not ordered:
        return "none"
    more = f" (and {len(ordered) - limit} more)" if len(ordered) > limit else ""
    return ", ".join(ordered[:limit]) + more


def documents_of_files(state: DesiredState, files: Collection[str]) -> dict[str, Held]:
    """For each of ``files``, its documents in ``state``, as (kind, metadata.name), and the zones
    they touch.  For a revision whose ``files`` hold problems, ``state`` being an earlier one: a
    rejected document is read as it is now, and it may have been another document before the
    change (another Zone or Cluster name, another gateway, other hosts)."""
    ix = Index(state)
    found: dict[str, tuple[set[tuple[str, str]], set[str]]] = {file: (set(), set()) for file in files}
    for kind, objs in (("Zone", state.zones), ("Cluster", state.clusters), ("DNSPolicy", state.policies),
                       ("RecordSet", state.record_sets), ("Tenant", state.tenants),
                       ("NodePool", state.node_pools), ("ActiveGroups", state.active_groups)):
        for obj in objs:
            if obj.origin.file in found:
                documents, zones = found[obj.origin.file]
                documents.add((kind, obj.name))
                zones.update(ix.zones_of(obj))
    return {file: (frozenset(documents), frozenset(zones)) for file, (documents, zones) in found.items()}


# (kind, metadata.name) of the documents of a file, and the zones they touch
Held = tuple[frozenset[tuple[str, str]], frozenset[str]]
