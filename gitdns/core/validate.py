"""Semantic validation of a whole `DesiredState` (ARCHITECTURE.md §2, §4).

`validate` runs every check in `CHECKS` and returns all problems at once.  A check is a small
function from an `Index` (the state with its hosts, gateways and zones looked up once, so
nothing is quadratic) to problems; each problem names the file, YAML path, what is wrong, what
would be right and the zones it blocks.  `check` is the whole pipeline for a tree of files:
load, schema-check, validate, and point every problem at its line.
"""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from gitdns.core.geo import KNOWN_PROVIDERS, PLAIN_PROVIDERS, geo_hint, valid_geo, weight_range
from gitdns.core.loader import LoadResult, ZoneLookup, load
from gitdns.core.locate import refine_lines
from gitdns.core.model import (
    DEFAULT_PROVIDER,
    KINDS,
    ActiveGroups,
    Cluster,
    DesiredState,
    DNSPolicy,
    Mode,
    NodePool,
    Origin,
    RecordSetDoc,
    Strategy,
    Tenant,
    Zone,
)
from gitdns.core.names import MAX_FIRST_LABEL_ON_TXT_ZONES, first_label, short_hash
from gitdns.core.problems import Path, Problem
from gitdns.core.zonecorefile import VIEW_CLIENTS, parse_view_clients

MAX_GROUP_NAME = 16
GROUP_FORBIDDEN = ";&, \"'"
Obj = Zone | Cluster | DNSPolicy | RecordSetDoc | Tenant | NodePool | ActiveGroups


@dataclass(frozen=True, slots=True)
class Site:
    """Where a host is written: a listener in a Cluster, or an entry of a policy's hosts."""

    origin: Origin
    path: Path


class Index:
    """The state with everything a check looks up, each built once."""

    def __init__(self, state: DesiredState, rejected: Collection[tuple[str, str]] = ()) -> None:
        self.state = state
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


def _problem(origin: Origin, path: Path, message: str, hint: str, zones: Iterable[str], code: str) -> Problem:
    zones = tuple(sorted(set(zones)))
    return Problem(origin.file, path, message, hint=hint, line=origin.line, zones=zones, code=code)


def _where(origin: Origin) -> str:
    return f"{origin.file}:{origin.line}" if origin.line else origin.file or "another document"


def _on(ix: Index, obj: Obj, path: Path, message: str, hint: str, code: str) -> Problem:
    return _problem(obj.origin, path, message, hint, ix.zones_of(obj), code)


# --- references and uniqueness ---------------------------------------------------------------


def duplicate_names(ix: Index) -> Iterable[Problem]:
    s = ix.state
    groups = (s.zones, s.clusters, s.policies, s.record_sets, s.tenants, s.node_pools, s.active_groups)
    kinds: Iterable[tuple[str, tuple[Obj, ...]]] = zip(KINDS, groups, strict=True)
    for kind, objs in kinds:
        seen: dict[str, Obj] = {}
        for obj in objs:
            first = seen.setdefault(obj.name, obj)
            if first is not obj:
                message = f"duplicate {kind} name {obj.name!r}, also defined in {_where(first.origin)}"
                zones = ix.zones_of(obj) + ix.zones_of(first)
                hint = f"give every {kind} a unique metadata.name"
                yield _problem(obj.origin, ("metadata", "name"), message, hint, zones, "DuplicateName")


def duplicate_cluster_ids(ix: Index) -> Iterable[Problem]:
    by_id: dict[str, Cluster] = {}
    by_hash: dict[str, Cluster] = {}
    for cluster in ix.state.clusters:
        first = by_id.setdefault(cluster.id, cluster)
        if first is not cluster:
            message = (
                f"cluster id {cluster.id!r} is also the id of Cluster {first.name!r} ({_where(first.origin)})"
            )
            hint = "each Cluster needs its own kube-system namespace UID (gitdns cluster-id prints it)"
            zones = ix.zones_of(cluster) + ix.zones_of(first)
            yield _problem(cluster.origin, ("spec", "id"), message, hint, zones, "DuplicateClusterId")
            continue
        digest = short_hash(cluster.id, 6)
        other = by_hash.setdefault(digest, cluster)
        if other is not cluster:
            message = (
                f"cluster id {cluster.id!r} has the same 6-character hash {digest!r} as Cluster "
                f"{other.name!r} ({_where(other.origin)}), so their klb record names would collide"
            )
            zones = ix.zones_of(cluster) + ix.zones_of(other)
            hint = "re-create one cluster's kube-system namespace to get a new UID"
            yield _problem(cluster.origin, ("spec", "id"), message, hint, zones, "ClusterHashCollision")


def zone_settings(ix: Index) -> Iterable[Problem]:
    known = ", ".join(KNOWN_PROVIDERS)
    policies = {p.name for p in ix.state.policies}
    domains: dict[str, Zone] = {}
    for zone in ix.state.zones:
        if not zone.provider.is_default and zone.provider.type not in KNOWN_PROVIDERS:
            message = f"unknown provider type {zone.provider.type!r}"
            yield _on(
                ix, zone, ("spec", "provider", "type"), message, f"use one of: {known}", "UnknownProvider"
            )
        if "." not in zone.domain:
            message = f"domain {zone.domain!r} is a top-level domain"
            hint = "a Zone is a delegated domain below a TLD, e.g. example.com (as Kuadrant requires)"
            yield _on(ix, zone, ("spec", "domain"), message, hint, "TopLevelDomain")
        first = domains.setdefault(zone.domain, zone)
        if first is not zone:
            message = (
                f"domain {zone.domain!r} is also the domain of Zone {first.name!r} ({_where(first.origin)})"
            )
            hint = "describe each zone once"
            yield _on(ix, zone, ("spec", "domain"), message, hint, "DuplicateZone")
        rejected = ("DNSPolicy", zone.default_policy) in ix.rejected
        if zone.default_policy and zone.default_policy not in policies and not rejected:
            message = f"defaultPolicy names DNSPolicy {zone.default_policy!r}, which does not exist"
            hint = f"known policies: {_some(policies)}"
            yield _on(ix, zone, ("spec", "defaultPolicy"), message, hint, "UnknownReference")


def _some(names: Iterable[str], limit: int = 10) -> str:
    ordered = sorted(set(names))
    if not ordered:
        return "none"
    more = f" (and {len(ordered) - limit} more)" if len(ordered) > limit else ""
    return ", ".join(ordered[:limit]) + more


def default_provider_namespace(ix: Index) -> Iterable[Problem]:
    for zone in ix.state.zones:
        if zone.provider.default_namespace and not zone.provider.is_default:
            message = "defaultProviderNamespace is set but the zone names spec.provider, so it would be ignored"
            hint = "remove spec.defaultProviderNamespace, or remove spec.provider to use the default provider secret"
            yield _on(ix, zone, ("spec", "defaultProviderNamespace"), message, hint, "UnusedDefaultProviderNamespace")


def policy_targets(ix: Index) -> Iterable[Problem]:
    gateways = {name for name, _ in ix.gateway_sites}
    for index, policy in enumerate(ix.state.policies):
        target, path = policy.target, ("spec", "targetRef")
        if (target.gateway is None) == (not target.hosts):
            which = "both gateway and hosts" if target.gateway else "neither gateway nor hosts"
            hint = "set exactly one: targetRef.gateway (a gateway name) or targetRef.hosts (a list of hosts)"
            yield _on(ix, policy, path, f"targetRef names {which}", hint, "InvalidTarget")
        elif target.gateway and not ix.policy_hosts[index] and "Cluster" not in ix.rejected_kinds:
            ns = f" in namespace {target.namespace!r}" if target.namespace else ""
            message = f"no cluster has a gateway {target.gateway!r}{ns}"
            hint = f"known gateways: {_some(gateways)}"
            yield _on(ix, policy, (*path, "gateway"), message, hint, "UnknownReference")


def zone_references(ix: Index) -> Iterable[Problem]:
    known = f"known zones (metadata.name): {_some(ix.zones)}"
    refs: list[RecordSetDoc | ActiveGroups] = [*ix.state.record_sets, *ix.state.active_groups]
    for obj in refs:
        if obj.zone and obj.zone not in ix.zones and ("Zone", obj.zone) not in ix.rejected:
            kind = "RecordSet" if isinstance(obj, RecordSetDoc) else "ActiveGroups"
            message = f"{kind} names zone {obj.zone!r}, but no Zone has that metadata.name"
            yield _on(ix, obj, ("spec", "zone"), message, known, "UnknownReference")
    by_zone: dict[str, ActiveGroups] = {}
    for groups in ix.state.active_groups:
        first = by_zone.setdefault(groups.zone, groups)
        if first is not groups:
            message = f"zone {groups.zone!r} already has an ActiveGroups document ({_where(first.origin)})"
            yield _on(ix, groups, ("spec", "zone"), message, "keep one per zone", "DuplicateActiveGroups")


def tenant_node_pools(ix: Index) -> Iterable[Problem]:
    pools = {p.name for p in ix.state.node_pools}
    for tenant in ix.state.tenants:
        if tenant.node_pool in pools or ("NodePool", tenant.node_pool) in ix.rejected:
            continue
        message = (
            f"Tenant has no node pool: NodePool {tenant.node_pool!r} does not exist"
            if tenant.node_pool
            else "Tenant has no node pool"
        )
        hint = f"a tenant with no node pool is a validation error; known node pools: {_some(pools)}"
        yield _on(ix, tenant, ("spec", "nodePool"), message, hint, "UnknownReference")


# --- hosts and zones ---------------------------------------------------------------------------


def hosts_in_zones(ix: Index) -> Iterable[Problem]:
    if "Zone" in ix.rejected_kinds:
        return  # a rejected Zone document is reported; its hosts would only add noise
    known = f"zones: {_some(z.domain for z in ix.state.zones)}"
    seen: set[str] = set()
    for covered in ix.policy_hosts:
        for host, site in covered:
            if host not in seen and ix.lookup.zone_of(host) is None:
                seen.add(host)
                message = f"host {host!r} is covered by a policy but lies outside every zone"
                hint = f"add a Zone for it, or fix the name; {known}"
                yield _problem(site.origin, site.path, message, hint, (), "HostOutsideZones")
    for doc in ix.state.record_sets:
        zone = ix.zones.get(doc.zone) if doc.zone else None
        for i, record in enumerate(doc.records):
            found = ix.lookup.zone_of(record.name)
            if found is None or (zone is not None and found != zone.name):
                inside = f"zone {zone.domain!r}" if zone else "every zone"
                hint = "write an absolute name in the zone, '@' for the apex, or set spec.zone"
                message = f"record name {record.name!r} lies outside {inside}"
                yield _on(ix, doc, ("spec", "records", i, "name"), message, hint, "HostOutsideZones")


def txt_registry_names(ix: Index) -> Iterable[Problem]:
    limit = MAX_FIRST_LABEL_ON_TXT_ZONES
    seen: set[str] = set()
    for covered in ix.policy_hosts:
        for host, site in covered:
            zone_name = ix.lookup.zone_of(host)
            zone = ix.zones.get(zone_name) if zone_name else None
            if zone is None or zone.registry != "txt" or host in seen:
                continue
            seen.add(host)
            label = "wildcard" if host.startswith("*.") else first_label(host)
            if host == zone.domain:
                message = f"host {host!r} is the apex of zone {zone.name!r}, whose registry is txt"
                hint = "ownership TXT records cannot sit beside an apex host; use a name below the apex"
            elif len(label.encode()) > limit:
                message = f"the first label of host {host!r} is {len(label.encode())} octets long"
                hint = f"on zones with registry txt it may be at most {limit} octets (the TXT prefix adds 24)"
            else:
                continue
            yield _problem(site.origin, site.path, message, hint, (zone.name,), "NameTooLongForRegistry")


# --- policies ------------------------------------------------------------------------------------


def _settings(policy: DNSPolicy) -> tuple[Any, ...]:
    return (
        policy.strategy,
        policy.flattened,
        policy.default_weight,
        policy.custom_weights,
        policy.default_geo,
        policy.ttl,
    )


def policy_conflicts(ix: Index) -> Iterable[Problem]:
    """Policies covering one host must agree on strategy and default geo; `*.x` and `x` on all."""
    pairs: dict[tuple[int, int, str], list[str]] = defaultdict(list)
    for host, policies in ix.host_policies.items():
        base = policies[0]
        for other in policies[1:]:
            if other.strategy != base.strategy:
                pairs[(id(base), id(other), "strategy")].append(host)
            if other.default_geo != base.default_geo:
                pairs[(id(base), id(other), "defaultGeo")].append(host)
        bare = host[2:] if host.startswith("*.") else None
        if bare in ix.host_policies and _settings(ix.host_policies[bare][0]) != _settings(base):
            pairs[(id(ix.host_policies[bare][0]), id(base), "wildcard")].append(host)
    objs = {id(p): p for p in ix.state.policies}
    for (first_id, other_id, what), hosts in pairs.items():
        first, other = objs[first_id], objs[other_id]
        yield _conflict(ix, first, other, what, sorted(hosts))


def _conflict(ix: Index, first: DNSPolicy, other: DNSPolicy, what: str, hosts: list[str]) -> Problem:
    more = f" (and {len(hosts) - 1} more hosts)" if len(hosts) > 1 else ""
    zones = ix.lookup.zones_of(hosts)
    if what == "strategy":
        message = (
            f"policies {first.name!r} ({first.strategy}) and {other.name!r} ({other.strategy}) "
            f"both cover host {hosts[0]!r}{more} with different strategies"
        )
        hint = "give one host one strategy"
        return _problem(other.origin, ("spec", "strategy"), message, hint, zones, "ConflictingStrategy")
    if what == "defaultGeo":
        message = (
            f"policies {first.name!r} (defaultGeo {first.default_geo}) and {other.name!r} "
            f"(defaultGeo {other.default_geo}) both cover host {hosts[0]!r}{more}: a host has one default geo"
        )
        path = ("spec", "loadBalancing", "geo", "defaultGeo")
        hint = "use the same defaultGeo in both"
        return _problem(other.origin, path, message, hint, zones, "ConflictingDefaultGeo")
    message = (
        f"wildcard host {hosts[0]!r}{more} (policy {other.name!r}) and its bare host (policy "
        f"{first.name!r}) share klb names but have different settings"
    )
    hint = "give both the same strategy, weights, geo and ttl (or one policy for both)"
    return _problem(other.origin, ("spec", "targetRef"), message, hint, zones, "ConflictingWildcard")


def default_geo_has_cluster(ix: Index) -> Iterable[Problem]:
    for index, policy in enumerate(ix.state.policies):
        clusters = ix.clusters_of(index)
        if policy.default_geo is None or not clusters:
            continue
        if all(c.geo != policy.default_geo for c in clusters):
            geos = _some(c.geo for c in clusters if c.geo)
            message = (
                f"defaultGeo {policy.default_geo!r}: no cluster serving this policy's hosts is in that geo"
            )
            hint = f"use a geo a serving cluster is in: {geos}"
            yield _on(
                ix, policy, ("spec", "loadBalancing", "geo", "defaultGeo"), message, hint, "DefaultGeoEmpty"
            )


def geo_codes(ix: Index) -> Iterable[Problem]:
    for cluster in ix.state.clusters:
        if cluster.geo is not None:
            yield from _geo_problems(ix, cluster, cluster.geo, ("spec", "geo"))
    for policy in ix.state.policies:
        if policy.default_geo is not None:
            yield from _geo_problems(
                ix, policy, policy.default_geo, ("spec", "loadBalancing", "geo", "defaultGeo")
            )


def _geo_problems(ix: Index, obj: Cluster | DNSPolicy, code: str, path: Path) -> Iterable[Problem]:
    for zone_name in ix.zones_of(obj):
        provider = ix.provider(zone_name)
        if not valid_geo(provider, code):
            message = f"geo code {code!r} is not valid in zone {zone_name!r} (provider {provider})"
            hint = f"{provider} accepts {geo_hint(provider)}"
            yield _problem(obj.origin, path, message, hint, (zone_name,), "InvalidGeo")


def _weight_range(provider: str) -> tuple[int, int]:
    """A zone on the default provider secret may land on any provider: what some accepts."""
    if provider != DEFAULT_PROVIDER:
        return weight_range(provider)
    ranges = [weight_range(p) for p in KNOWN_PROVIDERS]
    return min(low for low, _ in ranges), max(high for _, high in ranges)


def weights(ix: Index) -> Iterable[Problem]:
    for policy in ix.state.policies:
        base = ("spec", "loadBalancing", "weighted")
        found: list[tuple[int, Path]] = [(policy.default_weight, (*base, "defaultWeight"))]
        found += [(c.weight, (*base, "custom", i, "weight")) for i, c in enumerate(policy.custom_weights)]
        for zone_name in ix.zones_of(policy):
            provider = ix.provider(zone_name)
            low, high = _weight_range(provider)
            for weight, path in found:
                if not low <= weight <= high:
                    message = f"weight {weight} is out of range for zone {zone_name!r} (provider {provider})"
                    hint = f"{provider} takes weights from {low} to {high}"
                    yield _problem(policy.origin, path, message, hint, (zone_name,), "WeightOutOfRange")


def loadbalanced_needs_routing(ix: Index) -> Iterable[Problem]:
    for policy in ix.state.policies:
        if policy.strategy != Strategy.LOADBALANCED or policy.flattened:
            continue
        for zone_name in ix.zones_of(policy):
            provider = ix.provider(zone_name)
            if provider in PLAIN_PROVIDERS:
                message = (
                    f"strategy loadbalanced needs routing policies, which zone {zone_name!r} "
                    f"(provider {provider}) does not have"
                )
                hint = "use strategy simple, or flattened: true (one multi-value A/AAAA, no geo or weights)"
                yield _problem(
                    policy.origin, ("spec", "strategy"), message, hint, (zone_name,), "StrategyUnsupported"
                )


# --- groups and static records --------------------------------------------------------------------


def _bad_group(name: str) -> str | None:
    if len(name) > MAX_GROUP_NAME:
        return f"group name {name!r} is {len(name)} characters long"
    bad = sorted({ch for ch in name if ch in GROUP_FORBIDDEN}, key=GROUP_FORBIDDEN.index)
    return f"group name {name!r} contains {' '.join(repr(ch) for ch in bad)}" if bad else None


def group_names(ix: Index) -> Iterable[Problem]:
    hint = f"at most {MAX_GROUP_NAME} characters and none of ; & , space \" '"
    named: list[tuple[Cluster | ActiveGroups, str, Path]] = [
        (c, c.group, ("spec", "group")) for c in ix.state.clusters if c.group is not None
    ]
    named += [
        (g, name, ("spec", "groups", i)) for g in ix.state.active_groups for i, name in enumerate(g.groups)
    ]
    for obj, name, path in named:
        message = _bad_group(name)
        if message is not None:
            yield _on(ix, obj, path, message, hint, "InvalidGroupName")


def groups_need_active_groups(ix: Index) -> Iterable[Problem]:
    covered = {g.zone for g in ix.state.active_groups} | {n for k, n in ix.rejected if k == "ActiveGroups"}
    first: dict[str, list[Cluster]] = defaultdict(list)
    for cluster in ix.state.clusters:
        if cluster.group is not None:
            for zone_name in ix.zones_of(cluster):
                if zone_name not in covered and "ActiveGroups" not in ix.rejected_kinds:
                    first[zone_name].append(cluster)
    for zone_name, clusters in first.items():
        more = f" and {len(clusters) - 1} more grouped clusters" if len(clusters) > 1 else ""
        message = (
            f"Cluster {clusters[0].name!r} (group {clusters[0].group!r}){more} serve(s) zone "
            f"{zone_name!r}, which has no ActiveGroups document"
        )
        hint = f"add an ActiveGroups document with spec.zone: {zone_name}, listing the active groups"
        yield _problem(
            clusters[0].origin, ("spec", "group"), message, hint, (zone_name,), "MissingActiveGroups"
        )


def static_records(ix: Index) -> Iterable[Problem]:
    by_name: dict[str, list[tuple[RecordSetDoc, int]]] = defaultdict(list)
    for doc in ix.state.record_sets:
        for i, record in enumerate(doc.records):
            by_name[record.name].append((doc, i))
    for name, entries in by_name.items():
        types = [doc.records[i].type for doc, i in entries]
        if "CNAME" not in types:
            continue
        for doc, i in entries:
            record, path = doc.records[i], ("spec", "records", i)
            if record.type == "CNAME" and len(types) > 1:
                others = (
                    _some(t for t in types if t != "CNAME") if set(types) != {"CNAME"} else "another CNAME"
                )
                message = f"CNAME {name!r} shares its name with {others}; a CNAME must stand alone"
                yield _on(
                    ix, doc, (*path, "type"), message, "rename it, or drop the other records", "CNAMEConflict"
                )
            elif record.type == "CNAME" and len(record.values) > 1:
                message = f"CNAME {name!r} has {len(record.values)} values; a CNAME holds exactly one"
                yield _on(ix, doc, (*path, "values"), message, "keep one target", "CNAMEConflict")


def _served_candidates(state: DesiredState) -> set[str]:
    """Zones a primary's nameserver affects: every `local` zone and its closest parent."""
    out: set[str] = set()
    for zone in state.zones:
        if zone.provider.type == "local":
            out.add(zone.name)
            parent = state.zone_for_host(zone.domain.partition(".")[2]) if "." in zone.domain else None
            if parent is not None:
                out.add(parent.name)
    return out


def nameservers(ix: Index) -> Iterable[Problem]:
    """CoreDNS primaries: a nameserver only on a primary, with IP addresses; viewClients parses."""
    affected = _served_candidates(ix.state)
    for cluster in ix.state.clusters:
        ns = cluster.nameserver
        if ns is None:
            continue
        zones = set(ix.zones_of(cluster)) | affected
        if cluster.mode is not Mode.PRIMARY:
            message = (f"spec.nameserver is set but the Cluster's mode is {cluster.mode.value}: only "
                       "primaries serve zones, so this nameserver would never be published")
            hint = "set spec.mode: primary, or remove spec.nameserver"
            yield _problem(cluster.origin, ("spec", "nameserver"), message, hint, zones, "NameserverNotPrimary")
        for i, address in enumerate(ns.addresses):
            if not _is_ip(address):
                message = f"nameserver address {address!r} is not an IPv4 or IPv6 address"
                hint = "glue records need IP addresses, e.g. 192.0.2.53 or 2001:db8::53"
                yield _problem(cluster.origin, ("spec", "nameserver", "addresses", i), message, hint, zones,
                               "InvalidAddress")
    for zone in ix.state.zones:
        raw = zone.provider.setting(VIEW_CLIENTS)
        if raw is None:
            continue
        path: Path = ("spec", "provider", "settings", VIEW_CLIENTS)
        if zone.provider.type != "local":
            message = f"{VIEW_CLIENTS} is a setting of the local provider; provider {zone.provider.type!r} ignores it"
            yield _on(ix, zone, path, message, "remove it, or use provider type local", "InvalidViewClients")
            continue
        try:
            parse_view_clients(raw)
        except ValueError as exc:
            hint = ('VIEW=CIDR[,CIDR...] entries separated by ";", e.g. '
                    '"GEO-EU=10.1.0.0/16,192.0.2.0/24;US=198.51.100.0/24"')
            yield _on(ix, zone, path, str(exc), hint, "InvalidViewClients")


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


Check = Callable[[Index], Iterable[Problem]]
CHECKS: tuple[Check, ...] = (
    duplicate_names,
    duplicate_cluster_ids,
    zone_settings,
    default_provider_namespace,
    policy_targets,
    zone_references,
    tenant_node_pools,
    hosts_in_zones,
    txt_registry_names,
    policy_conflicts,
    default_geo_has_cluster,
    geo_codes,
    weights,
    loadbalanced_needs_routing,
    group_names,
    groups_need_active_groups,
    static_records,
    nameservers,
)


def validate(state: DesiredState, rejected: Collection[tuple[str, str]] = ()) -> list[Problem]:
    """Every semantic problem of ``state``.  ``rejected`` lists (kind, name) of documents that
    failed their schema: references to them are not reported again."""
    index = Index(state, rejected)
    return [problem for check_ in CHECKS for problem in check_(index)]


def check(files: Mapping[str, str], schemas: Mapping[str, Mapping[str, Any]]) -> LoadResult:
    """Load, schema-check and validate a tree of files; every problem points at its line."""
    loaded = load(files, schemas)
    semantic = refine_lines(validate(loaded.state, loaded.rejected), files)
    problems = sorted([*loaded.problems, *semantic], key=lambda p: (p.file, p.line, p.yaml_path))
    return replace(loaded, problems=problems)
