"""Committed active-groups serials against the ones the clusters applied, pure.

Each agent reports, per zone, the active groups and serial it applied in ``groups.yaml`` on its
status branch (`gitdns.core.status.report.documents`).  An ``ActiveGroups`` document committed with a
serial below the highest one applied is ignored by the agents (the zone keeps its groups,
``ZoneSerialAhead``); one committed with the same serial and other groups makes one serial name
two switches.  `gitdns validate` says both as warnings (docs/failover.md, "Checking the state").

    applied_groups(doc) -> {domain: Applied}    ``groups.yaml`` read back; an entry that is not
                                                what the agent writes is left out (never guessed)
    serial_warnings(state, reports) -> [Problem] one warning per ActiveGroups document whose
                                                serial is below the highest applied, or equal to
                                                it with other groups

Status branches are written by anyone who can push to them: every value read back is checked
for its type, and every string from them is quoted and cut (`gitdns.core.problems.shown`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gitdns.core.checks.groups import group_name_error
from gitdns.core.checks.index import some
from gitdns.core.model import ActiveGroups, DesiredState, Zone
from gitdns.core.problems import Problem, shown

MAX_SERIAL = 2**63 - 1  # a reported serial above this is not what an agent writes: left out

@dataclass(frozen=True, slots=True)
class Applied:
    """What one cluster reports it applied to one zone."""

    serial: int
    groups: tuple[str, ...]  # sorted; empty: every group is active
    diverged: bool = False  # the zone held a higher serial than git (the agent followed it)


@dataclass(frozen=True, slots=True)
class Report:
    """One status branch's ``groups.yaml``: the cluster id (from the branch name), the branch,
    and what it applied per zone domain."""

    cluster: str
    branch: str
    zones: Mapping[str, Applied]


def applied_groups(doc: Mapping[str, object]) -> dict[str, Applied]:
    """``groups.yaml`` (``{"zones": {domain: {activeGroups, serial, diverged, ...}}}``) read back."""
    out: dict[str, Applied] = {}
    zones = doc.get("zones") if isinstance(doc, Mapping) else None
    if not isinstance(zones, Mapping):
        return out
    for domain, raw in zones.items():
        if not isinstance(domain, str) or not isinstance(raw, Mapping):
            continue
        serial, listed, diverged = raw.get("serial"), raw.get("activeGroups"), raw.get("diverged", False)
        if isinstance(serial, bool) or not isinstance(serial, int) or not 0 <= serial <= MAX_SERIAL:
            continue
        if not isinstance(listed, list) or not all(isinstance(g, str) for g in listed):
            continue
        out[domain.rstrip(".").lower()] = Applied(serial, tuple(sorted(set(listed))), diverged is True)
    return out


def serial_warnings(state: DesiredState, reports: Iterable[Report]) -> list[Problem]:
    """A warning for each ActiveGroups document whose serial is below the highest serial a
    cluster reports applied to its zone, or equal to it while the groups differ.  A reported
    serial 0 names no switch (an agent reports it for a zone with no document and no TXT)."""
    reports = list(reports)
    out: list[Problem] = []
    for doc in sorted(state.active_groups, key=lambda d: (d.origin.file, d.origin.index)):
        zone = state.zone(doc.zone)
        if zone is None:
            continue
        domain = zone.domain.rstrip(".").lower()
        seen = [(r, r.zones[domain]) for r in reports if domain in r.zones and r.zones[domain].serial > 0]
        if not seen:
            continue
        top = max(applied.serial for _, applied in seen)
        mine = tuple(sorted(set(doc.groups)))
        at_top = [(r, applied) for r, applied in seen if applied.serial == top]
        if doc.serial > top or (doc.serial == top and all(a.groups == mine for _, a in at_top)):
            continue
        out.append(_warning(state, doc, zone, mine, top, at_top))
    return out


def _warning(state: DesiredState, doc: ActiveGroups, zone: Zone, mine: tuple[str, ...], top: int,
             at_top: Sequence[tuple[Report, Applied]]) -> Problem:
    by_groups: dict[tuple[str, ...], set[str]] = {}
    for report, applied in at_top:
        by_groups.setdefault(applied.groups, set()).add(_cluster(state, report.cluster))
    listed = sorted(by_groups.items())
    applied_text = "; ".join(f"groups {_groups(groups)} by {_clusters(names)}" for groups, names in listed[:3])
    if len(listed) > 3:
        applied_text += f"; and {len(listed) - 3} other list(s) of groups"
    below = doc.serial < top
    message = (f"ActiveGroups {shown(doc.name)} of zone {shown(zone.name)} ({zone.domain}) commits serial "
               f"{doc.serial} with groups {_groups(mine)}, {'below' if below else 'equal to'} serial {top} "
               f"that the clusters' status branches report applied ({applied_text}): ")
    if below:
        same = all(applied.groups == mine for _, applied in at_top)
        message += ("agents keep the zone's groups (ZoneSerialAhead) and ignore this document, so the "
                    "switch it asks for does not happen" if not same else
                    "agents follow the zone's serial, not this document (ZoneSerialAhead): a later switch "
                    f"committed at serial {top} or below is ignored too")
    else:
        message += ("one serial now names two different switches: agents on this revision and agents "
                    "still on the one that applied it each rewrite the zone to their own groups")
    command = " ".join(["gitdns groups set", zone.name, *mine])
    hint = (f"run `{command}`: it numbers the change above every serial it reads, git's and the zone's; "
            f"or set spec.serial to {top + 1} or more by hand")
    if any(applied.diverged for _, applied in at_top):
        hint += (f"; if the zone's groups came from a --direct switch, `gitdns groups reconcile {zone.name}` "
                 "records them in git instead")
    code = "ActiveGroupsSerialBelowApplied" if below else "ActiveGroupsSerialReused"
    return Problem(doc.origin.file, ("spec", "serial"), message, hint=hint, line=doc.origin.line, code=code)


def _groups(groups: Sequence[str]) -> str:
    """Group names for a message: a valid name as it is, anything else quoted and cut."""
    if not groups:
        return "(all groups)"
    return ", ".join(g if group_name_error(g) is None else shown(g, 32) for g in groups)


def _cluster(state: DesiredState, ident: str) -> str:
    cluster = state.cluster(ident)
    if cluster is not None and cluster.id == ident:
        return cluster.name
    return f"id {shown(ident, 40)} (no Cluster in git)"


def _clusters(names: set[str]) -> str:
    ordered = sorted(names)
    return ("cluster " if len(ordered) == 1 else "clusters ") + some(ordered, 5)
