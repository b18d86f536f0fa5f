"""References and uniqueness: names, cluster ids, zone domains, targets, zones and node pools
that documents name."""

from __future__ import annotations

from collections.abc import Iterable

from gitdns.core.checks.index import Index, Obj, on, problem, some, where
from gitdns.core.model import KINDS, ActiveGroups, Cluster, RecordSetDoc, Zone
from gitdns.core.names import short_hash
from gitdns.core.problems import Problem


def duplicate_names(ix: Index) -> Iterable[Problem]:
    s = ix.state
    groups = (s.zones, s.clusters, s.policies, s.record_sets, s.tenants, s.node_pools, s.active_groups)
    kinds: Iterable[tuple[str, tuple[Obj, ...]]] = zip(KINDS, groups, strict=True)
    for kind, objs in kinds:
        seen: dict[str, Obj] = {}
        for obj in objs:
            first = seen.setdefault(obj.name, obj)
            if first is not obj:
                message = f"duplicate {kind} name {obj.name!r}, also defined in {where(first.origin)}"
                zones = ix.zones_of(obj) + ix.zones_of(first)
                hint = f"give every {kind} a unique metadata.name"
                yield problem(obj.origin, ("metadata", "name"), message, hint, zones, "DuplicateName")


def duplicate_cluster_ids(ix: Index) -> Iterable[Problem]:
    """Cluster ids are unique ignoring case (an id is a name: Kubernetes writes UIDs in lower
    case, and an owner id differing only in case would be a second owner of the same records);
    each id is hashed as written, so an existing deployment's owner hashes never change."""
    by_id: dict[str, Cluster] = {}
    by_hash: dict[str, Cluster] = {}
    for cluster in ix.state.clusters:
        first = by_id.setdefault(cluster.id.lower(), cluster)
        if first is not cluster:
            case = "" if first.id == cluster.id else f" but for letter case ({first.id!r}; ids compare ignoring case)"
            message = (
                f"cluster id {cluster.id!r} is also the id of Cluster {first.name!r}{case} ({where(first.origin)})"
            )
            hint = "each Cluster needs its own kube-system namespace UID (gitdns cluster-id prints it)"
            zones = ix.zones_of(cluster) + ix.zones_of(first)
            yield problem(cluster.origin, ("spec", "id"), message, hint, zones, "DuplicateClusterId")
            continue
        digest = short_hash(cluster.id, 6)
        other = by_hash.setdefault(digest, cluster)
        if other is not cluster:
            message = (
                f"cluster id {cluster.id!r} has the same 6-character hash {digest!r} as Cluster "
                f"{other.name!r} ({where(other.origin)}), so their klb record names would collide"
            )
            zones = ix.zones_of(cluster) + ix.zones_of(other)
            hint = "re-create one cluster's kube-system namespace to get a new UID"
            yield problem(cluster.origin, ("spec", "id"), message, hint, zones, "ClusterHashCollision")


def zone_settings(ix: Index) -> Iterable[Problem]:
    policies = {p.name for p in ix.state.policies}
    domains: dict[str, Zone] = {}
    for zone in ix.state.zones:  # a domain with one label: dnsnames.zone_domains (TopLevelDomain)
        first = domains.setdefault(zone.domain, zone)
        if first is not zone:
            message = (
                f"domain {zone.domain!r} is also the domain of Zone {first.name!r} ({where(first.origin)})"
            )
            hint = "describe each zone once"
            yield on(ix, zone, ("spec", "domain"), message, hint, "DuplicateZone")
        rejected = ("DNSPolicy", zone.default_policy) in ix.rejected
        if zone.default_policy and zone.default_policy not in policies and not rejected:
            message = f"defaultPolicy names DNSPolicy {zone.default_policy!r}, which does not exist"
            hint = f"known policies: {some(policies)}"
            yield on(ix, zone, ("spec", "defaultPolicy"), message, hint, "UnknownReference")


def default_provider_namespace(ix: Index) -> Iterable[Problem]:
    for zone in ix.state.zones:
        if zone.provider.default_namespace and not zone.provider.is_default:
            message = "defaultProviderNamespace is set but the zone names spec.provider, so it would be ignored"
            hint = "remove spec.defaultProviderNamespace, or remove spec.provider to use the default provider secret"
            yield on(ix, zone, ("spec", "defaultProviderNamespace"), message, hint, "UnusedDefaultProviderNamespace")


def policy_targets(ix: Index) -> Iterable[Problem]:
    gateways = {name for name, _ in ix.gateway_sites}
    for index, policy in enumerate(ix.state.policies):
        target, path = policy.target, ("spec", "targetRef")
        if (target.gateway is None) == (not target.hosts):
            which = "both gateway and hosts" if target.gateway else "neither gateway nor hosts"
            hint = "set exactly one: targetRef.gateway (a gateway name) or targetRef.hosts (a list of hosts)"
            yield on(ix, policy, path, f"targetRef names {which}", hint, "InvalidTarget")
        elif (target.gateway and not ix.policy_hosts[index] and "Cluster" not in ix.rejected_kinds
              and not _discovers(ix, target.gateway, target.namespace)):
            ns = f" in namespace {target.namespace!r}" if target.namespace else ""
            message = f"no cluster has a gateway {target.gateway!r}{ns}"
            hint = f"known gateways: {some(gateways)}"
            yield on(ix, policy, (*path, "gateway"), message, hint, "UnknownReference")


def _discovers(ix: Index, name: str, namespace: str | None) -> bool:
    """Some cluster reads this gateway's listeners from its own cluster (left out in git): its
    hosts are known only there, so naming it is not an unknown reference."""
    return any(gw.discovered_listeners and gw.name == name and (not namespace or gw.namespace == namespace)
               for cluster in ix.state.clusters for gw in cluster.gateways)


def zone_references(ix: Index) -> Iterable[Problem]:
    known = f"known zones (metadata.name): {some(ix.zones)}"
    refs: list[RecordSetDoc | ActiveGroups] = [*ix.state.record_sets, *ix.state.active_groups]
    for obj in refs:
        if obj.zone and obj.zone not in ix.zones and ("Zone", obj.zone) not in ix.rejected:
            kind = "RecordSet" if isinstance(obj, RecordSetDoc) else "ActiveGroups"
            message = f"{kind} names zone {obj.zone!r}, but no Zone has that metadata.name"
            yield on(ix, obj, ("spec", "zone"), message, known, "UnknownReference")
    by_zone: dict[str, ActiveGroups] = {}
    for groups in ix.state.active_groups:
        first = by_zone.setdefault(groups.zone, groups)
        if first is not groups:
            message = f"zone {groups.zone!r} already has an ActiveGroups document ({where(first.origin)})"
            yield on(ix, groups, ("spec", "zone"), message, "keep one per zone", "DuplicateActiveGroups")


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
        hint = f"a tenant with no node pool is a validation error; known node pools: {some(pools)}"
        yield on(ix, tenant, ("spec", "nodePool"), message, hint, "UnknownReference")

