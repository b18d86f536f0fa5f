"""The status branches (and the desired branch) a local repository already holds: read-only, no fetch.

    status_file(path, name) -> [StatusFile]    ``name`` at the tip of every local branch
                                               ``gitdns-status/<cluster-id>`` and every
                                               remote-tracking ``refs/remotes/<remote>/gitdns-status/<cluster-id>``
    local_refs(repo, branch) -> LocalRefs | None
                                               which refs of the local repository ``repo`` to read:
                                               one per status branch and the desired branch (None:
                                               ``repo`` is a URL, not a local path)
    LocalRefs
        .path                                  the repository's common git directory (fetch from it)
        .remote                                the remote the desired branch tracks (or None)
        .desired                               the desired branch's ref, or None when it has none
        .status                                {cluster id: ref}
        .branches                              its other branches (not status branches), short names
        .notes                                 what a reader should know (a local branch ahead, ...)
        .status_refspecs(dest) / .desired_refspec(dest)   ``+<ref>:<dest><cluster id>`` / ``+<ref>:<dest>``
        .tracking                              some ref read is a remote-tracking one
        .describe() -> str                     which refs were read, in a sentence
        .source() -> dict                      the same for JSON
        .fetch_hint() -> str                   the git fetch that brings the status branches
        .resolve(revision) -> sha | None       a revision as git resolves it in the repository

Nothing is written and no remote is contacted: the refs and objects are read as the repository
has them (fetch ``gitdns-status/*`` first to judge from the newest).  A path in no git
repository has no status branches (``status_file`` gives ``[]``; ``local_refs`` raises).  Status
branches are written by anyone who can push to them, so a file larger than ``max_bytes``, a ref
that does not name a commit, and a missing object each give ``text=None`` rather than an error;
the text is never parsed here.

Which refs `local_refs` reads (docs/cli.md, "gitdns status"): the remote is the one the desired
branch tracks (``branch.<branch>.remote``), else ``origin``, else the only remote.

- a status branch: the local branch ``refs/heads/gitdns-status/<id>`` (the repository the agents
  push to has them), else the remote's ``refs/remotes/<remote>/gitdns-status/<id>`` (a clone has
  only those: git never makes local branches for them); when both exist and the remote-tracking
  one is ahead of the local one (a descendant: status branches only move forward), the
  remote-tracking one — a local branch once checked out and left behind is not the newest;
- the desired branch: the remote's ``refs/remotes/<remote>/<branch>`` (what the agents fetch, as
  of the last ``git fetch``), else the local ``refs/heads/<branch>``.  Local commits not on the
  remote are not what the fleet applies: a note says how many there are.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import git

from gitdns.adapters.status.cache import GitOut, run_git, tail
from gitdns.errors import ConfigError

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


# -- which refs a local repository offers ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class LocalRefs:
    """The refs of a local repository to read for its status branches and its desired branch."""

    repo: str  # as the user gave it (for messages)
    path: Path  # the common git directory: what to fetch from
    branch: str
    remote: str | None
    desired: str | None
    status: Mapping[str, str] = field(default_factory=dict)  # cluster id -> ref
    branches: tuple[str, ...] = ()  # its other branches, local and ``remote``'s (``main``, ``origin/main``)
    notes: tuple[str, ...] = ()
    prefix: str = PREFIX
    timeout: float = 30.0

    def status_refspecs(self, dest: str) -> list[str]:
        return [f"+{ref}:{dest}{cid}" for cid, ref in sorted(self.status.items())]

    def desired_refspec(self, dest: str) -> str | None:
        return f"+{self.desired}:{dest}" if self.desired else None

    @property
    def tracking(self) -> bool:
        """Some ref read is a remote-tracking one (as new as the last ``git fetch``)."""
        return any(r.startswith("refs/remotes/") for r in (*self.status.values(), self.desired or ""))

    def describe(self) -> str:
        """Which refs were read: ``read from REPO: 3 status branches (refs/remotes/origin/gitdns-status/*),
        the desired branch refs/remotes/origin/main; remote-tracking refs are as new as the last git fetch``."""
        kinds: dict[str, int] = {}
        for ref in self.status.values():
            where = ref[:-len(ref.rpartition("/")[2])] + "*"
            kinds[where] = kinds.get(where, 0) + 1
        parts = [f"{n} status branch{'es' if n != 1 else ''} ({where})" for where, n in sorted(kinds.items())]
        parts.append(f"the desired branch {self.desired}" if self.desired else f"no desired branch {self.branch}")
        text = f"read from {self.repo}: " + ", ".join(parts)
        if self.tracking:
            text += f"; remote-tracking refs are as new as the last fetch (git fetch {self.remote or 'origin'})"
        return text

    def source(self) -> dict[str, Any]:
        return {"repository": self.repo, "local": True, "remote": self.remote, "desiredRef": self.desired,
                "statusRefs": dict(sorted(self.status.items()))}

    def fetch_hint(self) -> str:
        remote = self.remote or "origin"
        return (f"git fetch {remote} 'refs/heads/{self.prefix}*:refs/remotes/{remote}/{self.prefix}*'")

    def resolve(self, revision: str) -> str | None:
        """``revision`` as git resolves it in the repository (a tag, a branch, an abbreviation,
        ``HEAD~2`` ...): the commit's sha, or None."""
        text = revision.strip()
        if not text or text.startswith("-"):
            return None
        out = _git(self.path, ["rev-parse", "-q", "--verify", f"{text}^{{commit}}"], self.timeout)
        sha = out.stdout.decode(errors="replace").strip()
        return sha if out.rc == 0 and sha else None


def local_refs(repo: str | Path, branch: str, prefix: str = PREFIX, timeout: float = 30.0) -> LocalRefs | None:
    """Which refs of the local repository ``repo`` hold its status branches and the desired
    ``branch`` (the rule is in the module docstring).  None when ``repo`` is a URL or names no
    existing path (git is left to read it as a URL); ConfigError when it is a path in no git
    repository.  Read-only."""
    text = str(repo)
    if "://" in text or not text or not Path(text).exists():
        return None
    top = _git(Path(text), ["rev-parse", "--path-format=absolute", "--git-common-dir"], timeout)
    if top.rc != 0:
        raise ConfigError(f"--repo {text}: not a git repository ({tail(top.stderr, 200)}): give a repository's "
                          "path or URL")
    path = Path(top.stdout.decode(errors="replace").strip())
    remote = _remote(path, branch, timeout)
    heads, remotes = "refs/heads/", f"refs/remotes/{remote}/" if remote else None
    listing = _git(path, ["for-each-ref", "--format=%(objectname) %(refname)", heads,
                          *([remotes] if remotes else [])], timeout)
    if listing.rc != 0:
        raise ConfigError(f"--repo {text}: its refs cannot be read: {tail(listing.stderr, 200)}")
    refs: dict[str, str] = {}
    for line in listing.stdout.decode(errors="replace").splitlines():
        sha, _, ref = line.partition(" ")
        if ref and not ref.endswith("/HEAD"):
            refs[ref] = sha
    status: dict[str, str] = {}
    for ref in sorted(refs):
        cluster = cluster_of(ref, prefix)
        if cluster is None:
            continue  # (only ``remote``'s remote-tracking refs were listed)
        local = f"{heads}{prefix}{cluster}"
        if ref == local or local not in refs:
            status.setdefault(cluster, ref)
    for cluster, ref in list(status.items()):
        tracked = f"{remotes}{prefix}{cluster}" if remotes else None
        if (tracked and ref != tracked and tracked in refs and refs[tracked] != refs[ref]
                and _is_ancestor(path, refs[ref], refs[tracked], timeout)):
            status[cluster] = tracked  # the local branch is behind: a copy once checked out
    notes: list[str] = []
    local_branch = f"{heads}{branch}"
    tracked_branch = f"{remotes}{branch}" if remotes else ""
    desired = tracked_branch if tracked_branch in refs else local_branch if local_branch in refs else None
    if desired and desired == tracked_branch and local_branch in refs and refs[local_branch] != refs[desired]:
        ahead = _git(path, ["rev-list", "--count", refs[local_branch], f"^{refs[desired]}"], timeout)
        count = ahead.stdout.decode(errors="replace").strip()
        if ahead.rc == 0 and count not in ("", "0"):
            notes.append(f"the local branch {branch} has {count} commit(s) that {remote}/{branch} has not (not "
                         f"pushed: no agent applies them); read {remote}/{branch}")
    status_dirs = tuple(f"{where}{prefix}" for where in (heads, remotes) if where)
    others = tuple(ref.removeprefix(heads).removeprefix("refs/remotes/") for ref in sorted(refs)
                   if not ref.startswith(status_dirs))
    return LocalRefs(text, path, branch, remote, desired, status, others, tuple(notes), prefix, timeout)


def _git(path: Path, args: list[str], timeout: float) -> GitOut:
    return run_git(["-C", str(path), *args], cwd=None, timeout=timeout)


def _remote(path: Path, branch: str, timeout: float) -> str | None:
    """The remote ``branch`` tracks, else ``origin``, else the only remote; None without remotes."""
    remotes = _git(path, ["remote"], timeout).stdout.decode(errors="replace").split()
    config = _git(path, ["config", "--get", f"branch.{branch}.remote"], timeout)
    tracked = config.stdout.decode(errors="replace").strip()
    if tracked in remotes:
        return tracked
    if "origin" in remotes:
        return "origin"
    return remotes[0] if len(remotes) == 1 else None


def _is_ancestor(path: Path, older: str, newer: str, timeout: float) -> bool:
    return _git(path, ["merge-base", "--is-ancestor", older, newer], timeout).rc == 0
