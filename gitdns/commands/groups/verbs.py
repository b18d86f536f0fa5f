"""`gitdns groups get|add|remove|set|reconcile`: active failover groups (Kuadrant's "DNS Failover"
proposal; docs/failover.md).

git holds the truth (the zone's ``ActiveGroups`` document); agents mirror it into the zone's
TXT (`gitdns.core.groups`).  A change is a pull request:

    add/remove/set   edit the ActiveGroups file in place (`groups.file`), bump ``spec.serial``,
                     validate the whole repository, commit on a NEW branch (never on the
                     checked-out one; the work tree, the index and the checked-out branch stay
                     as they were), optionally push it to ``origin``, and return the
                     pull-request description with the merged-zone plan (`failover`),
                     each cluster's health as origin's status branches say (`groups.status`).
                     The status branches and ``--push`` use the git transport
                     ``Request.auth`` (--ssh-key, --token-file, ...: `gitdns.commands.git.remote`).
    --direct         break-glass when git is unreachable (`groups.direct`).
    reconcile        the zone ahead of git (after --direct): write git level with the zone's
                     serial and groups, on a new branch for a pull request.
    get              git's ActiveGroups, the zone's TXT and whether they diverge (`groups.view`:
                     the answer as one value, its text and JSON).

Activating a group is refused without ``--force`` unless the group has a healthy endpoint
(`groups.health`).  Refusals raise `GroupsRefused` (exit 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from gitdns.commands import Result, failover
from gitdns.commands.groups.check import (
    ACTIONS,
    GroupsRefused,
    Request,
    check_group_names,
    read_groups,
    show,
    target_groups,
)
from gitdns.commands.groups.direct import direct
from gitdns.commands.groups.file import GROUPS_DIR, edit_text, new_file_text, new_problems
from gitdns.commands.groups.health import activation_problems, health_trees, refuse_unhealthy
from gitdns.commands.groups.status import FleetStatus, fleet_status, local_status
from gitdns.commands.groups.view import GitSource, GroupsView, judge, to_json, to_lines
from gitdns.commands.zones import need_zone
from gitdns.core import groups
from gitdns.core.desired import Desired
from gitdns.core.model import Zone
from gitdns.core.records import ZoneSnapshot
from gitdns.errors import ConfigError, GitdnsError, UnreachableError
from gitdns.providers.base import Provider
from gitdns.reconcile.engine import default_factory, from_files, load

if TYPE_CHECKING:
    from gitdns.adapters.worktree import WorkTree
    from gitdns.commands.groups.fetch import Fetched

__all__ = ["GroupsRefused", "Request", "change", "direct", "get", "reconcile", "run"]

T = TypeVar("T")


def _read_zone(provider: Provider, zone: Zone) -> tuple[ZoneSnapshot | None, str]:
    try:
        return provider.read(zone.domain), ""
    except GitdnsError as exc:
        return None, f"{exc} ({exc.reason})"


def _provider(req: Request, zone: Zone) -> tuple[Provider | None, str]:
    try:
        return default_factory(req.repo, fences=req.fences)(zone), ""
    except GitdnsError as exc:
        return None, f"{exc} ({exc.reason})"


def run(req: Request) -> Result:
    if req.action not in ACTIONS:
        raise ConfigError(f"unknown groups command {req.action!r}")
    check_group_names(req.groups)
    if req.action == "log":  # read-only, from git: `gitdns.commands.groups.log`
        from gitdns.commands.groups.log.fmt import log_command

        return log_command(req.zone, str(req.repo), fmt=req.format, auth=req.auth)
    if req.action == "get":
        return get(req)
    if req.direct:
        if req.action == "reconcile":
            raise ConfigError("--direct does not apply to reconcile (it writes git)")
        return direct(req)
    if req.action == "reconcile":
        return reconcile(req)
    return change(req)


def _get_desired(req: Request) -> tuple[Desired, GitSource | None, FleetStatus]:
    """git's side for ``get``: origin's desired branch, fetched now; the checkout when there is
    no work tree (source None) or no origin.  Returns (desired, source, status): the source says
    when origin could not be fetched (the answer then comes from the local checkout); status: the
    clusters' status branches, origin's when it was fetched, else the repository's own."""
    from gitdns.adapters import worktree
    from gitdns.commands.groups.fetch import fetch_desired, head_at

    try:
        wt = worktree.open_worktree(req.repo)
    except worktree.WorkTreeError:
        return load(req.repo), None, local_status(Path(req.repo))
    fetched = fetch_desired(wt, req.auth)
    desired = from_files(Path(req.repo), fetched.files, head_at(wt, fetched.sha))
    origin = wt.origin_url() is not None
    if fetched.error is not None:
        return desired, GitSource(fetched.ref, fetched.sha, origin, str(fetched.error), fetched.error.reason), \
            local_status(wt.root)
    return desired, GitSource(fetched.ref, fetched.sha, origin), fleet_status(wt.root, wt.origin_url(), req.auth)


def get(req: Request) -> Result:
    """git's ActiveGroups, the zone's TXT, the decision and what is still to converge
    (`groups.view`): text, or JSON with ``req.format == "json"``."""
    desired, source, status = _get_desired(req)
    zone = need_zone(desired, req.zone, desired.root)
    provider, why = _provider(req, zone)
    state: groups.ZoneGroups | None = None
    if provider is not None:
        try:
            state = read_groups(provider, zone)
        except GitdnsError as exc:
            why = f"{exc} ({exc.reason})"
    if state is None:
        view = GroupsView(zone.domain, zone.name, source, desired.state.groups_for_zone(zone.name), why)
    else:
        snapshot, _ = _read_zone(provider, zone) if provider is not None else (None, "")
        view = judge(desired, zone, source, state, snapshot, failover.absent_zone(provider, zone), status)
    if req.format == "json":
        return Result(out=[to_json(view)])
    result = Result()
    result.lines(to_lines(view))
    return result


def _pr_text(title: str, zone: Zone, before: Sequence[str], after: Sequence[str], serials: tuple[int, int],
             branch: str, pushed: bool, sim: failover.Switch, names: dict[str, str]) -> list[str]:
    lines = [f"branch {branch} committed" + (" and pushed to origin" if pushed else
                                              f" (push: git push origin {branch})"),
             "", "--- pull request ---", f"title: {title}", "",
             f"Active groups of zone `{zone.domain}`: **{show(before)}** -> **{show(after)}** "
             f"(serial {serials[0]} -> {serials[1]}).", "",
             "After the merge, agents in inactive groups publish nothing (their ownership labels stay); "
             "agents in active groups remove the inactive groups' records, values and ownership TXT "
             "(a reviewed switch: exempt from the mass-change guard).", ""]
    lines.append(failover.to_markdown(sim, title="Merged zone plan", names=names).rstrip("\n"))
    return lines


def _commit_groups(req: Request, wt: WorkTree, base: Fetched, desired: Desired, zone: Zone,
                   target: tuple[str, ...], serial: int) -> tuple[str, str, str]:
    """Edit (or create) the zone's ActiveGroups file, validate, commit on a new branch from
    ``base`` (origin's desired branch, fetched).  Returns (branch, repo-relative path, new text)."""
    from gitdns.adapters import worktree
    from gitdns.commands.groups.fetch import free_branch

    files = base.files
    doc = desired.state.groups_for_zone(zone.name)
    rel = doc.origin.file if doc is not None else f"{GROUPS_DIR}/{zone.name}.yaml"
    if doc is None and rel in files:
        raise GroupsRefused(f"{rel} exists but holds no ActiveGroups for zone {zone.name}: "
                            "add the document by hand")
    path = wt.rel(rel)
    if _git(worktree.is_dirty, wt, path):
        raise GroupsRefused(f"{path} has uncommitted changes in {wt.root}: commit or stash them first")
    text = (edit_text(files[rel], doc.origin.index, target, serial) if doc is not None
            else new_file_text(zone, target, serial))
    problems = new_problems(desired, from_files(desired.root, {**files, rel: text}, desired.head), zone)
    if problems:
        raise GroupsRefused(f"the change does not validate; {rel} left as it is:\n  "
                            + "\n  ".join(f"{p.format()} [{p.code}]" for p in problems))
    branch = req.branch or _git(free_branch, wt, f"gitdns/groups-{zone.name}-{serial}")
    message = req.message or (f"groups({zone.name}): active groups {show(target)} (serial {serial})"
                              if req.action != "reconcile" else
                              f"groups({zone.name}): reconcile git with the zone: {show(target)} (serial {serial})")
    if _git(worktree.branch_exists, wt, branch):
        raise GroupsRefused(f"branch {branch} already exists: name another with --branch")
    _git(worktree.commit_on_branch, wt, path, text, branch, message, base.sha)
    if req.push:
        if wt.origin_url() is None:
            raise GroupsRefused("--push: the work tree has no remote named origin")
        worktree.push_branch(wt, branch, req.auth)
    return branch, rel, text


def _git(fn: Callable[..., T], *args: Any) -> T:
    """A work-tree call whose git failure refuses the change (GroupsRefused)."""
    from gitdns.adapters.worktree import WorkTreeError

    try:
        return fn(*args)
    except WorkTreeError as exc:
        raise GroupsRefused(str(exc)) from None


def _head_desired(req: Request) -> tuple[WorkTree, Desired, Fetched]:
    """The work tree, and the desired state of origin's desired branch fetched now (the
    checkout's HEAD without origin); a failed fetch refuses the change."""
    from gitdns.adapters import worktree
    from gitdns.commands.groups.fetch import fetch_desired, head_at

    try:
        wt = worktree.open_worktree(req.repo)
    except worktree.NotAWorkTree as exc:
        raise GroupsRefused(f"{exc}: add/remove/set/reconcile commit a branch for a pull request "
                            "(use --direct when git is unreachable)") from None
    except worktree.WorkTreeError as exc:
        raise GroupsRefused(str(exc)) from None
    fetched = _git(fetch_desired, wt, req.auth)
    if fetched.error is not None:
        raise GroupsRefused(f"origin could not be fetched, and a change is numbered and based on origin's "
                            f"desired branch: {fetched.error} (reason: {fetched.error.reason}); "
                            "use --direct when git is unreachable")
    return wt, from_files(Path(req.repo), fetched.files, head_at(wt, fetched.sha)), fetched


def change(req: Request) -> Result:
    """add / remove / set through git."""
    if req.action in ("add", "remove") and not req.groups:
        raise ConfigError(f"groups {req.action}: name at least one group")
    result = Result()
    wt, desired, base = _head_desired(req)
    zone = need_zone(desired, req.zone, desired.root)
    doc = desired.state.groups_for_zone(zone.name)
    git_serial = doc.serial if doc else 0
    provider, _ = _provider(req, zone)
    now, note = failover.current_zone(desired, zone, provider)
    absent = failover.absent_zone(provider, zone)
    zone_state = groups.read_zone_groups(now, zone.domain) if not note else None
    if absent:
        result.err.append(f"warning: {absent}; the new serial rests on git alone")
    zone_serials = _zone_serials(req, desired, zone, zone_state, result)
    old_serial = max([git_serial, *zone_serials])
    # what is active now: git's list, or the zone's when the zone is ahead of git (a --direct
    # switch, or a deleted and re-created document): re-creating the document is a normal switch
    ahead = zone_state is not None and zone_state.serial is not None and zone_state.serial > git_serial
    listed = doc is not None or (ahead and zone_state is not None and zone_state.groups is not None)
    if ahead and zone_state is not None and zone_state.groups is not None:
        before = tuple(sorted(zone_state.groups))
    else:
        before = tuple(sorted(doc.groups)) if doc else ()
    target = target_groups(req.action, before, req.groups)
    if doc is not None and not ahead and target == before:
        result.line(f"zone {zone.domain}: active groups already {show(before)} (serial {git_serial}); "
                    "nothing to change")
        return result
    serial = old_serial + 1
    activated = _activated(desired, zone, listed, before, target)
    status = fleet_status(wt.root, wt.origin_url(), req.auth)
    trees = health_trees(status, result) if activated else None
    refuse_unhealthy(activation_problems(desired, zone, activated, trees), req.force, result)
    sim = failover.simulate_switch(desired, zone, now, target, serial=serial, notes=[note] if note else [],
                                   status=status, absent=absent)
    branch, _, _ = _commit_groups(req, wt, base, desired, zone, target, serial)
    title = f"DNS failover: {zone.domain} active groups {show(before)} -> {show(target)}"
    result.block("\n".join(_pr_text(title, zone, before, target, (old_serial, serial), branch, req.push, sim,
                                       {c.id: c.name for c in desired.state.clusters})))
    return result


def _zone_serials(req: Request, desired: Desired, zone: Zone, state: groups.ZoneGroups | None,
                  result: Result) -> list[int]:
    """The active-groups serials the zone's TXT holds: the zone's own provider (``state``, read
    already) and every other Zone document of the same domain.  A zone not read is said (the
    serial then rests on what was read)."""
    serials = [state.serial] if state is not None and state.serial is not None else []
    if state is None:
        result.err.append(f"warning: zone {zone.domain}: its active-groups TXT was not read, so the new serial "
                          "rests on git alone; if the zone holds a higher one, agents keep the zone's groups "
                          "(check with `gitdns groups get`)")
    for other in desired.state.zones:
        if other.name == zone.name or other.domain != zone.domain:
            continue
        provider, why = _provider(req, other)
        try:
            if provider is None:
                raise UnreachableError(why)
            found = read_groups(provider, other).serial
        except GitdnsError as exc:
            result.err.append(f"warning: Zone {other.name} ({zone.domain}): its active-groups TXT was not read "
                              f"({exc}): its serial is not counted")
            continue
        if found is not None:
            serials.append(found)
    return serials


def _activated(desired: Desired, zone: Zone, listed: bool, before: Sequence[str],
               target: Sequence[str]) -> list[str]:
    """The groups a change makes active that were not.  An empty list, or no document at all,
    means every group is active (Kuadrant's design): then only a group no Cluster serving the
    zone is in becomes active (a narrowing activates nothing, so the first ``groups set`` on a
    repository without the document needs no ``--force``)."""
    if listed and before:
        return [g for g in target if g not in before]
    present = {c.group for c in failover.serving(desired.state, zone) if c.group is not None}
    return [g for g in target if g not in present]


def reconcile(req: Request) -> Result:
    """Bring git level with a zone that is ahead (after a break-glass switch)."""
    result = Result()
    wt, desired, base = _head_desired(req)
    zone = need_zone(desired, req.zone, desired.root)
    doc = desired.state.groups_for_zone(zone.name)
    git_serial = doc.serial if doc else 0
    provider, why = _provider(req, zone)
    if provider is None:
        raise UnreachableError(f"zone {zone.domain}: cannot build its provider: {why}")
    state = read_groups(provider, zone)
    if state.serial is None or state.groups is None or state.serial <= git_serial:
        shown = "absent" if state.serial is None else f"serial {state.serial}"
        result.line(f"zone {zone.domain}: git (serial {git_serial}) is not behind the zone ({shown}); "
                    "nothing to reconcile")
        return result
    target = tuple(sorted(state.groups))
    before = tuple(sorted(doc.groups)) if doc else ()
    now, note = failover.current_zone(desired, zone, provider)
    sim = failover.simulate_switch(desired, zone, now, target, serial=state.serial, notes=[note] if note else [],
                                   status=fleet_status(wt.root, wt.origin_url(), req.auth),
                                   absent=failover.absent_zone(provider, zone))
    branch, _, _ = _commit_groups(req, wt, base, desired, zone, target, state.serial)
    title = f"DNS failover: record the break-glass switch of {zone.domain} in git ({show(target)})"
    result.block("\n".join(_pr_text(title, zone, before, target, (git_serial, state.serial), branch, req.push,
                                       sim, {c.id: c.name for c in desired.state.clusters})))
    return result

