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

from gitdns.errors import PermanentError

YAML_SUFFIXES = (".yaml", ".yml")
REMOTE = "origin"
DEFAULT_BRANCH = "main"
# index states of a path with a merge conflict (git status --porcelain)
CONFLICTS = {"DD", "AU", "UD", "UA", "DU", "AA", "UU"}


class NotCommitted(PermanentError):
    reason = "UncommittedDesiredState"


def acting_on(repo: Path, *, from_worktree: bool = False, env: Mapping[str, str] | None = None,
              flag: str = "--from-worktree") -> str:
    """What a writing verb acts on, as the line it prints first; raises `NotCommitted` for a
    dirty or unmerged work tree unless ``from_worktree`` (``flag``: the option that said so)."""
    import git

    env = os.environ if env is None else env
    try:
        handle = git.Repo(repo, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return f"acting on the files in {repo} (not in a git work tree: no commit to check)"
    if handle.working_tree_dir is None:
        raise NotCommitted(f"{repo}: a bare repository; give the path of a work tree")
    try:
        head = handle.head.commit
    except ValueError:
        if from_worktree:
            return f"acting on the files in {repo} ({flag}; the repository has no commit yet)"
        raise NotCommitted(f"{repo}: the repository has no commit yet: commit the desired state first "
                           "(or pass --from-worktree)") from None
    message = head.message if isinstance(head.message, str) else head.message.decode("utf-8", "replace")
    subject = (message.strip().splitlines() or [""])[0]
    where = f"{head.hexsha[:7]} ({subject})"
    root = Path(handle.working_tree_dir).resolve()
    prefix = Path(repo).resolve().relative_to(root).as_posix()
    dirty = _dirty(handle, "." if prefix in ("", ".") else prefix)
    if from_worktree:
        extra = f" plus {len(dirty)} uncommitted file(s): {', '.join(dirty[:5])}" if dirty else ""
        return f"acting on the work tree ({flag}): {where}{extra}"
    if dirty:
        shown = ", ".join(dirty[:5]) + (f" and {len(dirty) - 5} more" if len(dirty) > 5 else "")
        raise NotCommitted(f"{repo}: uncommitted desired state ({shown}): a writing command acts on "
                           f"committed state only; commit and merge it, or pass --from-worktree")
    problem = _unmerged(handle, head.hexsha, env)
    if problem:
        raise NotCommitted(f"{repo}: HEAD {where} {problem}; a writing command acts on merged state only "
                           "(or pass --from-worktree)")
    return f"acting on {where}"


def _dirty(handle: object, pathspec: str) -> list[str]:
    """Desired-state files that differ from HEAD, and every path with a merge conflict."""
    import git

    assert isinstance(handle, git.Repo)
    out = handle.git.status("--porcelain=v1", "-z", "--untracked-files=all", "--", pathspec)
    entries = out.split("\0")
    found: list[str] = []
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        state, path = entry[:2], entry[3:]
        if state[0] in "RC":  # a rename or copy: the source path follows
            i += 1
        if state in CONFLICTS or path.endswith(YAML_SUFFIXES):
            found.append(path + (" (merge conflict)" if state in CONFLICTS else ""))
    return sorted(found)


def desired_branch(handle: object, env: Mapping[str, str]) -> str:
    """GITDNS_BRANCH, else the remote's default branch, else main."""
    import git

    assert isinstance(handle, git.Repo)
    if env.get("GITDNS_BRANCH"):
        return env["GITDNS_BRANCH"]
    try:
        target = handle.git.symbolic_ref("--quiet", f"refs/remotes/{REMOTE}/HEAD")
    except git.GitCommandError:
        return DEFAULT_BRANCH
    return str(target).removeprefix(f"refs/remotes/{REMOTE}/") or DEFAULT_BRANCH


def _unmerged(handle: object, sha: str, env: Mapping[str, str]) -> str:
    """Why HEAD is not on the desired branch as origin knows it ("" when it is, or no origin)."""
    import git

    assert isinstance(handle, git.Repo)
    if REMOTE not in [r.name for r in handle.remotes]:
        return ""
    branch = desired_branch(handle, env)
    ref = f"refs/remotes/{REMOTE}/{branch}"
    try:
        handle.git.rev_parse("--verify", "--quiet", ref)
    except git.GitCommandError:
        return (f"cannot be checked: {REMOTE}/{branch} is not known here (git fetch {REMOTE}; "
                "GITDNS_BRANCH names another desired branch)")
    try:
        handle.git.merge_base("--is-ancestor", sha, ref)
    except git.GitCommandError as exc:
        if exc.status == 1:
            return (f"is not on {REMOTE}/{branch} (an unmerged branch, or {REMOTE} not fetched since the "
                    f"merge: git fetch {REMOTE})")
        raise NotCommitted(f"git merge-base failed: {str(exc.stderr).strip() or exc}") from None
    return ""
