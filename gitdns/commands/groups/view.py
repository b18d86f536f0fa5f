"""`gitdns groups get`: what git and the zone say of a zone's active groups, as one value.

    GitSource                 where git's side was read (origin's desired branch, fetched now)
    judge(...) -> GroupsView  the zone's state judged against git's document (built once)
    to_lines(view) -> list    the text: one line each, as `groups get` prints them
    to_json(view) -> str      the same as one JSON document

The command (`gitdns.commands.groups.verbs.get`) reads git and the zone; this module decides and
formats, and reads nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from gitdns.commands import failover
from gitdns.commands.groups.check import show
from gitdns.commands.groups.status import FleetStatus
from gitdns.core import groups
from gitdns.core.desired import Desired
from gitdns.core.model import ActiveGroups, Zone
from gitdns.core.records import ZoneSnapshot

LEVEL, PENDING, DIVERGED, UNKNOWN = "level", "pending", "diverged", "unknown"
KUADRANT_DIFFERS = "Kuadrant's TXT lists other groups than gitdns's (written by a Kuadrant CLI?)"


@dataclass(frozen=True, slots=True)
class GitSource:
    """Where git's side was read (`groups.fetch.fetch_desired`)."""

    ref: str  # "origin/main"; "HEAD" without origin, after a failed fetch, or at origin's head
    sha: str
    origin: bool  # the work tree has a remote named origin
    error: str = ""  # origin could not be fetched: the message (judged from the local checkout)
    reason: str = ""

    @property
    def fetched(self) -> bool:
        return self.origin and not self.error


@dataclass(frozen=True, slots=True)
class Converge:
    """What the agents will still add and remove before the zone matches the groups in force."""

    health: tuple[str, ...]  # the preview's health notes
    diff: failover.EndpointDiff
    absent: str  # the zone compared with does not exist: the counts carry a caveat


@dataclass(frozen=True, slots=True)
class GroupsView:
    """`groups get`'s answer.  ``source`` None: no git work tree (the directory as it is).
    ``unreadable``: the zone's TXT could not be read (why); nothing after it is known then."""

    domain: str
    name: str
    source: GitSource | None
    document: ActiveGroups | None
    unreadable: str = ""
    txt: groups.ZoneGroups | None = None
    absent: str = ""  # a `local` store that holds no such zone (`failover.absent_zone`)
    state: str = ""  # LEVEL, PENDING, DIVERGED or UNKNOWN (diverged, but origin not fetched)
    serial: int = 0  # the serial in force
    active: tuple[str, ...] = ()  # empty: every group
    warnings: tuple[str, ...] = ()
    kuadrant_differs: bool = False
    converge: Converge | None = None  # None: the zone's records were not read

    @property
    def git_serial(self) -> int:
        return self.document.serial if self.document is not None else 0

    @property
    def notes(self) -> tuple[str, ...]:
        return (*([self.absent] if self.absent else []), *([KUADRANT_DIFFERS] if self.kuadrant_differs else []))


def judge(desired: Desired, zone: Zone, source: GitSource | None, state: groups.ZoneGroups,
          snapshot: ZoneSnapshot | None, absent: str, status: FleetStatus | None) -> GroupsView:
    """The zone's TXT ``state`` against git's document; ``snapshot`` (the whole zone, when read)
    gives what is still to converge."""
    doc = desired.state.groups_for_zone(zone.name)
    decision = groups.decide(doc, state, zone.domain)
    fresh = source is None or not source.error
    if decision.diverged:
        judged = DIVERGED if fresh else UNKNOWN
    else:
        judged = PENDING if decision.write else LEVEL
    warnings: list[str] = []
    if doc is not None and state.serial is not None and doc.serial <= state.serial \
            and tuple(sorted(doc.groups)) != (state.groups or ()):
        effect = ("agents keep the zone's groups (ZoneSerialAhead)" if doc.serial < state.serial else
                  "agents mirror git's, but one serial now names two different switches")
        warnings.append(f"git's serial {doc.serial} is at or below the one the zone applied ({state.serial}) "
                        f"while their groups differ: {effect}; `gitdns groups set` numbers a change above every "
                        "serial it reads")
    active = tuple(sorted(decision.active))
    converge = None
    if snapshot is not None:
        sim = failover.simulate_switch(desired, zone, snapshot, active, serial=decision.serial, status=status,
                                       absent=absent)
        converge = Converge(tuple(n for n in sim.notes if n.startswith("health: ")), sim.diff, absent)
    differs = state.kuadrant is not None and state.groups is not None and state.kuadrant != state.groups
    return GroupsView(zone.domain, zone.name, source, doc, "", state, absent, judged, decision.serial, active,
                      tuple(warnings), differs, converge)


def _source_line(source: GitSource) -> str:
    if source.error:
        return (f"git: origin NOT fetched ({source.error} ({source.reason})): judging from the local checkout at "
                f"{source.sha[:7]}, which may be behind origin")
    return f"git: {source.ref} at {source.sha[:7]}" + (" (fetched now)" if source.ref != "HEAD" else "")


def decision_message(view: GroupsView) -> str:
    """What the state means, as the text says it after ``LEVEL:``, ``DIVERGED:``, ..."""
    if view.state == UNKNOWN:
        return (f"the zone's serial {view.serial} is above the local checkout's {view.git_serial}, but origin was "
                "not fetched: fetch it (or fix the transport) before acting on this")
    if view.state == DIVERGED:
        return (f"the zone is ahead of git (serial {view.serial} > {view.git_serial}); agents follow the zone and "
                f"report GroupsDivergedFromGit: after a --direct switch, `gitdns groups reconcile {view.name}` "
                "records it in git; if git's document was re-created or edited with a lower serial, "
                "`gitdns groups set` numbers above the zone")
    if view.state == PENDING:
        return f"agents will mirror git's serial {view.serial} into the zone"
    return "the zone mirrors git"


def to_lines(view: GroupsView) -> list[str]:
    """The text of `groups get`, one line each (the caller puts each through the text gate)."""
    out = [_source_line(view.source)] if view.source is not None else []
    out.append(f"zone {view.domain} ({view.name})")
    doc = view.document
    if doc is None:
        out.append("git: no ActiveGroups document: every group is active")
    else:
        out.append(f"git: ActiveGroups {doc.name} ({doc.origin.file}): serial {doc.serial}, groups {show(doc.groups)}")
    state = view.txt
    if view.unreadable or state is None:
        return [*out, f"zone: not readable: {view.unreadable}"]
    gitdns_part = ("absent" if state.groups is None
                   else f"serial {state.serial if state.serial is not None else '?'}, groups {show(state.groups)}")
    kuadrant_part = "absent" if state.kuadrant is None else show(state.kuadrant)
    out.append(f"zone: {groups.gitdns_name(view.domain)}: {gitdns_part}; "
               f"{groups.kuadrant_name(view.domain)}: {kuadrant_part}")
    if view.absent:
        out.append(f"note: {view.absent}")
    decision = f"{view.state.upper() if view.state in (DIVERGED, UNKNOWN) else view.state}: {decision_message(view)}"
    if view.state in (DIVERGED, UNKNOWN):
        out.append(decision)
    out += [f"warning: {w}" for w in view.warnings]
    if view.state in (LEVEL, PENDING):
        out.append(decision)
    if view.kuadrant_differs:
        out.append(f"note: {KUADRANT_DIFFERS}")
    out.append(f"active now: {show(view.active)}")
    if view.converge is not None:
        out.append("still to converge (what the agents will add and remove):")
        out += [f"note: {n}" for n in view.converge.health]
        out += failover.endpoint_lines(view.converge.diff, view.converge.absent)
    return out


def to_json(view: GroupsView) -> str:
    """The view as one JSON document (docs/cli.md, `gitdns groups`)."""
    source, doc, state = view.source, view.document, view.txt
    readable = not view.unreadable and state is not None
    out = {
        "zone": view.domain,
        "zoneName": view.name,
        "git": {
            "ref": source.ref if source else None,
            "sha": source.sha if source else None,
            "origin": bool(source and source.origin),
            "fetched": bool(source and source.fetched),
            "fetchError": {"message": source.error, "reason": source.reason} if source and source.error else None,
            "activeGroups": None if doc is None else {"name": doc.name, "file": doc.origin.file,
                                                      "serial": doc.serial, "groups": sorted(doc.groups)},
        },
        "zoneTxt": {
            "readable": readable,
            "error": view.unreadable or None,
            "gitdns": None if state is None else {"name": groups.gitdns_name(view.domain), "serial": state.serial,
                                                  "groups": None if state.groups is None else list(state.groups)},
            "kuadrant": None if state is None else {
                "name": groups.kuadrant_name(view.domain),
                "groups": None if state.kuadrant is None else list(state.kuadrant)},
        },
        "decision": {"state": view.state, "serial": view.serial, "gitSerial": view.git_serial,
                     "message": decision_message(view)} if readable else None,
        "active": list(view.active) if readable else None,
        "warnings": list(view.warnings),
        "notes": list(view.notes),
        "converge": None if view.converge is None else {
            "health": list(view.converge.health),
            **failover.endpoints_dict(view.converge.diff, view.converge.absent)},
    }
    return json.dumps(out, indent=2, sort_keys=True) + "\n"
