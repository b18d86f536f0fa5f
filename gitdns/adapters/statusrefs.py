"""One file of every status branch the work tree's repository already holds: read-only, no fetch.

    status_file(path, name) -> [StatusFile]    ``name`` at the tip of every local branch
                                               ``gitdns-status/<cluster-id>`` and every
                                               remote-tracking ``refs/remotes/<remote>/gitdns-status/<cluster-id>``

Nothing is written and no remote is contacted: the refs and objects are read as the repository
has them (fetch ``gitdns-status/*`` first to judge from the newest).  A path in no git
repository has no status branches (``[]``).  Status branches are written by anyone who can push
to them, so a file larger than ``max_bytes``, a ref that does not name a commit, and a missing
object each give ``text=None`` rather than an error; the text is never parsed here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import git

log = logging.getLogger(__name__)

PREFIX = "gitdns-status/"
MAX_FILE = 1 << 20  # a status file larger than this is not read
_ERRORS = (git.GitError, git.exc.ODBError, ValueError, TypeError, KeyError, OSError)


@dataclass(frozen=True, slots=True)
class StatusFile:
    """``name`` as one status branch has it: the ref, the cluster id its name ends with, and the
    text (None when the branch has no such file, or it could not or would not be read)."""

    ref: str
    cluster_id: str
    text: str | None
    why: str = ""  # why ``text`` is None


def cluster_of(ref: str, prefix: str = PREFIX) -> str | None:
    """The cluster id of a status branch ref, or None when ``ref`` is not one."""
    if ref.startswith("refs/heads/" + prefix):
        rest = ref[len("refs/heads/" + prefix):]
    elif ref.startswith("refs/remotes/") and "/" + prefix in ref[len("refs/remotes/"):]:
        rest = ref[len("refs/remotes/"):].partition("/" + prefix)[2]
    else:
        return None
    return rest if rest and "/" not in rest else None


def status_file(path: Path, name: str, prefix: str = PREFIX, max_bytes: int = MAX_FILE) -> list[StatusFile]:
    """``name`` on every status branch of the repository ``path`` lies in (local branches first)."""
    try:
        repo = git.Repo(path, search_parent_directories=True)
    except _ERRORS:
        return []
    with repo:
        try:
            refs = sorted((r.path, r) for r in repo.references)
        except _ERRORS as exc:
            log.debug("skipped: check=status-branches path=%s error=%s", path, exc)
            return []
        found = [(ref, cluster_of(ref, prefix), r) for ref, r in refs]
        out = [_read(ref, cluster, r, name, max_bytes) for ref, cluster, r in found if cluster is not None]
    return sorted(out, key=lambda f: (not f.ref.startswith("refs/heads/"), f.ref))


def _read(ref: str, cluster: str, reference: git.Reference, name: str, max_bytes: int) -> StatusFile:
    try:
        tree = reference.commit.tree
        try:
            blob = tree / name
        except KeyError:
            return StatusFile(ref, cluster, None, f"no {name}")
        if blob.type != "blob":
            return StatusFile(ref, cluster, None, f"{name} is not a file")
        if blob.size > max_bytes:
            return StatusFile(ref, cluster, None, f"{name} is larger than {max_bytes} bytes")
        data = blob.data_stream.read()
    except _ERRORS as exc:
        return StatusFile(ref, cluster, None, f"not readable ({type(exc).__name__})")
    return StatusFile(ref, cluster, data.decode("utf-8", errors="replace"))
