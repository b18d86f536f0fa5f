"""Failover group names and the ActiveGroups document of every grouped zone."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from gitdns.core.addresses import shown
from gitdns.core.checks.index import Index, on, problem
from gitdns.core.model import ActiveGroups, Cluster
from gitdns.core.problems import Path, Problem

MAX_GROUP_NAME = 16
# Kuadrant's contract (; & , space " '), and '=', '\\' and control characters: a group name goes
# into the external-dns/group label of every ownership TXT and into the active-groups TXT
# (`gitdns.core.registry.label_error`).  Only ASCII.
GROUP_FORBIDDEN = ";&, \"'=\\" + "".join(map(chr, range(32))) + "\x7f"


def group_name_error(name: str) -> str | None:
    """What keeps ``name`` from being a failover group name; None when it is one."""
    if not name:
        return "a group name cannot be empty"
    if len(name) > MAX_GROUP_NAME:
        return f"group name {shown(name)} is {len(name)} characters long"
    bad = sorted({ch for ch in name if ch in GROUP_FORBIDDEN or not ch.isascii()},
                 key=lambda ch: (GROUP_FORBIDDEN.find(ch), ch))
    return f"group name {shown(name)} contains {' '.join(repr(ch) for ch in bad)}" if bad else None


def group_names(ix: Index) -> Iterable[Problem]:
    hint = f"at most {MAX_GROUP_NAME} printable ASCII characters, none of ; & , = \\ space \" '"
    named: list[tuple[Cluster | ActiveGroups, str, Path]] = [
        (c, c.group, ("spec", "group")) for c in ix.state.clusters if c.group is not None
    ]
    named += [
        (g, name, ("spec", "groups", i)) for g in ix.state.active_groups for i, name in enumerate(g.groups)
    ]
    for obj, name, path in named:
        message = group_name_error(name)
        if message is not None:
            yield on(ix, obj, path, message, hint, "InvalidGroupName")


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
        yield problem(
            clusters[0].origin, ("spec", "group"), message, hint, (zone_name,), "MissingActiveGroups"
        )

