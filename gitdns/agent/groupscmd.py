"""`gitdns groups get|add|remove|set|reconcile`: active failover groups (seed 002).

git holds the truth (the zone's ``ActiveGroups`` document); agents mirror it into the zone's
TXT (`gitdns.core.groups`).  A change is a pull request:

    add/remove/set   edit the ActiveGroups file in place (ruamel round trip: comments and
                     layout kept), bump ``spec.serial``, validate the whole repository, commit
                     on a NEW branch (never on the checked-out one; the work tree, the index
                     and the checked-out branch stay as they were), optionally push it to
                     ``origin``, and print the pull-request description with the merged-zone
                     plan (`gitdns.agent.failover`).
    --direct         break-glass when git is unreachable: both TXT written straight to the zone
                     with a serial above git's and the zone's (compare-and-swap, re-read and
                     retried on refusal); nothing changes in git.  Agents then follow the zone
                     and report ``GroupsDivergedFromGit`` until `reconcile` is merged.
    reconcile        the zone ahead of git (after --direct): write git level with the zone's
                     serial and groups, on a new branch for a pull request.
    get              git's ActiveGroups, the zone's TXT and whether they diverge.

Activating a group is refused without ``--force`` unless the group has a healthy endpoint: its
clusters publish at least one record in the zone, and (when the status branches on ``origin``
can be read) none of them reports ``Ready`` false nor all its health-checked targets unhealthy.

Nothing here prints: every command returns a `Result` the CLI writes out.  Refusals raise
`GroupsRefused` (exit 1).
"""

from __future__ import annotations

import io
import itertools
import logging
import random
import re
import tempfile
import time
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitdns.agent import failover
from gitdns.core import builder, groups
from gitdns.core.desired import Desired
from gitdns.core.model import CredentialsRef, ProviderRef, Zone
from gitdns.core.problems import Problem, blocked_zones
from gitdns.core.records import ZoneSnapshot, normalize_name
from gitdns.core.validate import GROUP_FORBIDDEN, MAX_GROUP_NAME
from gitdns.errors import ConfigError, GitdnsError, PermanentError, UnreachableError
from gitdns.providers.base import Provider
from gitdns.providers.registry import make_provider
from gitdns.reconcile.engine import default_factory, from_files, intent_for, load

if TYPE_CHECKING:
    import git

    from gitdns.core.statusdoc import StatusTree

log = logging.getLogger(__name__)

ACTIONS = ("get", "add", "remove", "set", "reconcile")
DIRECT_ATTEMPTS = 5
STATUS_TIMEOUT = 15.0
GROUPS_DIR = "groups"
_SUFFIXES = (".yaml", ".yml")


class GroupsRefused(PermanentError):
    reason = "GroupsChangeRefused"


@dataclass(frozen=True, slots=True)
class Request:
    action: str  # one of ACTIONS
    zone: str  # a Zone's domain or metadata.name
    groups: tuple[str, ...] = ()
    repo: Path = Path(".")
    push: bool = False
    branch: str | None = None
    direct: bool = False
    force: bool = False
    message: str | None = None
    provider_type: str | None = None
    provider_settings: tuple[str, ...] = ()  # KEY=VALUE
    credentials_env: str | None = None
    credentials_file: str | None = None


@dataclass(slots=True)
class Result:
    code: int = 0
    out: list[str] = field(default_factory=list)  # stdout lines
    err: list[str] = field(default_factory=list)  # stderr lines (warnings, notes)


# -- small helpers ----------------------------------------------------------------------------


def _show(items: Sequence[str] | frozenset[str]) -> str:
    listed = sorted(items)
    return ", ".join(listed) if listed else "(all groups)"


def find_zone(desired: Desired, ident: str) -> Zone | None:
    bare = normalize_name(ident)
    return next((z for z in desired.state.zones if ident == z.name or bare == z.domain), None)


def _need_zone(desired: Desired, ident: str) -> Zone:
    zone = find_zone(desired, ident)
    if zone is None:
        known = ", ".join(sorted(z.domain for z in desired.state.zones)) or "none"
        raise ConfigError(f"zone {ident}: not in {desired.root} (known: {known})")
    return zone


def check_group_names(names: Sequence[str]) -> None:
    bad: list[str] = []
    for name in names:
        forbidden = sorted({ch for ch in name if ch in GROUP_FORBIDDEN})
        if not name or len(name) > MAX_GROUP_NAME or forbidden:
            bad.append(repr(name))
    if bad:
        raise GroupsRefused(f"invalid group name(s) {', '.join(bad)}: 1..{MAX_GROUP_NAME} characters, "
                            "none of ; & , space \" '")


def target_groups(action: str, base: Sequence[str] | frozenset[str], names: Sequence[str]) -> tuple[str, ...]:
    """The active groups after ``action`` (exact names; empty: every group active)."""
    have = set(base)
    if action == "add":
        have |= set(names)
    elif action == "remove":
        have -= set(names)
    elif action == "set":
        have = set(names)
    return tuple(sorted(have))


def read_groups(provider: Provider, zone: Zone) -> groups.ZoneGroups:
    """The zone's two active-group TXT records (a per-name read)."""
    names = [groups.kuadrant_name(zone.domain), groups.gitdns_name(zone.domain)]
    return groups.read_zone_groups(provider.read(zone.domain, names=names), zone.domain)


def _read_zone(provider: Provider, zone: Zone) -> tuple[ZoneSnapshot | None, str]:
    try:
        return provider.read(zone.domain), ""
    except GitdnsError as exc:
        return None, f"{exc} ({exc.reason})"


def _provider(repo: Path, zone: Zone) -> tuple[Provider | None, str]:
    try:
        return default_factory(repo)(zone), ""
    except GitdnsError as exc:
        return None, f"{exc} ({exc.reason})"


# -- health of the groups being activated -------------------------------------------------------


def own_records(desired: Desired, cluster_name: str, zone: Zone) -> int:
    """Records the cluster's gateways publish in the zone (static records not counted)."""
    cluster = desired.state.cluster(cluster_name)
    if cluster is None:
        return 0
    static = {r.key for r in builder.static_records(desired.state, zone)}
    return sum(1 for r in intent_for(desired, cluster, zone).records if r.key not in static)


def _summary_not_ready(tree: StatusTree) -> bool:
    from gitdns.core.statusdoc import load as load_yaml

    text = tree.files.get("summary.yaml")
    if text is None:
        return False
    try:
        doc = load_yaml(text)
    except ValueError:
        return False
    if doc.get("ready") is False:
        return True
    conditions = doc.get("conditions") or []
    return any(isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") in (False, "False")
               for c in conditions)


def _all_targets_unhealthy(tree: StatusTree) -> int:
    """The number of targets when every one is unhealthy, else 0."""
    from gitdns.core.statusdoc import load as load_yaml

    text = tree.files.get("health.yaml")
    if text is None:
        return 0
    try:
        targets = load_yaml(text).get("targets") or {}
    except ValueError:
        return 0
    if not isinstance(targets, Mapping) or not targets:
        return 0
    states = [doc.get("state") if isinstance(doc, Mapping) else None for doc in targets.values()]
    return len(states) if all(s == "unhealthy" for s in states) else 0


def activation_problems(desired: Desired, zone: Zone, activated: Sequence[str],
                        trees: Mapping[str, StatusTree] | None) -> list[str]:
    """Why activating each group would leave the zone without a healthy endpoint."""
    problems: list[str] = []
    clusters = failover.serving(desired.state, zone)
    for group in sorted(set(activated)):
        members = [c for c in clusters if c.group == group]
        publishing = [c for c in members if own_records(desired, c.name, zone) > 0]
        if not publishing:
            who = f" (clusters in the group: {', '.join(c.name for c in members)})" if members else \
                " (no Cluster in git has this group)"
            problems.append(f"group {group}: no endpoint: none of its clusters publishes a record in zone "
                            f"{zone.domain}{who}")
            continue
        if trees is None:
            continue
        for cluster in publishing:
            tree = trees.get(cluster.id)
            if tree is None:
                continue
            if _summary_not_ready(tree):
                problems.append(f"group {group}: cluster {cluster.name} reports Ready false "
                                f"(status branch gitdns-status/{cluster.id})")
            count = _all_targets_unhealthy(tree)
            if count:
                problems.append(f"group {group}: cluster {cluster.name}: all {count} of its health-checked "
                                f"targets are unhealthy (health.yaml on gitdns-status/{cluster.id})")
    return problems


def status_trees(url: str | None) -> dict[str, StatusTree] | None:
    """Every status branch on ``url``; None when there is no remote or it cannot be read."""
    if not url:
        return None
    from gitdns.adapters.statusbranch import read_all

    try:
        with tempfile.TemporaryDirectory(prefix="gitdns-groups-") as tmp:
            trees = read_all(url, workdir=Path(tmp), timeout=STATUS_TIMEOUT)
    except (GitdnsError, OSError) as exc:
        log.debug("status branches not read: %s", exc)
        return None
    return trees or None


def _refuse_unhealthy(problems: list[str], force: bool, result: Result) -> None:
    if not problems:
        return
    if not force:
        raise GroupsRefused("activating a group without a healthy endpoint (pass --force to do it anyway):\n  "
                            + "\n  ".join(problems))
    result.err += [f"warning (--force): {p}" for p in problems]


# -- editing the ActiveGroups file ----------------------------------------------------------


def new_file_text(zone: Zone, target: Sequence[str], serial: int) -> str:
    listed = ", ".join(target)
    return (
        f"# Active failover groups of zone {zone.domain} (seed 002; docs/failover.md).\n"
        "# Only clusters in these groups (and ungrouped clusters) publish; an empty list: every group.\n"
        "# Change through `gitdns groups add|remove|set` and a pull request; bump spec.serial on every change.\n"
        "# yaml-language-server: $schema=../schemas/activegroups.schema.json\n"
        "apiVersion: gitdns.io/v1alpha1\n"
        "kind: ActiveGroups\n"
        "metadata:\n"
        f"  name: {zone.name}-groups\n"
        "spec:\n"
        f"  zone: {zone.name}\n"
        f"  serial: {serial}\n"
        f"  groups: [{listed}]\n"
    )


def _yaml(text: str) -> Any:
    from ruamel.yaml import YAML

    yaml = YAML()  # round trip
    yaml.preserve_quotes = True
    yaml.width = 4096
    offset = _dash_offset(text)
    if offset:
        yaml.indent(mapping=2, sequence=offset + 2, offset=offset)
    yaml.explicit_start = bool(re.match(r"(?:\s*#[^\n]*\n)*\s*---", text))
    return yaml


def _dash_offset(text: str) -> int:
    """How far block-sequence dashes are indented under their key (0 or 2, usually)."""
    lines = text.splitlines()
    for prev, line in itertools.pairwise(lines):
        key = re.match(r"( *)[^\s#-][^:#]*:\s*(#.*)?$", prev)
        dash = re.match(r"( *)- ", line)
        if key and dash:
            return max(0, len(dash.group(1)) - len(key.group(1)))
    return 0


def edit_text(text: str, index: int, target: Sequence[str], serial: int) -> str:
    """The ActiveGroups document ``index`` of ``text`` with ``spec.groups`` = ``target`` and
    ``spec.serial`` = ``serial``; everything else (comments, order, quoting) kept."""
    from ruamel.yaml.comments import CommentedSeq

    yaml = _yaml(text)
    docs = list(yaml.load_all(text))
    if index >= len(docs) or not isinstance(docs[index], MutableMapping):
        raise GroupsRefused(f"document {index} of the ActiveGroups file is not a mapping")
    doc = docs[index]
    spec = doc.get("spec")
    if not isinstance(spec, MutableMapping):
        raise GroupsRefused("the ActiveGroups document has no spec mapping")
    spec["serial"] = serial
    seq = spec.get("groups")
    if isinstance(seq, list):
        keep = [g for g in seq if g in target]
        for i in reversed(range(len(seq))):
            if seq[i] not in target:
                del seq[i]
        for name in target:
            if name not in keep:
                seq.append(name)
    else:
        seq = CommentedSeq(list(target))
        seq.fa.set_flow_style()
        spec["groups"] = seq
    out = io.StringIO()
    if len(docs) == 1:
        yaml.dump(docs[0], out)
    else:
        yaml.dump_all(docs, out)
    return out.getvalue()


# -- git --------------------------------------------------------------------------------------


@dataclass(slots=True)
class WorkTree:
    """The git work tree holding the desired repository at ``repo``."""

    handle: git.Repo
    root: Path  # the work tree root
    prefix: str  # the desired repository's path inside it (posix, "" at the root)

    def rel(self, repo_relative: str) -> str:
        return f"{self.prefix}/{repo_relative}" if self.prefix else repo_relative

    def origin_url(self) -> str | None:
        try:
            return str(self.handle.remotes["origin"].url)
        except (IndexError, KeyError, ValueError):
            return None


def open_worktree(repo: Path) -> WorkTree:
    import git

    try:
        handle = git.Repo(repo, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise GroupsRefused(f"{repo} is not inside a git work tree: add/remove/set/reconcile commit a "
                            "branch for a pull request (use --direct when git is unreachable)") from None
    if handle.working_tree_dir is None:
        raise GroupsRefused(f"{repo}: a bare repository; give the path of a work tree")
    try:
        handle.head.commit  # noqa: B018 - a repository without commits has no HEAD to branch from
    except ValueError:
        raise GroupsRefused(f"{repo}: the repository has no commit yet") from None
    root = Path(handle.working_tree_dir).resolve()
    prefix = Path(repo).resolve().relative_to(root).as_posix()
    return WorkTree(handle, root, "" if prefix == "." else prefix)


def head_files(wt: WorkTree) -> dict[str, str]:
    """The YAML files of the desired repository as HEAD has them (as `read_tree` would list
    them from a checkout of HEAD)."""
    tree = wt.handle.head.commit.tree
    if wt.prefix:
        try:
            tree = tree[wt.prefix]
        except KeyError:
            return {}
    files: dict[str, str] = {}
    start = len(wt.prefix) + 1 if wt.prefix else 0
    import git

    for item in tree.traverse():
        if not isinstance(item, git.Blob):
            continue
        rel = str(item.path)[start:]
        parts = rel.split("/")
        if any(p.startswith(".") for p in parts) or not rel.endswith(_SUFFIXES):
            continue
        files[rel] = item.data_stream.read().decode("utf-8", errors="replace")
    return dict(sorted(files.items()))


def _git(wt: WorkTree, *args: str, env: Mapping[str, str] | None = None) -> str:
    import git

    try:
        out: str = wt.handle.git.execute(["git", *args], env=dict(env or {}), with_extended_output=False,
                                         as_process=False, stdout_as_string=True)
    except git.GitCommandError as exc:
        raise GroupsRefused(f"git {args[0]} failed: {str(exc.stderr).strip() or exc}") from None
    return out.strip()


def commit_on_branch(wt: WorkTree, path: str, content: str, branch: str, message: str) -> str:
    """Commit HEAD's tree with ``path`` set to ``content`` on the new ``branch``, with a
    temporary index: the checkout, the index and the current branch are not touched."""
    if _git(wt, "branch", "--list", branch):
        raise GroupsRefused(f"branch {branch} already exists: name another with --branch")
    head = wt.handle.head.commit.hexsha
    with tempfile.TemporaryDirectory(prefix="gitdns-groups-") as tmp:
        data = Path(tmp) / "blob"
        data.write_bytes(content.encode("utf-8"))
        blob = _git(wt, "hash-object", "-w", "--no-filters", str(data))
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git(wt, "read-tree", head, env=env)
        _git(wt, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
        tree = _git(wt, "write-tree", env=env)
    commit = _git(wt, "commit-tree", tree, "-p", head, "-m", message)
    _git(wt, "update-ref", "-m", "gitdns groups", f"refs/heads/{branch}", commit, "0" * 40)
    return commit


def push_branch(wt: WorkTree, branch: str) -> None:
    if wt.origin_url() is None:
        raise GroupsRefused("--push: the work tree has no remote named origin")
    try:
        _git(wt, "push", "origin", f"refs/heads/{branch}:refs/heads/{branch}")
    except GroupsRefused as exc:
        raise UnreachableError(f"pushing {branch} to origin failed: {exc}; the branch is committed "
                               f"locally, push it with `git push origin {branch}`") from None


def _dirty(wt: WorkTree, path: str) -> bool:
    return bool(_git(wt, "status", "--porcelain", "--", path))


# -- the commands -----------------------------------------------------------------------------


def run(req: Request) -> Result:
    if req.action not in ACTIONS:
        raise ConfigError(f"unknown groups command {req.action!r}")
    check_group_names(req.groups)
    if req.action == "get":
        return get(req)
    if req.direct:
        if req.action == "reconcile":
            raise ConfigError("--direct does not apply to reconcile (it writes git)")
        return direct(req)
    if req.action == "reconcile":
        return reconcile(req)
    return change(req)


def get(req: Request) -> Result:
    result = Result()
    desired = load(req.repo)
    zone = _need_zone(desired, req.zone)
    git_doc = desired.state.groups_for_zone(zone.name)
    out = result.out
    out.append(f"zone {zone.domain} ({zone.name})")
    if git_doc is None:
        out.append("git: no ActiveGroups document: every group is active")
    else:
        out.append(f"git: ActiveGroups {git_doc.name} ({git_doc.origin.file}): serial {git_doc.serial}, "
                   f"groups {_show(git_doc.groups)}")
    provider, why = _provider(req.repo, zone)
    state: groups.ZoneGroups | None = None
    if provider is not None:
        try:
            state = read_groups(provider, zone)
        except GitdnsError as exc:
            why = f"{exc} ({exc.reason})"
    if state is None:
        out.append(f"zone: not readable: {why}")
        return result
    gitdns_part = ("absent" if state.groups is None
                   else f"serial {state.serial if state.serial is not None else '?'}, groups {_show(state.groups)}")
    kuadrant_part = "absent" if state.kuadrant is None else _show(state.kuadrant)
    out.append(f"zone: {groups.gitdns_name(zone.domain)}: {gitdns_part}; "
               f"{groups.kuadrant_name(zone.domain)}: {kuadrant_part}")
    decision = groups.decide(git_doc, state, zone.domain)
    if decision.diverged:
        out.append(f"DIVERGED: the zone is ahead of git (serial {decision.serial} > "
                   f"{git_doc.serial if git_doc else 0}); agents follow the zone and report "
                   f"GroupsDivergedFromGit until `gitdns groups reconcile {zone.name}` is merged")
    elif decision.write:
        out.append(f"pending: agents will mirror git's serial {decision.serial} into the zone")
    else:
        out.append("level: the zone mirrors git")
    if state.kuadrant is not None and state.groups is not None and state.kuadrant != state.groups:
        out.append("note: Kuadrant's TXT lists other groups than gitdns's (written by a Kuadrant CLI?)")
    out.append(f"active now: {_show(decision.active)}")
    snapshot, why = _read_zone(provider, zone) if provider is not None else (None, why)
    if snapshot is not None:
        sim = failover.simulate_switch(desired, zone, snapshot, tuple(sorted(decision.active)),
                                       serial=decision.serial)
        out.append("still to converge (what the agents will add and remove):")
        out += failover.endpoint_lines(sim.diff)
    return result


def _pr_text(title: str, zone: Zone, before: Sequence[str], after: Sequence[str], serials: tuple[int, int],
             branch: str, pushed: bool, sim: failover.Switch, names: dict[str, str]) -> list[str]:
    lines = [f"branch {branch} committed" + (" and pushed to origin" if pushed else
                                              f" (push: git push origin {branch})"),
             "", "--- pull request ---", f"title: {title}", "",
             f"Active groups of zone `{zone.domain}`: **{_show(before)}** -> **{_show(after)}** "
             f"(serial {serials[0]} -> {serials[1]}).", "",
             "After the merge, agents in inactive groups publish nothing (their ownership labels stay); "
             "agents in active groups remove the inactive groups' records, values and ownership TXT "
             "(a reviewed switch: exempt from the mass-change guard).", ""]
    lines.append(failover.to_markdown(sim, title="Merged zone plan", names=names).rstrip("\n"))
    return lines


def _commit_groups(req: Request, wt: WorkTree, desired: Desired, zone: Zone, target: tuple[str, ...],
                   serial: int) -> tuple[str, str, str]:
    """Edit (or create) the zone's ActiveGroups file, validate, commit on a new branch.
    Returns (branch, repo-relative path, new text)."""
    files = head_files(wt)
    doc = desired.state.groups_for_zone(zone.name)
    rel = doc.origin.file if doc is not None else f"{GROUPS_DIR}/{zone.name}.yaml"
    if doc is None and rel in files:
        raise GroupsRefused(f"{rel} exists but holds no ActiveGroups for zone {zone.name}: "
                            "add the document by hand")
    path = wt.rel(rel)
    if _dirty(wt, path):
        raise GroupsRefused(f"{path} has uncommitted changes in {wt.root}: commit or stash them first")
    text = (edit_text(files[rel], doc.origin.index, target, serial) if doc is not None
            else new_file_text(zone, target, serial))
    new_files = {**files, rel: text}
    problems = _new_problems(desired, from_files(desired.root, new_files, desired.head), zone)
    if problems:
        raise GroupsRefused(f"the change does not validate; {rel} left as it is:\n  "
                            + "\n  ".join(f"{p.format()} [{p.code}]" for p in problems))
    branch = req.branch or f"gitdns/groups-{zone.name}-{serial}"
    message = req.message or (f"groups({zone.name}): active groups {_show(target)} (serial {serial})"
                              if req.action != "reconcile" else
                              f"groups({zone.name}): reconcile git with the zone: {_show(target)} (serial {serial})")
    commit_on_branch(wt, path, text, branch, message)
    if req.push:
        push_branch(wt, branch)
    return branch, rel, text


def _new_problems(old: Desired, new: Desired, zone: Zone) -> list[Problem]:
    """Problems the edit introduces, and any problem that holds the zone."""
    before = {p.format() for p in old.problems}
    held = zone.name in blocked_zones(new.problems, [z.name for z in new.state.zones])
    return [p for p in new.problems
            if p.format() not in before or (held and zone.name in blocked_zones([p], [zone.name]))]


def _head_desired(req: Request) -> tuple[WorkTree, Desired]:
    from gitdns.adapters.gitrev import head_info

    wt = open_worktree(req.repo)
    return wt, from_files(Path(req.repo), head_files(wt), head_info(Path(req.repo)))


def change(req: Request) -> Result:
    """add / remove / set through git."""
    if req.action in ("add", "remove") and not req.groups:
        raise ConfigError(f"groups {req.action}: name at least one group")
    result = Result()
    wt, desired = _head_desired(req)
    zone = _need_zone(desired, req.zone)
    doc = desired.state.groups_for_zone(zone.name)
    before = tuple(sorted(doc.groups)) if doc else ()
    old_serial = doc.serial if doc else 0
    target = target_groups(req.action, before, req.groups)
    if doc is not None and target == before:
        result.out.append(f"zone {zone.domain}: active groups already {_show(before)} (serial {old_serial}); "
                          "nothing to change")
        return result
    serial = old_serial + 1
    provider, _ = _provider(req.repo, zone)
    now, note = failover.current_zone(desired, zone, provider)
    zone_state = groups.read_zone_groups(now, zone.domain) if not note else None
    if zone_state is not None and zone_state.serial is not None and zone_state.serial >= serial:
        held = _show(zone_state.groups or ())
        result.err.append(f"warning: the zone holds serial {zone_state.serial} (groups {held}), not below "
                          f"{serial}: agents keep the zone's groups until git's serial is higher; "
                          f"run `gitdns groups reconcile {zone.name}` first")
    activated = [g for g in target if not before or g not in before]
    trees = status_trees(wt.origin_url()) if activated else None
    _refuse_unhealthy(activation_problems(desired, zone, activated, trees), req.force, result)
    sim = failover.simulate_switch(desired, zone, now, target, serial=serial, notes=[note] if note else [])
    branch, _, _ = _commit_groups(req, wt, desired, zone, target, serial)
    title = f"DNS failover: {zone.domain} active groups {_show(before)} -> {_show(target)}"
    result.out += _pr_text(title, zone, before, target, (old_serial, serial), branch, req.push, sim,
                           {c.id: c.name for c in desired.state.clusters})
    return result


def reconcile(req: Request) -> Result:
    """Bring git level with a zone that is ahead (after a break-glass switch)."""
    result = Result()
    wt, desired = _head_desired(req)
    zone = _need_zone(desired, req.zone)
    doc = desired.state.groups_for_zone(zone.name)
    git_serial = doc.serial if doc else 0
    provider, why = _provider(req.repo, zone)
    if provider is None:
        raise UnreachableError(f"zone {zone.domain}: cannot build its provider: {why}")
    state = read_groups(provider, zone)
    if state.serial is None or state.groups is None or state.serial <= git_serial:
        shown = "absent" if state.serial is None else f"serial {state.serial}"
        result.out.append(f"zone {zone.domain}: git (serial {git_serial}) is not behind the zone ({shown}); "
                          "nothing to reconcile")
        return result
    target = tuple(sorted(state.groups))
    before = tuple(sorted(doc.groups)) if doc else ()
    now, note = failover.current_zone(desired, zone, provider)
    sim = failover.simulate_switch(desired, zone, now, target, serial=state.serial, notes=[note] if note else [])
    branch, _, _ = _commit_groups(req, wt, desired, zone, target, state.serial)
    title = f"DNS failover: record the break-glass switch of {zone.domain} in git ({_show(target)})"
    result.out += _pr_text(title, zone, before, target, (git_serial, state.serial), branch, req.push, sim,
                           {c.id: c.name for c in desired.state.clusters})
    return result


# -- break-glass --------------------------------------------------------------------------------


def provider_ref(zone: Zone | None, req: Request) -> ProviderRef:
    """The Zone's provider reference, overridden from the command line."""
    if zone is None and not req.provider_type:
        raise ConfigError(f"zone {req.zone}: not in {req.repo}; give --provider-type (and its settings and "
                          "credentials) to write to it directly")
    base = zone.provider if zone is not None else ProviderRef(req.provider_type or "")
    settings = dict(base.settings)
    for item in req.provider_settings:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--provider-setting {item!r}: expected KEY=VALUE")
        settings[key.strip()] = value
    creds = base.credentials
    if req.credentials_env or req.credentials_file:
        creds = CredentialsRef(env=req.credentials_env, file=req.credentials_file)
    return ProviderRef(req.provider_type or base.type, tuple(sorted(settings.items())), creds,
                       base.default_namespace if not req.provider_type else None)


def direct(req: Request) -> Result:
    """Break-glass: write both TXT straight to the zone; git is not touched."""
    if req.action in ("add", "remove") and not req.groups:
        raise ConfigError(f"groups {req.action}: name at least one group")
    result = Result()
    try:
        desired: Desired | None = load(req.repo)
    except GitdnsError as exc:
        desired = None
        result.err.append(f"warning: no local checkout at {req.repo} ({exc}): the health check and the "
                          "endpoint list need it")
    zone = find_zone(desired, req.zone) if desired is not None else None
    ref = provider_ref(zone, req)
    domain = zone.domain if zone is not None else normalize_name(req.zone)
    if zone is None:
        zone = Zone(domain.replace(".", "-"), domain, ref)
    else:
        zone = replace(zone, provider=ref)
    provider = make_provider(domain, ref, Path(req.repo))
    doc = desired.state.groups_for_zone(zone.name) if desired is not None else None
    git_serial = doc.serial if doc else 0
    state = read_groups(provider, zone)
    base = groups.decide(doc, state, domain).active
    target = target_groups(req.action, base, req.groups)
    activated = [g for g in target if not base or g not in base]
    if desired is not None:
        _refuse_unhealthy(activation_problems(desired, zone, activated, None), req.force, result)
    elif activated:
        _refuse_unhealthy([f"group {g}: cannot be checked without a local checkout" for g in activated],
                          req.force, result)
    sim: failover.Switch | None = None
    if desired is not None:
        now, note = failover.current_zone(desired, zone, provider)
        sim = failover.simulate_switch(desired, zone, now, target, serial=max(git_serial, state.serial or 0) + 1,
                                       notes=[note] if note else [])
    serial = _write_direct(provider, zone, target, git_serial, state)
    out = result.out
    out.append(f"zone {domain}: active groups {_show(base)} -> {_show(target)}, written directly "
               f"(serial {serial}; git has {git_serial})")
    out.append(f"git is unchanged: agents follow the zone and report GroupsDivergedFromGit until "
               f"`gitdns groups reconcile {zone.name} --repo PATH` is run and its pull request merged")
    if sim is not None:
        out += failover.summary_lines(sim)[1:]
        out += failover.endpoint_lines(sim.diff)
    return result


def _write_direct(provider: Provider, zone: Zone, target: Sequence[str], git_serial: int,
                  state: groups.ZoneGroups) -> int:
    """Compare-and-swap both TXT; a refusal re-reads and retries with jittered backoff."""
    last = ""
    for attempt in range(DIRECT_ATTEMPTS):
        if attempt:
            time.sleep(random.uniform(0, 0.05 * 2 ** attempt))
            state = read_groups(provider, zone)
        serial, changes = groups.direct_changes(state, zone.domain, target, git_serial)
        applied = provider.apply(zone.domain, changes)
        if applied.failed:
            raise UnreachableError(f"zone {zone.domain}: writing the active-groups TXT failed: "
                                   + "; ".join(f"{k}: {why}" for k, why in applied.failed))
        if not applied.refused:
            return serial
        last = "; ".join(f"{k}: {why}" for k, why in applied.refused)
        log.info("direct groups write refused (attempt %d): %s", attempt + 1, last)
    raise UnreachableError(f"zone {zone.domain}: the active-groups TXT changed under us {DIRECT_ATTEMPTS} times "
                           f"({last}); try again")
