"""What every check looks up: the state indexed once (`Index`), and how a problem is made.

A check is a function from an `Index` to problems (`gitdns.core.validate.CHECKS` lists them);
each problem names the file, YAML path, what is wrong, what would be right and the zones it
blocks.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

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
from gitdns.core.modelbuild import ZoneLookup
from gitdns.core.problems import Path, Problem
from gitdns.core.reach import Network

Obj = Zone | Cluster | DNSPolicy | RecordSetDoc | Tenant | NodePool | ActiveGroups



@dataclass(frozen=True, slots=True)
class Site:
    """Where a host is written: a listener in a Cluster, or an entry of a policy's hosts."""

    origin: Origin
    path: Path


class Index:
    """The state with everything a check looks up, each built once."""

    def __init__(self, state: DesiredState, rejected: Collection[tuple[str, str]] = (),
                 probe_ranges: Sequence[Network] = ()) -> None:
        self.state = state
        self.probe_ranges = tuple(probe_ranges)  # the operator's --probe-allow-ranges, when validate is told
        self.rejected = frozenset(rejected)
        self.rejected_kinds = {kind for kind, _ in self.rejected}
        self.zones = {z.name: z for z in reversed(state.zones)}
        self.lookup = ZoneLookup((z.name, z.domain) for z in state.zones)
        self.host_clusters: dict[str, list[Cluster]] = defaultdict(list)
        self.gateway_sites: dict[tuple[str, str], list[tuple[str, Site]]] = defaultdict(list)
        for cluster in state.clusters:
            for gi, gw in enumerate(cluster.gateways):
                for li, listener in enumerate(gw.listeners):
                    path = ("spec", "gateways", gi, "listeners", li, "hostname")
                    site = Site(cluster.origin, path)
                    self.gateway_sites[(gw.name, gw.namespace)].append((listener.hostname, site))
                    self.host_clusters[listener.hostname].append(cluster)
        self.policy_hosts = [self._covered(p) for p in state.policies]
        self._policy_index = {id(p): i for i, p in enumerate(state.policies)}
        self.host_policies: dict[str, list[DNSPolicy]] = defaultdict(list)
        for policy, covered in zip(state.policies, self.policy_hosts, strict=True):
            for host in dict.fromkeys(h for h, _ in covered):
                self.host_policies[host].append(policy)
        self._zone_cache: dict[int, tuple[str, ...]] = {}

    def _covered(self, policy: DNSPolicy) -> list[tuple[str, Site]]:
        target = policy.target
        out = [
            (h, Site(policy.origin, ("spec", "targetRef", "hosts", i))) for i, h in enumerate(target.hosts)
        ]
        if target.gateway is not None:
            for (name, namespace), sites in self.gateway_sites.items():
                if name == target.gateway and target.namespace in (None, namespace):
                    out.extend(sites)
        return out

    def clusters_of(self, policy_index: int) -> list[Cluster]:
        hosts = dict.fromkeys(h for h, _ in self.policy_hosts[policy_index])
        return list({id(c): c for h in hosts for c in self.host_clusters.get(h, ())}.values())

    def zones_of(self, obj: Obj) -> tuple[str, ...]:
        """The zones (metadata.name) a problem on ``obj`` blocks."""
        key = id(obj)
        if key not in self._zone_cache:
            self._zone_cache[key] = tuple(sorted(self._zones_of(obj)))
        return self._zone_cache[key]

    def _zones_of(self, obj: Obj) -> set[str]:
        if isinstance(obj, Zone):
            return {obj.name}
        if isinstance(obj, ActiveGroups):
            return {obj.zone}
        if isinstance(obj, Cluster):
            hosts: Iterable[str] = (ls.hostname for g in obj.gateways for ls in g.listeners)
        elif isinstance(obj, DNSPolicy):
            hosts = (h for h, _ in self.policy_hosts[self._policy_index[id(obj)]])
        elif isinstance(obj, RecordSetDoc):
            return {obj.zone} if obj.zone else set(self.lookup.zones_of(r.name for r in obj.records))
        elif isinstance(obj, Tenant):
            hosts = obj.domains
        else:
            hosts = (d for t in self.state.tenants if t.node_pool == obj.name for d in t.domains)
        return set(self.lookup.zones_of(hosts))

    def provider(self, zone_name: str) -> str:
        return self.zones[zone_name].provider.type


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
