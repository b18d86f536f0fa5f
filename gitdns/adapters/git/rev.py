"""The desired revision of a work tree: commit time, sha and trailers of HEAD.

gitpython is imported only when a revision is asked for, so `gitdns --help` stays fast.
A directory that is not inside a git work tree has no revision (None).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gitdns.core.desired import HeadInfo
from gitdns.core.model import Revision

log = logging.getLogger(__name__)


def head_info(path: Path) -> HeadInfo | None:
    """HEAD of the work tree at ``path`` (None: no repository, or no commit yet)."""
    return commit_at(path, "HEAD")


def commit_at(path: Path, rev: str) -> HeadInfo | None:
    """The commit ``rev`` names (a sha, a prefix of one, a branch, ``HEAD^1``...) as a
    `HeadInfo`, or None when git does not know it (or there is no repository)."""
    try:
        import git
    except ImportError:  # pragma: no cover
        return None
    try:
        repo = git.Repo(path, search_parent_directories=True)
        commit = repo.commit(rev)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, git.BadName, ValueError):
        return None
    except git.GitCommandError as exc:
        log.warning("read commit failed: path=%s error=%s", path, exc)
        return None
    message = commit.message if isinstance(commit.message, str) else commit.message.decode()
    return HeadInfo(Revision(int(commit.committed_date), commit.hexsha), message, str(commit.author))


def first_parents(path: Path, rev: str, count: int) -> list[str]:
    """The shas of ``rev`` and its first-parent ancestors, newest first, at most ``count``."""
    try:
        import git
    except ImportError:  # pragma: no cover
        return []
    try:
        repo = git.Repo(path, search_parent_directories=True)
        commit = repo.commit(rev)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, git.BadName, ValueError):
        return []
    out: list[str] = []
    while len(out) < count:
        out.append(commit.hexsha)
        if not commit.parents:
            break
        commit = commit.parents[0]
    return out


def parent_files(path: Path) -> dict[str, str] | None:
    """The ``*.yaml``/``*.yml`` files below ``path`` as they were in HEAD's first parent
    (relative to ``path``), or None when there is no parent or no repository."""
    return files_at(path, "HEAD~1")


def files_at(path: Path, rev: str) -> dict[str, str] | None:
    """The ``*.yaml``/``*.yml`` files below ``path`` as they were at ``rev`` (a sha, a prefix
    of one, or any revision git understands), or None when git does not know it."""
    try:
        import git
    except ImportError:  # pragma: no cover
        return None
    try:
        repo = git.Repo(path, search_parent_directories=True)
        commit = repo.commit(rev)
        top = Path(repo.working_tree_dir or path).resolve()
        prefix = Path(path).resolve().relative_to(top).as_posix()
        tree = commit.tree
        if prefix not in ("", "."):
            tree = tree / prefix
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, git.BadName, ValueError, KeyError):
        return None
    if not isinstance(tree, git.Tree):
        return None
    return _yaml_files(tree, prefix)


def _yaml_files(tree: Any, prefix: str) -> dict[str, str]:
    """Read as the desired branch's reader reads a commit (size caps, symlinks never followed)."""
    from gitdns.adapters.git.source import yaml_blobs

    return yaml_blobs(tree, "" if prefix in ("", ".") else prefix)


def status_files(path: Path, cluster_ids: Sequence[str], names: tuple[str, ...] = ("health.yaml",),
                 prefix: str = "gitdns-status/") -> dict[str, dict[str, str]]:
    """Files of each cluster's status branch as the work tree's repository knows it (a local
    branch, else a remote-tracking one); clusters with no such branch are left out.  The
    repository is opened and its refs listed once."""
    try:
        import git
    except ImportError:  # pragma: no cover
        return {}
    try:
        repo = git.Repo(path, search_parent_directories=True)
        refs = [r for r in repo.refs if prefix in r.path]
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError):
        return {}
    refs.sort(key=lambda r: not r.path.startswith("refs/heads/"))  # local branches first
    out: dict[str, dict[str, str]] = {}
    for cluster_id in cluster_ids:
        wanted = f"{prefix}{cluster_id}"
        ref = next((r for r in refs if r.path.endswith("/" + wanted)), None)
        if ref is not None:
            out[cluster_id] = _blobs(ref.commit.tree, names)
    return out


def _blobs(tree: Any, names: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in names:
        try:
            blob = tree / name
        except KeyError:
            continue
        out[name] = blob.data_stream.read().decode("utf-8", errors="replace")
    return out
