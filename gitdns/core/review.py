"""Which zones a revision changed by a reviewed removal or switch (the mass-change
guard's exemption).

A mass change that follows from a Cluster, DNSPolicy, gateway or listener removed in git,
from an ActiveGroups switch, or from a change of the primaries' nameservers (a primary
removed, moved to another mode, or its nameserver changed: docs/coredns-primaries.md), was
reviewed in the pull request that made it: the mass-change guard lets it through.  Pure: two
desired states in, zone names out.
"""

from __future__ import annotations

from gitdns.core.delegation import nameserver_zones, primary_nameservers
from gitdns.core.model import Cluster, DesiredState


def _hosts(cluster: Cluster) -> set[tuple[str, str, str]]:
    return {(gw.namespace, gw.name, lst.hostname) for gw in cluster.gateways for lst in gw.listeners}


def _zones_of_hosts(state: DesiredState, hosts: set[str]) -> set[str]:
    out: set[str] = set()
    for host in hosts:
        zone = state.zone_for_host(host)
        if zone is not None:
            out.add(zone.name)
    return out


def reviewed_zones(old: DesiredState, new: DesiredState) -> set[str]:
    """Zones touched by removals or group switches between ``old`` and ``new``."""
    removed_hosts: set[str] = set()
    new_clusters = {c.id: c for c in new.clusters}
    for cluster in old.clusters:
        now = new_clusters.get(cluster.id)
        gone = _hosts(cluster) - (_hosts(now) if now is not None else set())
        removed_hosts |= {host for _, _, host in gone}
        if now is not None and now.group != cluster.group:
            removed_hosts |= {host for _, _, host in _hosts(cluster)}
    new_policies = {p.name: p for p in new.policies}
    for policy in old.policies:
        if policy.name not in new_policies or new_policies[policy.name] != policy:
            removed_hosts |= set(policy.target.hosts)
            removed_hosts |= {h for c in old.clusters for gw in c.gateways if gw.name == policy.target.gateway
                              for h in (lst.hostname for lst in gw.listeners)}
    zones = _zones_of_hosts(old, removed_hosts)
    old_groups = {g.zone: (g.serial, g.groups) for g in old.active_groups}
    for group in new.active_groups:
        if old_groups.get(group.zone) != (group.serial, group.groups):
            zones.add(group.zone)
    old_static = {(r.name, r.type) for d in old.record_sets for r in d.records}
    new_static = {(r.name, r.type) for d in new.record_sets for r in d.records}
    for name, _ in old_static - new_static:  # removed records; changed values are not removals
        zone = old.zone_for_host(name)
        if zone is not None:
            zones.add(zone.name)
    if primary_nameservers(old) != primary_nameservers(new):
        zones |= {z.name for z in (*nameserver_zones(old), *nameserver_zones(new))}
    return zones
