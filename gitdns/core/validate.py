"""Semantic validation of a whole `DesiredState`.

`validate` runs every check in `CHECKS` and returns all problems at once.  A check is a small
function from an `Index` (the state with its hosts, gateways and zones looked up once, so
nothing is quadratic) to problems; each problem names the file, YAML path, what is wrong, what
would be right and the zones it blocks.  The checks live in `gitdns.core.checks`, one module
per topic; what each provider type accepts comes from the provider table
(`gitdns.core.providertypes`).  `check` is the whole pipeline for a tree of files: load,
schema-check, validate, and point every problem at its line.  `warnings` runs the checks in
`WARNINGS`: things worth saying that hold no zone.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from gitdns.core.blobcache import ValidationCache
from gitdns.core.checks import (
    addressing,
    cnames,
    dnsnames,
    groups,
    hosts,
    policies,
    providers,
    records,
    references,
    serving,
    tenants,
)
from gitdns.core.checks.groups import GROUP_FORBIDDEN, MAX_GROUP_NAME
from gitdns.core.checks.index import CheckMemo, Index
from gitdns.core.checks.reach import probe_targets
from gitdns.core.checks.tenants import layout as tenantlayout
from gitdns.core.loader import LoadResult, ParseMemo, load
from gitdns.core.locate import refine_lines
from gitdns.core.model import DesiredState
from gitdns.core.problems import Problem
from gitdns.core.reach import Network

__all__ = ["CHECKS", "GROUP_FORBIDDEN", "MAX_GROUP_NAME", "WARNINGS", "Check", "Index", "check", "validate",
           "warnings"]

Check = Callable[[Index], Iterable[Problem]]
CHECKS: tuple[Check, ...] = (
    references.duplicate_names,
    references.duplicate_cluster_ids,
    providers.provider_types,
    references.zone_settings,
    references.default_provider_namespace,
    providers.provider_credentials,
    providers.provider_settings,
    references.policy_targets,
    references.zone_references,
    references.tenant_node_pools,
    addressing.host_names,
    addressing.gateway_addresses,
    addressing.excluded_addresses,
    addressing.node_addresses,
    records.record_values,
    records.record_names,
    hosts.hosts_in_zones,
    hosts.txt_registry_names,
    policies.policy_conflicts,
    policies.default_geo_has_cluster,
    providers.geo_codes,
    providers.weights,
    providers.loadbalanced_needs_routing,
    providers.record_types,
    groups.group_names,
    hosts.static_records,
    serving.nameservers,
    tenants.tenant_zones,
    tenantlayout.tenant_layout,
    probe_targets,
    dnsnames.zone_domains,
    dnsnames.policy_names,
    dnsnames.apex_records,
    cnames.cname_loops,
)

# Warnings: worth saying, never a held zone nor a failed validation (each yields `Problem`s
# whose ``zones`` is empty).
WARNINGS: tuple[Check, ...] = (
    groups.absent_active_groups,
)


def validate(state: DesiredState, rejected: Collection[tuple[str, str]] = (),
             probe_ranges: Sequence[Network] = (), memo: CheckMemo | None = None) -> list[Problem]:
    """Every semantic problem of ``state``.  ``rejected`` lists (kind, name) of documents that
    failed their schema: references to them are not reported again.  ``probe_ranges``: the
    ranges the operator lets probes reach (``--probe-allow-ranges``; default none, as the
    daemons' default).  ``memo``: the checks' results of earlier validations, each reused while
    everything it read is unchanged (`gitdns.core.checks.index.CheckMemo`)."""
    index = Index(state, rejected, probe_ranges, memo)
    if memo is not None:
        memo.bounded()
    return [problem for check_ in CHECKS for problem in index.derived(_KEYS[check_], _run(check_))]


def _run(check_: Check) -> Callable[[Index], list[Problem]]:
    return lambda ix: list(check_(ix))


_KEYS = {check_: f"check:{check_.__module__}.{check_.__qualname__}" for check_ in CHECKS}


def warnings(state: DesiredState, rejected: Collection[tuple[str, str]] = ()) -> list[Problem]:
    """What `validate` says without failing: e.g. grouped clusters in a zone with no
    ActiveGroups document (every group is active).  Nothing here holds a zone."""
    index = Index(state, rejected)
    return [problem for check_ in WARNINGS for problem in check_(index)]


def check(files: Mapping[str, str], schemas: Mapping[str, Mapping[str, Any]],
          memo: ParseMemo | ValidationCache | None = None, probe_ranges: Sequence[Network] = (),
          blob_ids: Mapping[str, str] | None = None) -> LoadResult:
    """Load, schema-check and validate a tree of files; every problem points at its line.
    ``memo``: a `gitdns.core.loader.ParseMemo` (parses kept), or a
    `gitdns.core.blobcache.ValidationCache` (files kept by blob id, ``blob_ids`` when the caller
    knows them, and the checks' results by what they read); ``probe_ranges`` as `validate`."""
    loaded = load(files, schemas, memo, blob_ids)
    checks = memo.checks if isinstance(memo, ValidationCache) else None
    semantic = refine_lines(validate(loaded.state, loaded.rejected, probe_ranges, checks), files)
    problems = sorted([*loaded.problems, *semantic], key=lambda p: (p.file, p.line, p.yaml_path))
    return replace(loaded, problems=problems)
