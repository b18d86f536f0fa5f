"""Tenant zones are fenced: a Tenant is served by its node pool's CoreDNS with the pool's
addresses, so what it may claim is limited (docs/health.md, "Tenant zones").

A tenant's zone (``spec.zone``, else the common suffix of its domains) must

* have at least two labels and not be a public suffix (``com``, ``co.uk``, ``github.io``: the
  Public Suffix List bundled in the ``publicsuffixlist`` package, never fetched);
* not be ``cluster.local`` or below it (Kubernetes' cluster domain), nor below ``arpa``
  (reverse zones) — these two rules are `gitdns.core.checks.dnsnames.reserved_error`, the gate
  Zones' domains pass too;
* not be equal to or inside the domain of a gitdns Zone, nor equal to or inside the zone of a
  tenant of another node pool, unless the tenant's NodePool lists that domain in
  ``spec.tenants.allowInside``.

The first two rules cannot be lifted.  The tenant's name, zone and domains end up in file names,
comments and server block keys of the CoreDNS files, so they must also be what the schema
says, as whole strings (a trailing newline is refused).

`fences` gives every reason a tenant is refused; `refused_tenants` the first reason per tenant
(the orchestrator leaves those tenants out); `tenant_zones` is the check `gitdns validate`
runs.  The problems block no Zone: the agent does not serve tenants, and a tenant naming
another team's zone must not hold that zone back.

The package's other module: `layout` — What the orchestrator would leave out of a node pool's
CoreDNS files, found before it runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from gitdns.core.addresses import host_error
from gitdns.core.checks.dnsnames import CLUSTER_DOMAIN, REVERSE_ZONES, inside, public_suffixes, reserved_error
from gitdns.core.checks.index import Index, problem
from gitdns.core.corefile import tenant_zone
from gitdns.core.corefile.check import dns_name_error as name_error
from gitdns.core.corefile.check import shown
from gitdns.core.model import DesiredState, NodePool, Tenant
from gitdns.core.problems import Path, Problem

__all__ = ["CLUSTER_DOMAIN", "REVERSE_ZONES", "Fence", "allowed_inside", "fences", "inside", "public_suffixes",
           "refused_tenants", "reserved_error", "tenant_name_error", "tenant_zones"]

_TENANT_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_ALLOW_HINT = "list the domain in the NodePool's spec.tenants.allowInside if this pool may serve inside it"


@dataclass(frozen=True, slots=True)
class Fence:
    """One reason ``tenant`` is refused."""

    tenant: Tenant
    path: Path
    message: str
    hint: str
    code: str
    value: str = ""  # the offending domain, for InvalidHostname


def tenant_name_error(name: str) -> str | None:
    if _TENANT_NAME.fullmatch(name):
        return None
    return (f"{shown(name)} is not a tenant name (1 to 63 lower-case letters, digits or '-', starting and "
            "ending with a letter or digit): it names the tenant's hosts file and appears in the CoreDNS files")


def allowed_inside(pool: NodePool) -> frozenset[str]:
    """The domains a NodePool lets its tenants sit inside (``spec.tenants.allowInside``)."""
    return frozenset(pool.allow_inside)


def _zone_path(tenant: Tenant) -> Path:
    return ("spec", "zone") if tenant.zone else ("spec", "domains")


def _own_errors(tenant: Tenant) -> Iterator[Fence]:
    """The tenant on its own: its name, zone and domains as names, and the reserved zones."""
    wrong = tenant_name_error(tenant.name)
    if wrong is not None:
        yield Fence(tenant, ("metadata", "name"), wrong, "a name such as tenant-a", "InvalidTenantName")
    for i, domain in enumerate(tenant.domains):
        wrong = name_error(domain, wildcard=True)
        if wrong is not None:
            yield Fence(tenant, ("spec", "domains", i), wrong, "a DNS name such as api.tenant-a.io", "InvalidHostname",
                        domain)
    if tenant.zone is not None:
        wrong = name_error(tenant.zone)
        if wrong is not None:
            yield Fence(tenant, ("spec", "zone"), wrong, "a DNS name such as tenant-a.io", "InvalidTenantZone")
            return
    zone = tenant_zone(tenant)
    if zone is None:
        message = "the tenant's domains share no parent below a top-level domain, so it has no zone"
        yield Fence(tenant, ("spec", "domains"), message, "set spec.zone", "ReservedTenantZone")
        return
    wrong = reserved_error(zone)
    if wrong is not None:
        hint = "a zone the tenant owns, e.g. tenant-a.io; spec.tenants.allowInside cannot lift this"
        yield Fence(tenant, _zone_path(tenant), wrong, hint, "ReservedTenantZone")


def fences(state: DesiredState) -> list[Fence]:
    """Every reason each tenant of ``state`` is refused (see the module docstring)."""
    out: list[Fence] = []
    claimed: dict[str, list[Tenant]] = {}  # zone -> tenants claiming it that pass on their own
    for tenant in state.tenants:
        own = list(_own_errors(tenant))
        out += own
        zone = tenant_zone(tenant)
        if not own and zone is not None:
            claimed.setdefault(zone, []).append(tenant)
    domains = {z.domain: z for z in state.zones}
    pools = {p.name: p for p in state.node_pools}
    for zone, tenants in claimed.items():
        parents = [zone]
        while "." in parents[-1]:
            parents.append(parents[-1].partition(".")[2])
        for tenant in tenants:
            if tenant.node_pool not in pools:
                continue  # no pool (or a rejected one): its allowances are unknown, and it is reported
            allowed = allowed_inside(pools[tenant.node_pool])
            for parent in parents:
                if parent in allowed:
                    continue
                gitdns_zone = domains.get(parent)
                if gitdns_zone is not None:
                    where = "is" if parent == zone else "is inside"
                    message = (f"zone {zone} {where} the domain of Zone {gitdns_zone.name!r} "
                               f"({gitdns_zone.origin.file or 'a Zone document'}), which gitdns manages")
                    out.append(Fence(tenant, _zone_path(tenant), message, _ALLOW_HINT, "TenantZoneInsideZone"))
                others = [t for t in claimed.get(parent, ()) if t.node_pool != tenant.node_pool]
                for other in others[:1]:
                    where = "is the zone" if parent == zone else "is inside the zone"
                    message = (f"zone {zone} {where} {parent} of Tenant {other.name!r} of node pool "
                               f"{other.node_pool!r} ({other.origin.file or 'a Tenant document'})")
                    out.append(Fence(tenant, _zone_path(tenant), message, _ALLOW_HINT, "TenantZoneInsideTenant"))
    order = {id(t): i for i, t in enumerate(state.tenants)}
    return sorted(out, key=lambda f: order[id(f.tenant)])


def refused_tenants(state: DesiredState) -> dict[str, str]:
    """Tenant name -> why it is refused (its first fence), for every refused tenant."""
    out: dict[str, str] = {}
    for fence in fences(state):
        out.setdefault(fence.tenant.name, fence.message)
    return out


def _allowance_problems(ix: Index) -> Iterable[Problem]:
    for pool in ix.state.node_pools:
        for i, domain in enumerate(pool.allow_inside):
            wrong = name_error(domain)
            if wrong is None and "." not in domain:
                wrong = f"{shown(domain)} is a top-level domain: no gitdns Zone or tenant zone can be it"
            if wrong is not None:
                yield problem(pool.origin, ("spec", "tenants", "allowInside", i), wrong,
                              "the domain of a gitdns Zone or of another pool's tenant zone", (),
                              "InvalidAllowInside")


def tenant_zones(ix: Index) -> Iterable[Problem]:
    """The fences as validation problems (blocking no Zone), and the NodePools' allowances."""
    for fence in fences(ix.state):
        if fence.code == "InvalidHostname" and host_error(fence.value) is not None:
            continue  # addressing.host_names reports it already
        yield problem(fence.tenant.origin, fence.path, fence.message, fence.hint, (), fence.code)
    yield from _allowance_problems(ix)
