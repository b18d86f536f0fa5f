"""The record builder: the records one cluster owns in one zone (layouts: docs/records.md).

Simple strategy: ``H A/AAAA [all IPs]`` or ``H CNAME [hostname]``.  Loadbalanced:
``H CNAME klb.H``, ``klb.H`` geo rows (and the ``default`` row for the default geo),
``<geo>.klb.H`` weighted rows, and ``<hash6(cluster)>-<hash6(gw-ns)>.klb.H`` A/AAAA.
Without a geo section, the geo code is ``default`` and ``klb.H`` is a plain CNAME.

A host with nothing to publish (every gateway address excluded by the policy's
``excludeAddresses``, or none known) gets no records at all in either layout, as dns-operator's
endpoints builder returns no endpoints for a target without addresses; its `BuiltHost` says why
in ``notes``, and so does a flattened loadbalanced host (geo and weights ignored).  The plans
show those notes (`notes_for_zone`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from gitdns.core import names
from gitdns.core.model import (
    Cluster,
    DesiredState,
    DNSPolicy,
    Gateway,
    HealthCheck,
    Strategy,
    Zone,
)
from gitdns.core.records import MULTI_VALUE_TYPES, RecordKey, RecordSet

DEFAULT_GEO = "default"


@dataclass(frozen=True, slots=True)
class BuiltHost:
    """The records one cluster wants for one listener host."""

    host: str
    zone: str  # Zone metadata.name
    policy: str
    strategy: Strategy
    records: tuple[RecordSet, ...]
    health: HealthCheck | None = None
    gateway: str = ""
    namespace: str = ""
    notes: tuple[str, ...] = ()  # what a reader of the plan should know about this host


@dataclass(frozen=True, slots=True)
class Addresses:
    ipv4: tuple[str, ...]
    ipv6: tuple[str, ...]
    hostnames: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not (self.ipv4 or self.ipv6 or self.hostnames)


def split_addresses(addresses: Iterable[str], exclude: Iterable[str] = ()) -> Addresses:
    nets = [ipaddress.ip_network(e, strict=False) for e in exclude if _is_ip_or_net(e)]
    plain = {e.lower().rstrip(".") for e in exclude if not _is_ip_or_net(e)}
    v4: set[str] = set()
    v6: set[str] = set()
    hosts: set[str] = set()
    for raw in addresses:
        try:
            ip = ipaddress.ip_address(raw)
        except ValueError:
            host = raw.lower().rstrip(".")
            if host not in plain:
                hosts.add(host)
            continue
        if any(ip.version == n.version and ip in n for n in nets):
            continue
        (v4 if ip.version == 4 else v6).add(str(ip))
    return Addresses(tuple(sorted(v4)), tuple(sorted(v6)), tuple(sorted(hosts)))


def _is_ip_or_net(text: str) -> bool:
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return True


def policy_for(state: DesiredState, zone: Zone, gateway: Gateway, host: str) -> DNSPolicy | None:
    """The policy covering ``host`` on ``gateway``; explicit hosts win over gateway refs,
    and the zone's default policy applies when none does."""
    by_host = [p for p in state.policies if host in p.target.hosts]
    if by_host:
        return by_host[0]
    for policy in state.policies:
        ref = policy.target
        if ref.gateway == gateway.name and ref.namespace in (None, gateway.namespace):
            return policy
    if zone.default_policy:
        return next((p for p in state.policies if p.name == zone.default_policy), None)
    return None


def weight_for(policy: DNSPolicy, cluster: Cluster) -> int:
    for custom in policy.custom_weights:
        if cluster.attribute(custom.attribute) == custom.value:
            return custom.weight
    return policy.default_weight


def _ttls(zone: Zone, policy: DNSPolicy) -> tuple[int, int, int]:
    return (
        policy.ttl.simple if policy.ttl.simple is not None else zone.ttl.simple,
        policy.ttl.loadbalanced if policy.ttl.loadbalanced is not None else zone.ttl.loadbalanced,
        policy.ttl.loadbalanced_inner
        if policy.ttl.loadbalanced_inner is not None
        else zone.ttl.loadbalanced_inner,
    )


def simple_records(host: str, addrs: Addresses, ttl: int) -> list[RecordSet]:
    """A wins over CNAME; a CNAME holds one value (the first host name, sorted)."""
    out: list[RecordSet] = []
    if addrs.ipv4:
        out.append(RecordSet(host, "A", ttl, addrs.ipv4))
    if addrs.ipv6:
        out.append(RecordSet(host, "AAAA", ttl, addrs.ipv6))
    if not out and addrs.hostnames:
        out.append(RecordSet(host, "CNAME", ttl, addrs.hostnames[:1]))
    return out


def loadbalanced_records(
    host: str, cluster: Cluster, gateway: Gateway, policy: DNSPolicy, addrs: Addresses, zone: Zone
) -> list[RecordSet]:
    if addrs.empty:
        return []  # dns-operator's builder: no target, no endpoints (never a tree that leads nowhere)
    _, outer, inner = _ttls(zone, policy)
    klb = names.klb_name(host)
    geo = (cluster.geo or policy.default_geo or DEFAULT_GEO) if policy.default_geo else DEFAULT_GEO
    geo_name = names.geo_name(host, geo)
    weight = weight_for(policy, cluster)
    out: list[RecordSet] = [RecordSet(host, "CNAME", outer, (klb,))]
    if addrs.ipv4 or addrs.ipv6:
        target = names.cluster_target_name(host, cluster.id, gateway.name, gateway.namespace)
        if addrs.ipv4:
            out.append(RecordSet(target, "A", inner, addrs.ipv4))
        if addrs.ipv6:
            out.append(RecordSet(target, "AAAA", inner, addrs.ipv6))
        targets: tuple[str, ...] = (target,)
    else:
        targets = addrs.hostnames
    for target in targets:
        out.append(RecordSet(geo_name, "CNAME", inner, (target,), set_id=target, weight=weight))
    if policy.default_geo:
        out.append(RecordSet(klb, "CNAME", outer, (geo_name,), set_id=geo, geo=geo))
        if geo.lower() == policy.default_geo.lower():
            out.append(RecordSet(klb, "CNAME", outer, (geo_name,), set_id="default", geo="*"))
    else:
        out.append(RecordSet(klb, "CNAME", outer, (geo_name,)))
    return out


def _listener_hosts(cluster: Cluster, zone: Zone, state: DesiredState) -> Iterator[tuple[Gateway, str]]:
    for gateway in cluster.gateways:
        seen: set[str] = set()
        for listener in gateway.listeners:
            host = listener.hostname
            if host in seen:
                continue
            seen.add(host)
            found = state.zone_for_host(host)
            if found is not None and found.name == zone.name:
                yield gateway, host


def build_hosts(state: DesiredState, cluster: Cluster, zone: Zone) -> list[BuiltHost]:
    """Every listener host of ``cluster`` in ``zone`` that a policy covers."""
    built: list[BuiltHost] = []
    for gateway, host in _listener_hosts(cluster, zone, state):
        policy = policy_for(state, zone, gateway, host)
        if policy is None:
            continue
        addrs = split_addresses(gateway.addresses, policy.exclude_addresses)
        simple_ttl, _, _ = _ttls(zone, policy)
        if policy.strategy is Strategy.LOADBALANCED and not policy.flattened:
            records = loadbalanced_records(host, cluster, gateway, policy, addrs, zone)
        else:
            records = simple_records(host, addrs, simple_ttl)
        built.append(
            BuiltHost(host, zone.name, policy.name, policy.strategy, tuple(records), policy.health,
                      gateway.name, gateway.namespace, _host_notes(host, cluster, gateway, policy, addrs))
        )
    return built


def _host_notes(host: str, cluster: Cluster, gateway: Gateway, policy: DNSPolicy, addrs: Addresses) -> tuple[str, ...]:
    notes: list[str] = []
    if addrs.empty:
        why = (f"every address of gateway {gateway.namespace}/{gateway.name} is excluded by DNSPolicy "
               f"{policy.name} (spec.excludeAddresses)" if gateway.addresses
               else f"gateway {gateway.namespace}/{gateway.name} has no address")
        notes.append(f"{host}: nothing published for this cluster: {why} (NoAddresses)")
    elif policy.strategy is Strategy.LOADBALANCED and policy.flattened:
        mine = f"geo {cluster.geo or '-'}, weight {weight_for(policy, cluster)}"
        notes.append(f"{host}: DNSPolicy {policy.name} is loadbalanced with flattened: true: one multi-value "
                     f"A/AAAA of every healthy target; geo and weights are ignored (this cluster: {mine})")
    return tuple(notes)


def notes_for_zone(state: DesiredState, cluster: Cluster, zone: Zone) -> tuple[str, ...]:
    """What the plans of ``cluster`` in ``zone`` say about its hosts (flattened layouts, hosts
    with nothing to publish), sorted, each once."""
    return tuple(sorted({n for h in build_hosts(state, cluster, zone) for n in h.notes}))


def static_records(state: DesiredState, zone: Zone) -> list[RecordSet]:
    out: list[RecordSet] = []
    for doc in state.record_sets:
        for rec in doc.records:
            owner_zone = state.zone(doc.zone) if doc.zone else state.zone_for_host(rec.name)
            if owner_zone is not None and owner_zone.name == zone.name:
                values = rec.values
                if rec.type in ("CNAME", "NS"):
                    values = tuple(v.strip().lower().rstrip(".") for v in values)
                out.append(RecordSet(rec.name, rec.type, rec.ttl, values))
    return out


def merge_records(records: Iterable[RecordSet]) -> tuple[RecordSet, ...]:
    """One record set per key: multi-value types are united, others keep the first."""
    merged: dict[RecordKey, RecordSet] = {}
    for rec in records:
        have = merged.get(rec.key)
        if have is None:
            merged[rec.key] = rec
        elif rec.type in MULTI_VALUE_TYPES and not rec.set_id:
            merged[rec.key] = have.with_values(set(have.values) | set(rec.values))
    return tuple(merged[k] for k in sorted(merged))


def desired_for_zone(state: DesiredState, cluster: Cluster, zone: Zone) -> tuple[RecordSet, ...]:
    """Everything ``cluster`` owns in ``zone``: its hosts' records plus the static ones."""
    hosts = build_hosts(state, cluster, zone)
    return merge_records([r for h in hosts for r in h.records] + static_records(state, zone))


def zones_for_cluster(state: DesiredState, cluster: Cluster) -> list[Zone]:
    """Zones the cluster publishes: those with its listener hosts or with static records."""
    wanted: list[Zone] = []
    for zone in state.zones:
        has_hosts = any(True for _ in _listener_hosts(cluster, zone, state))
        if has_hosts or static_records(state, zone):
            wanted.append(zone)
    return wanted
