"""`gitdns groups log ZONE`: every switch of a zone's active groups, who made it, and when each
cluster applied it — from git alone (docs/cli.md, "gitdns groups log").

    groups_log(zone, repo, branch=, path=, state_dir=, auth=) -> GroupsLog

It walks what `gitdns history` walks (`gitdns.commands.history.trace.walked`: the desired branch's
first-parent commits that changed YAML, and every status branch, from one fetch into the same
cache) and lists a `Switch` where the zone's ``ActiveGroups`` (its serial and groups, or no
document) differs from the last valid revision's; a revision whose problems hold the zone is
skipped, as the agents keep the last valid one.  Per switch:

- who (`gitdns.commands.history.who`: the author(s), the pull request, who merged it) and when
  (the first-parent commit's time: when the switch reached the branch);
- the health gate's answer (`gitdns.commands.groups.health.activation_problems`, what
  ``groups add|set`` checks before it commits), recomputed for the groups the switch activates
  from the state before it and each status branch as it stood when the change was written (its
  author time); git does not record whether the gate ran or was overridden (``--force``);
- per cluster, when it applied the commit (`history.applied.AppliedIndex`, as `gitdns history`
  says it) and the serial and groups its ``groups.yaml`` reported then.

A break-glass switch (``groups add|remove|set --direct``) leaves no commit: it is listed from
the status branches, where an agent reports a zone serial above git's (``diverged``), at the
first status commit that reported it (`direct_switches`).  Text and JSON are in
`gitdns.commands.groups.log.fmt`.

The package's other module: `fmt` — Text and JSON of a `gitdns.commands.groups.log.GroupsLog`,
and the ``gitdns groups log`` command.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from gitdns.adapters.git.auth import GitAuth
from gitdns.commands.failover import serving
from gitdns.commands.git.read import no_status_branches
from gitdns.commands.groups.health import activation_problems
from gitdns.commands.history.applied import AppliedIndex, interleave, said_once
from gitdns.commands.history.diff import Applied, Query
from gitdns.commands.history.status import GROUPS_FILE, StatusCommit
from gitdns.commands.history.trace import Loader, clean_path, walked
from gitdns.commands.history.walk import Commit, Walk
from gitdns.commands.history.who import Who, attribute_all
from gitdns.commands.zones import find_zone
from gitdns.core.desired import Desired
from gitdns.core.groups.serials import Applied as Reported
from gitdns.core.model import Zone
from gitdns.core.problems import blocked_zones
from gitdns.core.records import normalize_name
from gitdns.core.status.doc import StatusTree
from gitdns.errors import ConfigError

NOBODY_APPLIED = ", so no cluster is known to have applied a switch"


@dataclass(frozen=True, slots=True)
class Groups:
    """A zone's active groups in git at one revision: ``serial`` None when it has no
    ActiveGroups document (every group is active), ``in_git`` False when git has no such zone."""

    in_git: bool
    serial: int | None = None
    groups: tuple[str, ...] = ()  # sorted; empty: every group is active

    def text(self) -> str:
        if not self.in_git:
            return "zone not in git"
        if self.serial is None:
            return "no ActiveGroups document (every group)"
        return f"serial {self.serial} [{', '.join(self.groups)}]" + ("" if self.groups else " (every group)")


NO_ZONE = Groups(False)


@dataclass(frozen=True, slots=True)
class Gate:
    """The health gate recomputed for a switch: the groups it activates, why activating them would
    be refused (none: passed), when it was judged (the change's author time) and how many status
    branches it read as they were then (0: git alone).  ``recorded`` False: not known (a
    break-glass switch); ``new_zone``: the zone is new in git (nothing to switch from)."""

    activated: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    at: int = 0
    statuses: int = 0
    recorded: bool = True
    new_zone: bool = False


NOT_RECORDED = Gate(recorded=False)


@dataclass(frozen=True, slots=True)
class ClusterApplied:
    """When one cluster applied a switch (`Applied`, as `gitdns history` says it), and the serial
    and groups its groups.yaml reported for the zone at that status commit (None: not reported)."""

    applied: Applied
    reported: Reported | None = None


@dataclass(frozen=True, slots=True)
class Switch:
    """One switch of the zone's active groups: through git (``commit``, ``who``) or a break-glass
    write seen only on the status branches (``commit`` None; ``recorded_by`` the commit that
    later recorded the same serial and groups in git, if one did)."""

    time: int  # the first-parent commit's time; a break-glass switch: the first status commit reporting it
    before: Groups
    after: Groups
    commit: Commit | None = None
    who: Who | None = None
    mark: str = ""
    gate: Gate = NOT_RECORDED
    applied: tuple[ClusterApplied, ...] = ()
    recorded_by: str = ""


@dataclass(frozen=True, slots=True)
class GroupsLog:
    zone: str  # the zone's domain
    zone_name: str  # its metadata.name (at the newest revision that had it)
    branch: str
    path: str
    commits: int  # commits examined
    switches: tuple[Switch, ...]
    status_branches: int = 0
    hints: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Seen:
    """A switch found in git, before who/when/applied are added: the states around it."""

    commit: Commit
    before: Groups
    after: Groups
    desired: Desired  # at the commit
    zone: Zone | None  # at the commit
    previous: Desired | None  # the last valid state before it
    previous_zone: Zone | None


def groups_log(zone: str, repo: str, *, branch: str = "main", path: str = "",
               state_dir: str | Path | None = None, auth: GitAuth | None = None) -> GroupsLog:
    """Fetch the branch and every status branch, and list the switches of ZONE's active groups
    (ZONE: a Zone's domain or metadata.name)."""
    ident = zone.strip()
    if not ident:
        raise ConfigError("groups log: give a ZONE (a Zone's domain or metadata.name)")
    return walked(repo, branch, path, state_dir, auth, lambda walk: _log(walk, ident, branch, path))


def _groups_of(desired: Desired, zone: Zone | None) -> Groups:
    if zone is None:
        return NO_ZONE
    doc = desired.state.groups_for_zone(zone.name)
    return Groups(True, doc.serial, tuple(sorted(set(doc.groups)))) if doc is not None else Groups(True)


def _held(desired: Desired, zone: Zone | None, last: Zone | None) -> bool:
    """The revision does not validate for the zone (or lost it to a broken file): the agents keep
    the last valid one."""
    name = zone.name if zone is not None else last.name if last is not None else ""
    if any(p.blocks_all for p in desired.problems):
        return True
    return bool(name) and name in blocked_zones(desired.problems, [z.name for z in desired.state.zones] + [name])


def _switches(walk: Walk, ident: str, commits: Sequence[Commit]) -> tuple[list[_Seen], Zone | None]:
    """The commits (oldest first) whose zone's groups differ from the last valid revision's, and
    the zone at the newest revision that had it.  Consecutive first-parent YAML commits: the one
    listed before a commit has its first parent's YAML."""
    loader = Loader(Query(""), walk.files_at, walk.tree_key)
    found: list[_Seen] = []
    current, last, last_zone, newest = NO_ZONE, None, None, None
    for commit in commits:
        _, desired = loader.desired(commit.sha)
        zone = find_zone(desired, ident)
        if _held(desired, zone, last_zone):
            continue
        now = _groups_of(desired, zone)
        if now != current:
            found.append(_Seen(commit, current, now, desired, zone, last, last_zone))
        current, last, last_zone = now, desired, zone
        newest = zone or newest
    return found, newest


def _activated(seen: _Seen) -> tuple[str, ...]:
    """The groups a switch makes active that were not, as ``groups add|set`` decides before it
    commits: with a non-empty list before, the new names; else (every group was active) a group
    no Cluster serving the zone is in."""
    before, after = seen.before, seen.after
    if before.serial is not None and before.groups:
        return tuple(g for g in after.groups if g not in before.groups)
    assert seen.previous is not None and seen.previous_zone is not None
    present = {c.group for c in serving(seen.previous.state, seen.previous_zone) if c.group is not None}
    return tuple(g for g in after.groups if g not in present)


def _switched_from(seen: _Seen) -> bool:
    """The zone was in git before the switch (else it is new: there is nothing to judge)."""
    return seen.previous is not None and seen.previous_zone is not None and seen.before.in_git


def _at(rows: Sequence[StatusCommit], when: int) -> dict[str, StatusCommit]:
    """Each status branch's last commit at or before ``when``."""
    out: dict[str, StatusCommit] = {}
    for row in rows:
        if row.time <= when and (row.cluster_id not in out or row.time >= out[row.cluster_id].time):
            out[row.cluster_id] = row
    return out


def _gates(walk: Walk, seen: Sequence[_Seen], who: Mapping[str, tuple[Who, str]],
           rows: Sequence[StatusCommit]) -> list[Gate]:
    """The health gate of each switch, judged at the change's author time (the newest of the
    commits a merge brought in): the status branches' summary and health as they were then
    (read at once)."""
    plans: list[tuple[_Seen, tuple[str, ...], int, dict[str, StatusCommit]]] = []
    for s in seen:
        side = who[s.commit.sha][0].side
        when = max((c.author_time for c, _ in side), default=s.commit.author_time)
        activated = _activated(s) if _switched_from(s) else ()
        plans.append((s, activated, when, _at(rows, when) if activated else {}))
    wanted = {row.files[f] for _, _, _, at in plans for row in at.values()
              for f in ("summary.yaml", "health.yaml") if f in row.files}
    texts = walk.blobs(wanted)
    gates: list[Gate] = []
    for s, activated, when, at in plans:
        if s.previous is None or s.previous_zone is None or not _switched_from(s):
            gates.append(Gate(at=when, new_zone=True))
            continue
        trees = {cid: StatusTree(row.sha, {f: texts[b] for f in ("summary.yaml", "health.yaml")
                                           if (b := row.files.get(f, "")) in texts}, time=row.time)
                 for cid, row in at.items()}
        problems = activation_problems(s.previous, s.previous_zone, activated, trees or None) if activated else []
        gates.append(Gate(activated, tuple(problems), when, len(trees)))
    return gates


def _in_git(desired: Desired) -> tuple[frozenset[str], tuple[tuple[str, str], ...]]:
    """The Clusters git names at a revision, as `AppliedIndex.applied` takes them: their ids and
    names, and (id, name) pairs."""
    clusters = desired.state.clusters
    return (frozenset(n for c in clusters for n in (c.id, c.name) if n),
            tuple(sorted((c.id or "", c.name) for c in clusters)))


def _log(walk: Walk, ident: str, branch: str, path: str) -> GroupsLog:
    walk.fetch(status=True)
    commits, _, _ = walk.commits()
    seen, zone = _switches(walk, ident, commits)
    if zone is None:
        head = Loader(Query(""), walk.files_at, walk.tree_key).desired(commits[-1].sha)[1] if commits else None
        zones = ", ".join(sorted(z.domain for z in head.state.zones)) if head is not None else ""
        raise ConfigError(f"zone {ident}: no Zone of branch {branch} has this domain or metadata.name, at any "
                          f"commit (zones at its head: {zones or 'none'})")
    rows = walk.status(groups=True)
    who = attribute_all(walk, [s.commit for s in seen])
    gates = _gates(walk, seen, who, rows)
    index = AppliedIndex(rows, walk.order())
    by_sha = {row.sha: row for row in rows}
    domain = normalize_name(zone.domain)
    rows_of: list[tuple[Applied, ...]] = []
    for s in seen:
        in_git, roster = _in_git(s.desired)
        rows_of.append(index.applied(s.commit.sha, in_git, {zone.domain}, roster))
    per_switch = said_once(rows_of)
    switches = [Switch(s.commit.time, s.before, s.after, s.commit, who[s.commit.sha][0], who[s.commit.sha][1], gate,
                       tuple(ClusterApplied(a, _reported(by_sha.get(a.status_sha), domain)) for a in applied))
                for s, gate, applied in zip(seen, gates, per_switch, strict=True)]
    switches = direct_switches(switches, rows, domain)
    hints = [] if rows else [no_status_branches(walk.url, walk.local, NOBODY_APPLIED)]
    return GroupsLog(zone.domain, zone.name, branch, clean_path(path), len(commits), tuple(switches),
                     len({r.cluster_id for r in rows}), (*walk.notes, *hints))


def _reported(row: StatusCommit | None, domain: str) -> Reported | None:
    if row is None or GROUPS_FILE not in row.files:
        return None
    return row.groups.get(domain)


# -- break-glass switches --------------------------------------------------------------------------


def direct_switches(switches: Sequence[Switch], rows: Sequence[StatusCommit], domain: str) -> list[Switch]:
    """``switches`` (from git, in the branch's order) with the break-glass ones merged in by time.

    ``groups add|remove|set --direct`` writes the zone's active-groups TXT and leaves no commit;
    an agent that finds the zone's serial above git's follows the zone and reports it in its
    groups.yaml with ``diverged: true`` (`gitdns.core.groups.serials`).  A serial and groups
    reported so is a break-glass switch unless git committed the same serial and groups before
    that report (an agent still on an older revision follows a zone another agent already
    switched from git).  It is listed at the first status commit that reported it (the write
    itself is recorded nowhere), from the groups active before it, with the later commit that
    records the same serial and groups (``groups reconcile``) if there is one."""
    ordered = sorted(rows, key=lambda r: r.time)
    committed = [(s.time, s.after) for s in switches]
    first: dict[Groups, tuple[StatusCommit, Reported]] = {}
    for row in ordered:
        rep = row.groups.get(domain)
        if rep is None or not rep.diverged or rep.serial <= 0:
            continue
        after = Groups(True, rep.serial, rep.groups)
        if after in first or any(when <= row.time and groups == after for when, groups in committed):
            continue
        first[after] = (row, rep)
    if not first:
        return list(switches)
    names = {row.cluster_id: row.cluster for row in ordered}
    found = [Switch(row.time, Groups(True), after, applied=_direct_applied(ordered, names, after, domain),
                    recorded_by=next((s.commit.sha for s in switches
                                      if s.commit is not None and s.after == after and s.time >= row.time), ""))
             for after, (row, _) in first.items()]
    merged = interleave(switches, found, lambda s: s.time)
    out: list[Switch] = []
    for s in merged:  # a break-glass switch starts from the groups active before it, from git or the zone
        out.append(replace(s, before=out[-1].after if out else Groups(True)) if s.commit is None else s)
    return out


def _direct_applied(rows: Sequence[StatusCommit], names: dict[str, str], after: Groups,
                    domain: str) -> tuple[ClusterApplied, ...]:
    """Per cluster with a status branch, the first status commit (``rows`` by time) reporting
    ``after``'s serial or a higher one for the zone (exact: the same serial and groups); a
    cluster that never did is listed without one."""
    assert after.serial is not None
    seen: dict[str, ClusterApplied] = {}
    for row in rows:
        rep = row.groups.get(domain)
        if row.cluster_id in seen or rep is None or rep.serial < after.serial:
            continue
        exact = rep.serial == after.serial and rep.groups == after.groups
        seen[row.cluster_id] = ClusterApplied(Applied(names[row.cluster_id], at=row.time, status_sha=row.sha,
                                                      exact=exact), rep)
    missing = [ClusterApplied(Applied(name)) for cid, name in names.items() if cid not in seen]
    return tuple(sorted([*seen.values(), *missing], key=lambda a: a.applied.cluster))
