"""`gitdns history NAME`: how a DNS name's desired records changed, commit by commit, and who
changed them (what an auditor asks).

    history(name, repo, branch=, path=, max_commits=, state_dir=, auth=) -> History
    trace(name, commits, files_at, baseline=None) -> list[Entry]     the walk, without git

The records at one revision and the changes between two (`merge`, `diff`, `snapshot`) are in
`gitdns.commands.history.diff`; when each cluster applied a commit and the health entries, from
the status branches, in `gitdns.commands.history.applied`; the git side in
`gitdns.commands.history.walk`; text, JSON and the command (`history_command`, `to_text`,
`to_json`) in `gitdns.commands.history.fmt`.

This is the DESIRED state read from git — what the agents were asked to publish at each
revision — not what the providers published: that (and whether a cluster applied a revision)
is on the status branches (`gitdns status`).  Health and active-group filtering, which happen
at publish time, are not applied here.

NAME selects a host family: every record whose ``root_host_of(record) == root_host_of(NAME)``,
so ``api.example.com`` (a listener host) brings its ``klb`` names along, and any of those names
selects the same family.  At each revision the records are the union over every cluster of
``builder.desired_for_zone`` for the zone holding NAME (static RecordSets included), merged per
record key the way they are published: multi-value records without a set identifier are united;
any other key holds one record, and when clusters want different content for it every variant
is shown and the key is marked as a conflict.

The branch's first-parent commits that changed ``*.yaml``/``*.yml`` below ``path`` against their
first parent are walked oldest to newest (at most ``max_commits``; one more older one, when there
is one, is the baseline the first is compared with): each change is attributed to the commit
that brought it onto the branch — a merge, a squash merge's commit, a rebase merge's or a direct
push's commit — and its author(s), pull request and merger are named apart
(`gitdns.commands.history.who`).  Each commit is loaded with the agent's loader (`engine.from_files`);
a commit whose problems hold NAME's zone is reported ``invalid`` with its problems and skipped —
the agents keep the last valid revision for that zone — and a valid commit whose parent was
invalid is compared with the last valid state before it (and reported ``fixed`` even when
nothing changed).  Trees are memoised
on the hashes of their files' contents, so a revision is validated once however often it recurs.

Each commit is compared with its first parent's state (the last valid one when that parent does
not validate): a merge shows what it changed on the branch, its first parent's state to its own,
once, however long ago the pull request was cut.  (`trace` also takes commits without parents,
`CommitInfo`: each is then compared with the one before it.)
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from gitdns.adapters.git.auth import GitAuth
from gitdns.adapters.git.cache import CacheCorrupt
from gitdns.adapters.git.source import CommitInfo
from gitdns.commands.git.read import check_branch, no_status_branches, repo_url, scratch_dir
from gitdns.commands.history.applied import AppliedIndex, health_entries, interleave, said_once
from gitdns.commands.history.diff import (
    Entry,
    Query,
    Snapshot,
    canonical_value,
    diff,
    holders,
    is_value,
    snapshot,
    zone_records,
)
from gitdns.commands.history.walk import Commit, Walk
from gitdns.commands.history.who import attribute_all
from gitdns.core.desired import Desired
from gitdns.core.loader import ParseMemo
from gitdns.core.model import DesiredState, Zone
from gitdns.core.names import root_host_of
from gitdns.core.progress import NO_PROGRESS, Progress
from gitdns.core.records import normalize_name
from gitdns.errors import ConfigError, RetryableError
from gitdns.reconcile.engine import from_files

PATHS = ("*.yaml", "*.yml")
NOBODY_APPLIED = ", so no cluster is known to have applied anything"
GIT_TIMEOUT = 120.0  # a first run fetches the branch's full history

FilesAt = Callable[[str], Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class History:
    name: str
    branch: str
    path: str
    commits: int  # commits examined
    truncated: bool  # older commits exist beyond max_commits
    entries: tuple[Entry, ...]
    by_value: bool = False
    status_branches: int = 0
    since: int | None = None  # the window (unix seconds), on when each commit reached the branch
    until: int | None = None
    hints: tuple[str, ...] = ()  # e.g. the name is in no zone


class Loader:
    """Loads a commit's files once per distinct tree: keyed on its files' blob ids when the
    source gives them (``tree_key``), else on the hashes of their contents."""

    def __init__(self, query: Query, files_at: FilesAt,
                 tree_key: Callable[[str], tuple[tuple[str, str], ...]] | None = None) -> None:
        self.query = query
        self.files_at = files_at
        self.tree_key = tree_key
        self.loaded: dict[tuple[tuple[str, str], ...], Desired] = {}
        self.parsed: ParseMemo = {}  # files shared by many trees are parsed once
        self.snapshots: dict[tuple[object, ...], Snapshot] = {}

    def desired(self, sha: str) -> tuple[tuple[tuple[str, str], ...], Desired]:
        if self.tree_key is not None:
            tree = self.tree_key(sha)
            found = self.loaded.get(tree)
            if found is not None:
                return tree, found
            files = self.files_at(sha)
        else:
            files = self.files_at(sha)
            tree = tuple((path, hashlib.sha256(text.encode("utf-8")).hexdigest())
                         for path, text in sorted(files.items()))
        desired = self.loaded.get(tree)
        if desired is None:
            desired = self.loaded[tree] = from_files(Path("."), files, None, memo=self.parsed)
        return tree, desired

    def at(self, sha: str, fallback_zone: str) -> Snapshot:
        tree, desired = self.desired(sha)
        memo = (tree, fallback_zone, self.query)
        found = self.snapshots.get(memo)
        if found is None:
            broken = any(p.blocks_all for p in desired.problems)
            known = None if broken else frozenset(
                name for c in desired.state.clusters for name in (c.id, c.name) if name)
            roster = () if broken else tuple(sorted((c.id or "", c.name) for c in desired.state.clusters))
            found = self.snapshots[memo] = replace(snapshot(desired, self.query, fallback_zone), clusters=known,
                                                   roster=roster)
        return found


def trace(name: str | Query, commits: Sequence[CommitInfo | Commit], files_at: FilesAt,
          baseline: CommitInfo | Commit | None = None,
          tree_key: Callable[[str], tuple[tuple[str, str], ...]] | None = None,
          progress: Progress = NO_PROGRESS) -> list[Entry]:
    """The entries for ``commits`` (oldest first); ``baseline`` is the state compared with first.
    ``progress`` is told each commit read."""
    query = name if isinstance(name, Query) else Query(normalize_name(name))
    loader = Loader(query, files_at, tree_key)
    last = Snapshot("", "")
    if baseline is not None:
        base = loader.at(baseline.sha, "")
        last = base if not base.problems else Snapshot("", base.zone_name)
    entries: list[Entry] = []
    held = False
    # per commit: the state the agents keep after it (its own, or the last valid one before it
    # when it is invalid) and whether it is held; each commit is compared with its first parent's
    kept: dict[str, tuple[Snapshot, bool]] = {}
    for done, commit in enumerate(commits):
        progress.step(done, len(commits), "history: reading commits")
        base, held = _parent_state(commit, kept, loader, last, held)
        snap = loader.at(commit.sha, base.zone_name or last.zone_name)
        if snap.problems:
            entries.append(Entry(commit, snap.zone or base.zone or last.zone, "invalid", problems=snap.problems))
            kept[commit.sha] = (base, True)
            held = True
            continue
        changes = diff(base.records, snap.records)
        if changes or held:
            notes = tuple(n for n in snap.notes if n not in base.notes) if changes else ()
            # the clusters git names before or at the commit: a cluster's own removal counts as its
            named = snap.clusters if base.clusters is None or snap.clusters is None else snap.clusters | base.clusters
            entries.append(Entry(commit, snap.zone or base.zone, "fixed" if held else "changed", changes,
                                 notes=notes, in_git=named, roster=snap.roster))
        kept[commit.sha] = (snap, False)
        held = False
        last = snap
    return entries


def _parent_state(commit: CommitInfo | Commit, kept: Mapping[str, tuple[Snapshot, bool]], loader: Loader,
                  last: Snapshot, held: bool) -> tuple[Snapshot, bool]:
    """The state ``commit`` is compared with: its first parent's as the agents keep it (the last
    valid one when the parent does not validate), and whether that parent is held.  A commit
    without parents starts from nothing; one that does not know its parents (a `CommitInfo`)
    from the commit walked before it."""
    if not isinstance(commit, Commit):
        return last, held
    if not commit.parents:
        return Snapshot("", ""), False
    parent = commit.parents[0]
    found = kept.get(parent)
    if found is not None:
        return found
    snap = loader.at(parent, last.zone_name)
    if not snap.problems:
        return snap, False
    return last, True  # a parent outside the walk that does not validate: the last valid state walked


def value_names(value: str, commits: Sequence[CommitInfo | Commit], files_at: FilesAt,
                baseline: CommitInfo | Commit | None = None,
                tree_key: Callable[[str], tuple[tuple[str, str], ...]] | None = None,
                progress: Progress = NO_PROGRESS) -> frozenset[str]:
    """Every record name that held ``value`` at one of the commits (or the baseline)."""
    query = Query(canonical_value(value), by_value=True)
    loader = Loader(query, files_at, tree_key)
    seen: dict[tuple[tuple[str, str], ...], None] = {}
    names: set[str] = set()
    walked = ([baseline] if baseline is not None else []) + list(commits)
    for done, commit in enumerate(walked):
        progress.step(done, len(walked), "history: finding the names holding the value")
        tree, desired = loader.desired(commit.sha)
        if tree in seen:
            continue
        seen[tree] = None
        names |= holders(desired, query)
    return frozenset(names)


# -- the command ---------------------------------------------------------------------------------

T = TypeVar("T")


def walked(repo: str, branch: str, path: str, state_dir: str | Path | None, auth: GitAuth | None,
           run: Callable[[Walk], T]) -> T:
    """``run`` on a `Walk` of ``repo``'s ``branch`` (below ``path``), its cache in
    ``state_dir/history`` (kept) or a temporary directory; a cache found corrupt is wiped and
    ``run`` tried once more.  The arguments are checked first (`check_args`; a token or password
    in the URL is refused before anything runs).  `history` and `gitdns groups log` share it."""
    from gitdns.adapters.git.auth import check_url

    check_args(branch, path)
    check_url(repo_url(repo))
    with scratch_dir(state_dir, "history") as workdir:
        for attempt in (1, 2):
            with Walk(repo_url(repo), branch=branch, path=clean_path(path), workdir=workdir, timeout=GIT_TIMEOUT,
                      auth=auth or GitAuth()) as walk:
                try:
                    return run(walk)
                except CacheCorrupt as exc:
                    if attempt == 2 or not walk.recover():  # wiped when fsck confirms: fetched again
                        raise RetryableError(f"the history cache {workdir} cannot be read: {exc}",
                                             reason="CacheUnreadable") from None
    raise AssertionError("unreachable")  # pragma: no cover


def history(name: str, repo: str, *, branch: str = "main", path: str = "", max_commits: int = 0,
            state_dir: str | Path | None = None, auth: GitAuth | None = None, since: str | None = None,
            until: str | None = None, status: bool = True, progress: Progress = NO_PROGRESS) -> History:
    """Fetch the branch (and every status branch) and trace NAME or VALUE through the YAML
    commits in the window (the newest ``max_commits`` when > 0), through the git transport
    ``auth`` (default: the ambient git configuration).  ``progress`` is told the fetch and each
    commit read."""
    text = name.strip()
    return walked(repo, branch, path, state_dir, auth,
                  lambda walk: _walk(walk, text, branch, path, max_commits, since, until, status, progress))


def _walk(walk: Walk, text: str, branch: str, path: str, max_commits: int, since: str | None,
          until: str | None, status: bool, progress: Progress = NO_PROGRESS) -> History:
    if not text:
        raise ConfigError("history: give a NAME (a DNS name or listener host) or a VALUE (an address or target)")
    progress.step(0, None, "history: fetching")
    walk.fetch(status=status)
    lo, hi = walk.window(since, until)
    # every YAML commit is traced (each compared with the one before, the window's first too);
    # the window then keeps the commits that reached the branch in it (first-parent commits: their own time)
    commits, baseline, truncated = walk.commits(max_count=max_commits)
    by_value = is_value(text)
    entries: list[Entry] = []
    query = Query(normalize_name(text))
    if not by_value:
        entries = trace(query, commits, walk.files_at, baseline, walk.tree_key, progress)
    if by_value or not entries:
        names = value_names(text, commits, walk.files_at, baseline, walk.tree_key, progress)
        if names or by_value:
            by_value = True
            query = Query(canonical_value(text), True, names)
            entries = trace(query, commits, walk.files_at, baseline, walk.tree_key, progress)

    def inside(when: int) -> bool:
        return (lo is None or when >= lo) and (hi is None or when <= hi)

    # the window keeps the commits that reached the branch in it: a first-parent commit's own time
    examined = sum(1 for c in commits if inside(c.time))
    entries = [e for e in entries if inside(e.time)]
    progress.step(0, None, "history: reading the status branches and who merged each change")
    rows = walk.status() if status else []
    done = attributed(walk, entries, AppliedIndex(rows, walk.order()))
    names_of_interest = {d.key.name for e in entries for d in e.changes}
    done = interleave(done, [e for e in health_entries(query, rows, names_of_interest) if inside(e.time)],
                      lambda e: e.time)
    clusters = len({r.cluster_id for r in rows})
    hints: list[str] = [] if rows or not status else [no_status_branches(walk.url, walk.local, NOBODY_APPLIED)]
    if not by_value and not any(e.zone for e in entries) and commits:
        head = Loader(query, walk.files_at, walk.tree_key).desired(commits[-1].sha)[1].state
        zone = head.zone_for_host(query.text)
        if zone is None:
            zones = ", ".join(sorted(z.domain for z in head.zones)) or "none"
            hints.append(f"{query.text} is in no zone of the desired state at {commits[-1].sha[:7]} "
                         f"(zones: {zones}): a typo? A value (an address or a target) is searched as such")
        else:
            hints.extend(_close_names(query.text, head, zone, commits[-1].sha))
    return History(normalize_name(text) if not by_value else canonical_value(text), branch, clean_path(path),
                   examined, truncated, tuple(done), by_value, clusters, lo, hi, (*walk.notes, *hints))


def attributed(walk: Walk, entries: Sequence[Entry], index: AppliedIndex) -> list[Entry]:
    """``entries`` (in the branch's order) with their signature marks, who made each change
    (`history.who.attribute`: the side commits of the merges among them read at once) and when
    each cluster applied it; a cluster said once to be no longer in git is left out after."""
    ordered = list(entries)
    who = attribute_all(walk, [e.commit for e in ordered if isinstance(e.commit, Commit)])
    applied = said_once([index.applied(e.commit.sha, e.in_git, _zones(e), e.roster) for e in ordered])
    return [replace(e, mark=who[e.commit.sha][1] if e.commit.sha in who else "",
                    who=who[e.commit.sha][0] if e.commit.sha in who else None, applied=kept)
            for e, kept in zip(ordered, applied, strict=True)]


def check_args(branch: str, path: str) -> None:
    """A --branch git cannot name (empty, spaces, ``..``, ``~^:?*[``...) and a --path that leaves
    the repository (``..``) are ConfigErrors naming the flag."""
    check_branch(branch)
    if path.strip().startswith("/"):
        raise ConfigError(f"--path {path}: a directory inside the repository is wanted, relative to its top "
                          "(not an absolute path)")
    if ".." in path.strip().split("/"):
        raise ConfigError(f"--path {path}: a directory inside the repository is wanted, relative to its top "
                          "(without '..')")


def _close_names(name: str, state: DesiredState, zone: Zone, sha: str) -> list[str]:
    """A NAME under a zone's domain that no record of the zone has: said so, with the zone's
    names (and their host families' roots) closest to it when some are close (a typo?)."""
    names = {m.key.name for m in zone_records(state, zone, lambda r: True)}
    if name in names:
        return []
    suffix = "." + zone.domain
    relative = {n.removesuffix(suffix): n for n in sorted(names | {root_host_of(n) for n in names})
                if n.endswith(suffix)}  # the labels below the zone's domain are compared
    near = [relative[r] for r in difflib.get_close_matches(name.removesuffix(suffix), list(relative), n=3, cutoff=0.75)]
    close = f"; close names: {', '.join(near)} (a typo?)" if near else ""
    return [f"no record of zone {zone.domain} is named {name} at {sha[:7]}{close}"]


def _zones(entry: Entry) -> frozenset[str] | None:
    """The zones whose held state decides whether a cluster applied the entry (None: every zone)."""
    return frozenset(z.strip() for z in entry.zone.split(",") if z.strip()) or None


def clean_path(path: str) -> str:
    return "/".join(p for p in path.strip().split("/") if p not in ("", "."))
