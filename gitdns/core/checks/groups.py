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


def absent_active_groups(ix: Index) -> Iterable[Problem]:
    """A WARNING, never a hold: grouped clusters serve a zone with no ActiveGroups document.
    Kuadrant's "DNS Failover" design: "if this registry entry is absent or empty all groups
    are considered active", so every group publishes.  The warning names the zone because
    dns-operator clusters sharing it read the same absence as "only ungrouped clusters are
    active" (docs/records.md, "Differences from dns-operator"), and because the first
    ``gitdns groups set`` is what narrows it."""
    covered = {g.zone for g in ix.state.active_groups} | {n for k, n in ix.rejected if k == "ActiveGroups"}
    if "ActiveGroups" in ix.rejected_kinds:
        return
    grouped: dict[str, list[Cluster]] = defaultdict(list)
    for cluster in ix.state.clusters:
        if cluster.group is not None:
            for zone_name in ix.zones_of(cluster):
                if zone_name not in covered:
                    grouped[zone_name].append(cluster)
    for zone_name in sorted(grouped):
        clusters = sorted(grouped[zone_name], key=lambda c: c.name)
        names = sorted({c.group for c in clusters if c.group is not None})
        zone = ix.state.zone(zone_name)
        domain = zone.domain if zone is not None else zone_name
        message = (
            f"zone {zone_name!r} ({domain}) has grouped clusters (groups {', '.join(names)}: "
            f"{len(clusters)} cluster(s), first {clusters[0].name!r}) and no ActiveGroups document: "
            "every group is active and publishes (dns-operator clusters sharing the zone publish only "
            "their ungrouped clusters until a list exists)"
        )
        hint = f"to fail over, run `gitdns groups set {zone_name} GROUP...`: it creates the document"
        yield problem(clusters[0].origin, ("spec", "group"), message, hint, (), "MissingActiveGroups")
