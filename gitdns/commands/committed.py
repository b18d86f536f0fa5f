"""The verbs that write to a zone (``apply``, ``adopt``, ``prune-owner``, ``groups ... --direct``)
act on committed, merged desired state only: one check, shared by all of them.

    acting_on(repo, from_worktree=False, env=None) -> str
        the line "acting on <sha7> (<subject>)" every such verb prints first, or NotCommitted

Refused (unless ``--from-worktree``):

- **dirty**: a desired-state file (``*.yaml``/``*.yml`` under ``repo``, what the reader reads)
  is modified, staged, deleted or untracked, or the index holds a merge conflict;
- **unmerged**: HEAD is not contained in the desired branch as the remote knows it
  (``origin/<branch>``, the remote-tracking ref: no fetch is made, so a commit merged since the
  last fetch is refused until ``git fetch origin``).  The branch is ``GITDNS_BRANCH`` (the
  agent's setting), else the remote's default (``origin/HEAD``), else ``main``.  With no remote
  named ``origin`` only "dirty" applies.

A directory that is in no git work tree has no commit: its files are what the verb acts on
(local development and demos), and the line says so.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from gitdns.core.text import inline
from gitdns.errors import PermanentError

if TYPE_CHECKING:
    from gitdns.adapters.worktree import WorkTree

YAML_SUFFIXES = (".yaml", ".yml")
REMOTE = "origin"
DEFAULT_BRANCH = "main"


class NotCommitted(PermanentError):
    reason = "UncommittedDesiredState"


def acting_on(repo: Path, *, from_worktree: bool = False, env: Mapping[str, str] | None = None,
              flag: str = "--from-worktree") -> str:
    """What a writing verb acts on, as the line it prints first; raises `NotCommitted` for a
    dirty or unmerged work tree unless ``from_worktree`` (``flag``: the option that said so)."""
    from gitdns.adapters import worktree

    env = os.environ if env is None else env
    try:
        wt = worktree.open_worktree(repo)
    except worktree.NotAWorkTree:
        return f"acting on the files in {repo} (not in a git work tree: no commit to check)"
    except worktree.WorkTreeError as exc:  # a bare repository, or one without a commit
        if from_worktree:
            return f"acting on the files in {repo} ({flag}; {exc})"
        raise NotCommitted(f"{exc}: commit the desired state first (or pass --from-worktree)") from None
    head = wt.handle.head.commit
    message = head.message if isinstance(head.message, str) else head.message.decode("utf-8", "replace")
    subject = (message.strip().splitlines() or [""])[0]
    where = f"{head.hexsha[:7]} ({inline(subject)})"
    dirty = [inline(name) for name in _dirty(wt)]
    if from_worktree:
        extra = f" plus {len(dirty)} uncommitted file(s): {', '.join(dirty[:5])}" if dirty else ""
        return f"acting on the work tree ({flag}): {where}{extra}"
    if dirty:
        shown = ", ".join(dirty[:5]) + (f" and {len(dirty) - 5} more" if len(dirty) > 5 else "")
        raise NotCommitted(f"{repo}: uncommitted desired state ({shown}): a writing command acts on "
                           f"committed state only; commit and merge it, or pass --from-worktree")
    problem = _unmerged(wt, head.hexsha, env)
    if problem:
        raise NotCommitted(f"{repo}: HEAD {where} {problem}; a writing command acts on merged state only "
                           "(or pass --from-worktree)")
    return f"acting on {where}"


def _dirty(wt: WorkTree) -> list[str]:
    """Desired-state files that differ from HEAD, and every path with a merge conflict."""
    from gitdns.adapters.worktree import run_git

    out = run_git(wt, "status", "--porcelain=v2", "-z", "--untracked-files=all", "--", wt.prefix or ".")
    entries = out.split("\0")
    found: list[str] = []
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        kind = entry[:2]
        if kind == "1 ":
            path = entry.split(" ", 8)[-1]
        elif kind == "2 ":  # a rename or copy: the source path follows
            path = entry.split(" ", 9)[-1]
            i += 1
        elif kind == "u ":
            found.append(entry.split(" ", 10)[-1] + " (merge conflict)")
            continue
        elif kind == "? ":
            path = entry[2:]
        else:
            continue
        if path.endswith(YAML_SUFFIXES):
            found.append(path)
    return sorted(found)


def desired_branch(wt: WorkTree, env: Mapping[str, str]) -> str:
    """GITDNS_BRANCH, else the remote's default branch, else main."""
    from gitdns.adapters.worktree import WorkTreeError, run_git

    if env.get("GITDNS_BRANCH"):
        return env["GITDNS_BRANCH"]
    try:
        target = run_git(wt, "symbolic-ref", "--quiet", f"refs/remotes/{REMOTE}/HEAD")
    except WorkTreeError:
        return DEFAULT_BRANCH
    return target.removeprefix(f"refs/remotes/{REMOTE}/") or DEFAULT_BRANCH


def _unmerged(wt: WorkTree, sha: str, env: Mapping[str, str]) -> str:
    """Why HEAD is not on the desired branch as origin knows it ("" when it is, or no origin)."""
    from gitdns.adapters.worktree import WorkTreeError, run_git

    if wt.origin_url() is None:
        return ""
    branch = desired_branch(wt, env)
    ref = f"refs/remotes/{REMOTE}/{branch}"
    try:
        run_git(wt, "rev-parse", "--verify", "--quiet", ref)
    except WorkTreeError:
        return (f"cannot be checked: {REMOTE}/{branch} is not known here (git fetch {REMOTE}; "
                "GITDNS_BRANCH names another desired branch)")
    try:
        run_git(wt, "merge-base", "--is-ancestor", sha, ref)
    except WorkTreeError:
        return (f"is not on {REMOTE}/{branch} (an unmerged branch, or {REMOTE} not fetched since the "
                f"merge: git fetch {REMOTE})")
    return ""
