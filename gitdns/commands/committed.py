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

The check runs the git program (`gitdns.adapters.status.cache.run_git`: no prompt, a timeout,
its process group killed after it), a handful of plumbing commands: GitPython is not imported
for it, which keeps ~4 MiB and ~50 ms off every ``apply``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gitdns.core.text import inline
from gitdns.errors import PermanentError

YAML_SUFFIXES = (".yaml", ".yml")
REMOTE = "origin"
DEFAULT_BRANCH = "main"
GIT_TIMEOUT = 60.0  # local commands only: no fetch, no remote is asked


class NotCommitted(PermanentError):
    reason = "UncommittedDesiredState"


class _NoWorkTree(Exception):
    """The path lies in no git work tree."""


@dataclass(frozen=True, slots=True)
class _Tree:
    """The git work tree holding the desired repository: its root and the repository's path in it."""

    root: Path
    prefix: str  # posix, "" at the root


def _git(tree_or_dir: _Tree | Path, *args: str, env: Mapping[str, str] | None = None) -> tuple[int, str, str]:
    from gitdns.adapters.status.cache import run_git

    cwd = tree_or_dir.root if isinstance(tree_or_dir, _Tree) else tree_or_dir
    out = run_git(args, cwd=cwd, timeout=GIT_TIMEOUT, env=env)
    return out.rc, out.stdout.decode("utf-8", "replace"), out.stderr.strip()


def _open(repo: Path) -> _Tree:
    """The work tree ``repo`` lies in; `_NoWorkTree` outside one, `NotCommitted`'s message for a
    bare repository or one without a commit (raised as ValueError)."""
    if not repo.is_dir():
        raise _NoWorkTree
    code, out, _ = _git(repo, "rev-parse", "--is-bare-repository", "--show-toplevel")
    if code != 0:
        raise _NoWorkTree
    lines = out.splitlines()
    if lines[:1] == ["true"] or len(lines) < 2:
        raise ValueError(f"{repo}: a bare repository; give the path of a work tree")
    root = Path(lines[1]).resolve()
    tree = _Tree(root, Path(repo).resolve().relative_to(root).as_posix())
    tree = _Tree(root, "" if tree.prefix == "." else tree.prefix)
    if _git(tree, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")[0] != 0:
        raise ValueError(f"{repo}: the repository has no commit yet")
    return tree


def acting_on(repo: Path, *, from_worktree: bool = False, env: Mapping[str, str] | None = None,
              flag: str = "--from-worktree") -> str:
    """What a writing verb acts on, as the line it prints first; raises `NotCommitted` for a
    dirty or unmerged work tree unless ``from_worktree`` (``flag``: the option that said so)."""
    env = os.environ if env is None else env
    try:
        tree = _open(Path(repo))
    except _NoWorkTree:
        return f"acting on the files in {repo} (not in a git work tree: no commit to check)"
    except ValueError as exc:  # a bare repository, or one without a commit
        if from_worktree:
            return f"acting on the files in {repo} ({flag}; {exc})"
        raise NotCommitted(f"{exc}: commit the desired state first (or pass --from-worktree)") from None
    from gitdns.adapters.git.rev import head_info

    head = head_info(tree.root)
    if head is None:
        raise NotCommitted(f"{repo}: HEAD could not be read: commit the desired state first (or pass --from-worktree)")
    sha = head.revision.sha
    subject = (head.message.strip().splitlines() or [""])[0]
    where = f"{sha[:7]} ({inline(subject)})"
    dirty = [inline(name) for name in _dirty(tree)]
    if from_worktree:
        extra = f" plus {len(dirty)} uncommitted file(s): {', '.join(dirty[:5])}" if dirty else ""
        return f"acting on the work tree ({flag}): {where}{extra}"
    if dirty:
        shown = ", ".join(dirty[:5]) + (f" and {len(dirty) - 5} more" if len(dirty) > 5 else "")
        raise NotCommitted(f"{repo}: uncommitted desired state ({shown}): a writing command acts on "
                           f"committed state only; commit and merge it, or pass --from-worktree")
    problem = _unmerged(tree, sha, env)
    if problem:
        raise NotCommitted(f"{repo}: HEAD {where} {problem}; a writing command acts on merged state only "
                           "(or pass --from-worktree)")
    return f"acting on {where}"


def _dirty(tree: _Tree) -> list[str]:
    """Desired-state files that differ from HEAD, and every path with a merge conflict."""
    code, out, err = _git(tree, "status", "--porcelain=v2", "-z", "--untracked-files=all", "--", tree.prefix or ".")
    if code != 0:
        raise NotCommitted(f"git status failed: {inline(err) or code}")
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


def desired_branch(root: Path, env: Mapping[str, str]) -> str:
    """GITDNS_BRANCH, else the remote's default branch, else main (``root``: the work tree's)."""
    if env.get("GITDNS_BRANCH"):
        return env["GITDNS_BRANCH"]
    code, out, _ = _git(root, "symbolic-ref", "--quiet", f"refs/remotes/{REMOTE}/HEAD")
    if code != 0:
        return DEFAULT_BRANCH
    return out.strip().removeprefix(f"refs/remotes/{REMOTE}/") or DEFAULT_BRANCH


def _unmerged(tree: _Tree, sha: str, env: Mapping[str, str]) -> str:
    """Why HEAD is not on the desired branch as origin knows it ("" when it is, or no origin)."""
    if _git(tree, "config", "--get", f"remote.{REMOTE}.url")[0] != 0:
        return ""
    branch = desired_branch(tree.root, env)
    ref = f"refs/remotes/{REMOTE}/{branch}"
    if _git(tree, "rev-parse", "--verify", "--quiet", ref)[0] != 0:
        return (f"cannot be checked: {REMOTE}/{branch} is not known here (git fetch {REMOTE}; "
                "GITDNS_BRANCH names another desired branch)")
    if _git(tree, "merge-base", "--is-ancestor", sha, ref)[0] != 0:
        return (f"is not on {REMOTE}/{branch} (an unmerged branch, or {REMOTE} not fetched since the "
                f"merge: git fetch {REMOTE})")
    return ""
