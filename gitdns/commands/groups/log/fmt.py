"""Text and JSON of a `gitdns.commands.groups.log.GroupsLog`, and the ``gitdns groups log`` command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gitdns.adapters.git.auth import GitAuth
from gitdns.commands import Result
from gitdns.commands.groups.log import ClusterApplied, Gate, Groups, GroupsLog, Switch, groups_log
from gitdns.commands.history.diff import iso_date
from gitdns.commands.history.fmt import applied_text
from gitdns.commands.history.who import MARKS, NOT_RECORDED, who_dict, who_lines
from gitdns.core.groups.serials import Applied as Reported
from gitdns.core.text import lines as text_lines


def _reported_text(r: Reported) -> str:
    groups = Groups(True, r.serial, r.groups).text()
    return f"zone at {groups}" + (", ahead of git" if r.diverged else "")


def _applied_line(c: ClusterApplied, direct: bool) -> str:
    a = c.applied
    if direct:
        if not a.at:
            return f"{a.cluster}: never reported it"
        later = "" if a.exact else " (a later serial)"
        return f"{a.cluster}: reported {iso_date(a.at)}{later}" + (f" ({_reported_text(c.reported)})"
                                                                  if c.reported is not None else "")
    if not a.at or a.held_since or c.reported is None:
        return applied_text(a)
    notes = ([] if a.exact else [f"as part of {a.revision[:7]}"]) + [_reported_text(c.reported)]
    return f"{a.cluster}: applied {iso_date(a.at)} ({'; '.join(notes)})"


def gate_text(gate: Gate) -> str:
    if not gate.recorded:
        return f"health gate: {NOT_RECORDED} (a break-glass write)"
    if gate.new_zone:
        return "health gate: none (the zone is new in git)"
    if not gate.activated:
        return "health gate: nothing activated, nothing to check"
    basis = (f"git and {gate.statuses} status branch(es) as of {iso_date(gate.at)}" if gate.statuses else
             f"git alone: no status branch had published by {iso_date(gate.at)}")
    groups = ", ".join(gate.activated)
    if not gate.problems:
        return f"health gate for {groups} (recomputed from {basis}): passed"
    return (f"health gate for {groups} (recomputed from {basis}): refused without --force: "
            + "; ".join(gate.problems))


def _switch_text(s: Switch) -> list[str]:
    c = s.commit
    if c is None or s.who is None:
        recorded = (f"; recorded in git later by {s.recorded_by[:7]}" if s.recorded_by else "; never recorded in git")
        lines = ["", f"(no commit)  {iso_date(s.time)}  break-glass: written to the zone directly "
                     f"(groups --direct){recorded}",
                 f"  who: {NOT_RECORDED} (first reported by a status branch at {iso_date(s.time)})"]
    else:
        lines = ["", f"{c.sha[:7]}  {iso_date(s.time)}  [{MARKS.get(s.mark, s.mark)}]  {c.subject}"]
        lines.extend(f"  {line}" for line in who_lines(s.who))
    lines.append(f"  active groups: {s.before.text()} -> {s.after.text()}")
    lines.append(f"  {gate_text(s.gate)}")
    lines.extend(f"  {_applied_line(a, c is None)}" for a in s.applied)
    return lines


def to_text(log: GroupsLog) -> str:
    where = f" path {log.path}" if log.path else ""
    direct = sum(1 for s in log.switches if s.commit is None)
    more = f" ({direct} break-glass, from the status branches)" if direct else ""
    lines = [f"groups log of zone {log.zone} ({log.zone_name}): {len(log.switches)} switch(es){more} in "
             f"{log.commits} commit(s) of branch {log.branch}{where}, {log.status_branches} status branch(es)"]
    lines.extend(f"hint: {h}" for h in log.hints)
    for s in log.switches:
        lines.extend(_switch_text(s))
    return text_lines(lines)


def _groups_dict(g: Groups) -> dict[str, Any]:
    return {"inGit": g.in_git, "serial": g.serial, "groups": list(g.groups) if g.serial is not None else None}


def _gate_dict(gate: Gate) -> dict[str, Any]:
    if not gate.recorded:
        return {"known": False, "activated": [], "passed": None, "problems": [], "asOf": None, "statusBranches": 0}
    judged = bool(gate.activated) and not gate.new_zone
    return {"known": True, "activated": list(gate.activated), "passed": not gate.problems if judged else None,
            "problems": list(gate.problems), "asOf": iso_date(gate.at) if judged else None,
            "statusBranches": gate.statuses}


def _applied_dict(c: ClusterApplied) -> dict[str, Any]:
    a, r = c.applied, c.reported
    return {"cluster": a.cluster, "at": iso_date(a.at) if a.at else None, "revision": a.revision or None,
            "statusCommit": a.status_sha or None, "exact": a.exact, "inGit": a.in_git, "statusBranch": a.branch,
            "held": {"since": iso_date(a.held_since), "zone": a.held_zone, "lastGood": a.last_good or None,
                     "reason": a.held_reason} if a.held_since else None,
            "reported": {"serial": r.serial, "groups": list(r.groups), "diverged": r.diverged} if r else None}


def switch_dict(s: Switch) -> dict[str, Any]:
    c = s.commit
    return {"kind": "git" if c is not None else "direct", "date": iso_date(s.time),
            "sha": c.sha if c else None, "sha7": c.sha[:7] if c else None, "subject": c.subject if c else None,
            "author": c.author if c else None, "committer": c.committer if c else None,
            "authorDate": iso_date(c.author_time) if c else None, "signature": s.mark or None, **who_dict(s.who),
            "before": _groups_dict(s.before), "after": _groups_dict(s.after), "healthGate": _gate_dict(s.gate),
            "recordedBy": s.recorded_by or None, "applied": [_applied_dict(a) for a in s.applied]}


def to_json(log: GroupsLog) -> str:
    doc = {"zone": log.zone, "zoneName": log.zone_name, "branch": log.branch, "path": log.path or None,
           "commits": log.commits, "statusBranches": log.status_branches, "hints": list(log.hints),
           "switches": [switch_dict(s) for s in log.switches]}
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def log_command(zone: str, repo: str, *, branch: str = "main", path: str = "", state_dir: str | Path | None = None,
                fmt: str = "text", auth: GitAuth | None = None) -> Result:
    """``gitdns groups log ZONE``: text or JSON."""
    result = groups_log(zone, repo, branch=branch, path=path, state_dir=state_dir, auth=auth)
    return Result(out=[to_json(result) if fmt == "json" else to_text(result)])
