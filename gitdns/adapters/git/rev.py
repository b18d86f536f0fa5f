"""The desired revision of a work tree: commit time, sha and trailers of HEAD.

A commit is read with the git program (`gitdns.adapters.status.cache.run_git`: two plumbing
commands), so a one-shot verb that only needs HEAD (every ``plan`` and ``apply``) does not
import gitpython (~4 MiB, ~50 ms); the readers of trees and refs below import it when called.
A directory that is not inside a git work tree has no revision (None).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gitdns.core.desired import HeadInfo
from gitdns.core.model import Revision

log = logging.getLogger(__name__)
GIT_TIMEOUT = 60.0  # local commands only


def head_info(path: Path) -> HeadInfo | None:
    """HEAD of the work tree at ``path`` (None: no repository, or no commit yet)."""
    return commit_at(path, "HEAD")


def commit_at(path: Path, rev: str) -> HeadInfo | None:
    """The commit ``rev`` names (a sha, a prefix of one, a branch, ``HEAD^1``...) as a
    `HeadInfo`, or None when git does not know it (or there is no repository).  The commit
    object is read raw (``git cat-file commit``) and parsed as gitpython parses it, so an author
    or a message carrying any byte (a forge stores what its user typed) reads the same."""
    from gitdns.adapters.status.cache import run_git
    from gitdns.errors import GitdnsError

    if not Path(path).is_dir():
        return None
    try:
        found = run_git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
                        cwd=Path(path), timeout=GIT_TIMEOUT)
        if found.rc != 0:
            return None  # no repository, no commit yet, or a name git does not know
        sha = found.stdout.decode("ascii", "replace").strip()
        raw = run_git(["cat-file", "commit", sha], cwd=Path(path), timeout=GIT_TIMEOUT)
    except GitdnsError as exc:
        log.warning("read commit failed: path=%s error=%s", path, exc)
        return None
    if raw.rc != 0:
        log.warning("read commit failed: path=%s error=%s", path, raw.stderr.strip())
        return None
    return parse_commit(sha, raw.stdout)


_WHEN = re.compile(rb"> ?(-?\d+) ([+-]?\d+)\s*$")


def parse_commit(sha: str, raw: bytes) -> HeadInfo | None:
    """A raw commit object (``git cat-file commit``) as `HeadInfo`: the committer's time, the
    author's name and the message, decoded as its ``encoding`` header says (UTF-8 by default),
    undecodable bytes replaced."""
    head, _, body = raw.partition(b"\n\n")
    fields: dict[bytes, bytes] = {}
    for line in head.split(b"\n"):
        key, _, value = line.partition(b" ")
        if key in (b"author", b"committer", b"encoding") and key not in fields:
            fields[key] = value
    when = _WHEN.search(fields.get(b"committer", b""))
    if when is None:
        return None
    encoding = fields.get(b"encoding", b"UTF-8").decode("ascii", "replace").strip() or "UTF-8"
    try:
        message = body.decode(encoding, "replace")
        actor = fields.get(b"author", b"").decode(encoding, "replace")
    except LookupError:  # an encoding Python does not know
        message = body.decode("utf-8", "replace")
        actor = fields.get(b"author", b"").decode("utf-8", "replace")
    left = actor.find("<")
    right = actor.find(">", left + 1)
    author = actor[:left].rstrip() if left >= 0 and right >= 0 else actor  # the name, as gitpython reads it
    return HeadInfo(Revision(int(when.group(1)), sha), message, author)


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
    branch, else a remote-tracking one); clusters with no such branch are left out.  The refs
    are listed once and every file is read in one ``git cat-file --batch``."""
    from gitdns.adapters.status.cache import run_git
    from gitdns.errors import GitdnsError

    if not Path(path).is_dir():
        return {}
    try:
        listed = run_git(["for-each-ref", "--format=%(refname)", "refs/heads", "refs/remotes"],
                         cwd=Path(path), timeout=GIT_TIMEOUT)
    except GitdnsError as exc:
        log.warning("list status branches failed: path=%s error=%s", path, exc)
        return {}
    if listed.rc != 0:
        return {}  # no repository
    refs = [r for r in listed.stdout.decode("utf-8", "replace").splitlines() if prefix in r]
    refs.sort(key=lambda r: not r.startswith("refs/heads/"))  # local branches first
    chosen: dict[str, str] = {}
    for cluster_id in cluster_ids:
        wanted = f"{prefix}{cluster_id}"
        ref = next((r for r in refs if r.endswith("/" + wanted)), None)
        if ref is not None:
            chosen[cluster_id] = ref
    if not chosen:
        return {}
    asked = [(cluster_id, name) for cluster_id in chosen for name in names]
    query = "".join(f"{chosen[cluster_id]}:{name}\n" for cluster_id, name in asked).encode()
    try:
        batch = run_git(["cat-file", "--batch"], cwd=Path(path), timeout=GIT_TIMEOUT, stdin=query)
    except GitdnsError as exc:
        log.warning("read status branches failed: path=%s error=%s", path, exc)
        return {}
    out: dict[str, dict[str, str]] = {cluster_id: {} for cluster_id in chosen}
    data, at = batch.stdout, 0
    for cluster_id, name in asked:
        end = data.find(b"\n", at)
        if end < 0:
            break
        header = data[at:end].split(b" ")
        at = end + 1
        if len(header) != 3 or header[-1] == b"missing":
            continue  # "<name> missing": the branch has no such file
        size = int(header[2])
        if header[1] == b"blob":
            out[cluster_id][name] = data[at:at + size].decode("utf-8", errors="replace")
        at += size + 1
    return out
