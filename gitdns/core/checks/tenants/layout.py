"""What the orchestrator would leave out of a node pool's CoreDNS files, found before it runs.

The orchestrator lays each pool's tenants out in zone blocks (`gitdns.core.corefile.layout`)
and checks the names that go into the files with CoreDNS's rules
(`gitdns.core.corefile.check`) before it delivers them; a tenant that fails is left out, and
the others are delivered.  This check runs the very same functions on the desired state, so a
pull request learns in CI what the orchestrator would leave out and why:

* a tenant whose zone another node pool serves (one CoreDNS server block per zone), when the
  pools' ``allowInside`` let both claim it (``TenantZoneServedElsewhere``);
* a domain outside the tenant's ``spec.zone`` (``TenantDomainOutsideZone``);
* a zone block whose hosts file name CoreDNS would not take, e.g. ``<zone>.hosts`` of a zone
  that starts with ``_`` (``InvalidTenantFile``).

Tenants the fences refuse (`gitdns.core.checks.tenants`) are reported there and left out here.
The problems block no Zone, as tenant problems never do.
"""

from __future__ import annotations

from collections.abc import Iterable

from gitdns.core.checks.index import Index, problem
from gitdns.core.checks.tenants import refused_tenants
from gitdns.core.corefile import layout
from gitdns.core.corefile.check import file_name_error
from gitdns.core.model import Tenant
from gitdns.core.problems import Path, Problem

HOSTS_SUFFIX = ".hosts"


def _path(tenant: Tenant, code: str, reason: str) -> Path:
    if code == "TenantDomainOutsideZone":
        for i, domain in enumerate(tenant.domains):
            if f"domain {domain} " in reason:
                return ("spec", "domains", i)
    return ("spec", "zone") if tenant.zone else ("spec", "domains")


def tenant_layout(ix: Index) -> Iterable[Problem]:
    """The tenants each pool's layout leaves out, and zone blocks whose file names CoreDNS
    refuses (see the module docstring)."""
    state = ix.state
    tenants = {t.name: t for t in state.tenants}
    refused = refused_tenants(state)
    for pool in state.node_pools:
        plan = layout(state, pool.name, refused)
        for skipped in plan.skipped:
            tenant = tenants[skipped.tenant]
            code = skipped.code or "TenantLeftOut"
            hint = ("give the tenant a zone of its own, or move it to the node pool that serves the zone"
                    if code == "TenantZoneServedElsewhere" else "a domain inside spec.zone, or another spec.zone")
            yield problem(tenant.origin, _path(tenant, code, skipped.reason),
                          f"the orchestrator of node pool {pool.name} leaves this out: {skipped.reason}", hint, (),
                          code)
        for block in plan.blocks:
            wrong = file_name_error(block.hosts_file, HOSTS_SUFFIX)
            if wrong is None:
                continue
            for name in block.tenants:
                tenant = tenants[name]
                message = (f"the hosts file of zone {block.zone} (node pool {pool.name}): {wrong}; the orchestrator "
                           "delivers no block for it")
                yield problem(tenant.origin, _path(tenant, "", ""), message,
                              "a zone that starts with a letter or digit, of at most 236 characters", (),
                              "InvalidTenantFile")
