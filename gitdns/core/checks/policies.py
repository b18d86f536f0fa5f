"""Policies: policies covering one host agree; a default geo has a cluster."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from gitdns.core.checks.index import Index, on, problem, some
from gitdns.core.model import DNSPolicy
from gitdns.core.problems import Problem


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
        return problem(other.origin, ("spec", "strategy"), message, hint, zones, "ConflictingStrategy")
    if what == "defaultGeo":
        message = (
            f"policies {first.name!r} (defaultGeo {first.default_geo}) and {other.name!r} "
            f"(defaultGeo {other.default_geo}) both cover host {hosts[0]!r}{more}: a host has one default geo"
        )
        path = ("spec", "loadBalancing", "geo", "defaultGeo")
        hint = "use the same defaultGeo in both"
        return problem(other.origin, path, message, hint, zones, "ConflictingDefaultGeo")
    message = (
        f"wildcard host {hosts[0]!r}{more} (policy {other.name!r}) and its bare host (policy "
        f"{first.name!r}) share klb names but have different settings"
    )
    hint = "give both the same strategy, weights, geo and ttl (or one policy for both)"
    return problem(other.origin, ("spec", "targetRef"), message, hint, zones, "ConflictingWildcard")


def default_geo_has_cluster(ix: Index) -> Iterable[Problem]:
    for index, policy in enumerate(ix.state.policies):
        clusters = ix.clusters_of(index)
        if policy.default_geo is None or not clusters:
            continue
        if all(c.geo != policy.default_geo for c in clusters):
            geos = some(c.geo for c in clusters if c.geo)
            message = (
                f"defaultGeo {policy.default_geo!r}: no cluster serving this policy's hosts is in that geo"
            )
            hint = f"use a geo a serving cluster is in: {geos}"
            yield on(
                ix, policy, ("spec", "loadBalancing", "geo", "defaultGeo"), message, hint, "DefaultGeoEmpty"
            )

