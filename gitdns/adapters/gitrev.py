"""The desired revision of a work tree: commit time, sha and trailers of HEAD.

gitpython is imported only when a revision is asked for, so `gitdns --help` stays fast.
A directory that is not inside a git work tree has no revision (None).
"""

from __future__ import annotations

import logging
from pathlib import Path

from gitdns.core.desired import HeadInfo
from gitdns.core.model import Revision

log = logging.getLogger(__name__)

def head_info(path: Path) -> HeadInfo | None:
    try:
        import git
    except ImportError:  # pragma: no cover - gitpython is a declared dependency
        return None
    try:
        repo = git.Repo(path, search_parent_directories=True)
        commit = repo.head.commit
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError):
        return None
    except git.GitCommandError as exc:
        log.warning("read head failed: path=%s error=%s", path, exc)
        return None
    message = commit.message if isinstance(commit.message, str) else commit.message.decode()
    return HeadInfo(Revision(int(commit.committed_date), commit.hexsha), message, str(commit.author))


def parent_files(path: Path) -> dict[str, str] | None:
    """The ``*.yaml``/``*.yml`` files below ``path`` as they were in HEAD's first parent
    (relative to ``path``), or None when there is no parent or no repository."""
    try:
        import git
    except ImportError:  # pragma: no cover
        return None
    try:
        repo = git.Repo(path, search_parent_directories=True)
        commit = repo.head.commit
        if not commit.parents:
            return None
        top = Path(repo.working_tree_dir or path).resolve()
        prefix = Path(path).resolve().relative_to(top).as_posix()
        tree = commit.parents[0].tree
        if prefix not in ("", "."):
            tree = tree / prefix
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError, KeyError):
        return None
    files: dict[str, str] = {}
    if not isinstance(tree, git.Tree):
        return None
    for item in tree.traverse():
        if not isinstance(item, git.Blob):
            continue
        name = str(item.path)
        rel = name[len(prefix) + 1 :] if prefix not in ("", ".") else name
        if not rel.endswith((".yaml", ".yml")):
            continue
        if any(part.startswith(".") for part in rel.split("/")):
            continue
        files[rel] = item.data_stream.read().decode("utf-8", errors="replace")
    return files
