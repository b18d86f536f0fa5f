"""Status branches: one per cluster, ``gitdns-status/<cluster-id>`` (docs/agent.md, "Status
branches").

    StatusBranch(url, cluster_id, workdir=...)
        .publish(files, message) -> sha | None   commit exactly ``files``; None when unchanged
        .read_one(cluster_id=None) -> StatusTree | None
    read_all(url, workdir=...) -> {cluster_id: StatusTree}

Commits are built with git plumbing (``hash-object -w``, ``mktree``, ``commit-tree``:
`gitdns.adapters.status.objects`) in a bare cache repository below ``workdir``
(`gitdns.adapters.status.cache`): no work tree, no index.  A push is a plain
``git push <url> <sha>:refs/heads/<branch>``: never forced, so the remote only ever moves
forward, and never to any branch but this cluster's status branch.  The first commit is an
orphan.  When the push is refused because the tip moved (a second writer with the same
cluster id; the lease should prevent it), the commit is rebuilt on the new tip, same tree,
and retried a bounded number of times with jitter.  Every command that talks to the remote
(ls-remote, fetch, push) goes through `gitdns.adapters.status.cache.run_remote`: a connection
the SSH server turned away before the key exchange (sshd's ``MaxStartups``, when many agents
push at once) is tried again with exponential backoff and full jitter; a host key, key or
authentication failure is raised at once.

Crash safety: git writes objects atomically (temporary file, then rename) and the remote
updates a ref with a compare-and-swap, so a process killed at any point leaves at most
unreferenced objects, temporary files and stale ``*.lock`` files in its cache; the lock and
temporary files are removed when a `StatusBranch` first uses its cache (and on every
`read_all`), and the next publish re-reads the remote tip.  A cache directory belongs to
one process at a time (the agent's lease guarantees that for a publisher; give readers
their own ``workdir``); within a process its users are serialised.

Every git command runs with a timeout; on expiry its whole process group is killed
(``kill_after_timeout`` in gitpython terms, but reaching ``ssh``/``git-remote-https`` too)
and `UnreachableError` is raised.  Messages never carry the credentials of a URL.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Mapping
from pathlib import Path

from gitdns.adapters.git.auth import GitAuth
from gitdns.adapters.git.errors import FIXES
from gitdns.adapters.status.cache import StatusCache, fetch_error, remote_error, run_remote, sanitize, tail
from gitdns.adapters.status.objects import blob_sha, mktree, read_trees, tree_sha, validated, write_blobs
from gitdns.core.status.doc import StatusTree
from gitdns.errors import ConfigError, PermanentError, RetryableError, StaleWriteError

log = logging.getLogger(__name__)

DEFAULT_PREFIX = "gitdns-status/"
TRACK = "refs/status/"  # the cache's copy of each status branch tip
PUBLISH_CACHE = "status-publish.git"
READ_CACHE = "status-read.git"
_RACE = ("fetch first", "non-fast-forward", "stale info", "failed to lock", "cannot lock ref",
         "failed to update ref", "incorrect old value", "reference already exists", "but expected")
_CLUSTER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


# -- the public API --------------------------------------------------------------------------


class StatusBranch:
    """The status branch of one cluster on one remote (see the module docstring)."""

    def __init__(self, url: str, cluster_id: str, *, workdir: Path, timeout: float = 30.0,
                 prefix: str = DEFAULT_PREFIX, max_attempts: int = 6,
                 author: tuple[str, str] = ("gitdns", "gitdns@localhost"), auth: GitAuth | None = None) -> None:
        if not _CLUSTER_ID.fullmatch(cluster_id) or ".." in cluster_id or cluster_id.endswith((".lock", ".")):
            raise ConfigError(f"cluster id {cluster_id!r} cannot name a status branch")
        if not prefix or prefix.startswith("/") or not prefix.endswith("/") or ".." in prefix:
            raise ConfigError(f"status branch prefix {prefix!r} must be a relative ref path ending in '/'")
        self.url = url
        self.cluster_id = cluster_id
        self.prefix = prefix
        self.branch = f"{prefix}{cluster_id}"
        self.timeout = timeout
        self.max_attempts = max(1, max_attempts)
        self._cache = StatusCache(Path(workdir) / PUBLISH_CACHE, timeout)
        self._auth = auth  # the same transport as the desired branch's fetch (key, token, CA)
        self._started = False  # the first use sweeps stale locks left by a killed predecessor
        self._pushed: str | None = None  # the commit this object pushed last (the branch tip, unless it moved)
        self._generation = 0
        self._trees: dict[str, str] = {}  # commit -> tree, for commits known to be in the cache
        self._blobs: set[str] = set()  # blobs this object wrote to the cache
        name, email = author
        self._ident = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email,
                       "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email}

    def __repr__(self) -> str:
        return f"StatusBranch(url={sanitize(self.url)!r}, branch={self.branch!r})"

    def publish(self, files: Mapping[str, str], message: str) -> str | None:
        """Make the branch's tree exactly ``files``; the new commit's sha, or None when unchanged."""
        blobs = validated(files)
        shas = {path: blob_sha(data) for path, data in blobs.items()}
        want = tree_sha(shas)
        with self._cache.lock:
            self._start()
            for attempt in range(1, self.max_attempts + 1):
                # the tip this object pushed last is the parent to try first: one connection (the
                # push) instead of three; a push refused because the branch moved reads the remote
                known = attempt == 1 and self._pushed is not None and self._cache.has_commit(self._pushed)
                tip = self._pushed if known else self._remote_tip(self.cluster_id)
                if tip is not None and self._tree_of(tip) == want:
                    log.debug("publish unchanged: branch=%s tip=%s", self.branch, tip[:7])
                    return None
                self._write(blobs, shas, want)
                commit = self._commit(want, tip, message)
                if self._push(commit):
                    self._remember(commit, want)
                    self._pushed = commit
                    log.info("published: branch=%s commit=%s parent=%s attempt=%d", self.branch, commit[:7],
                             tip[:7] if tip else "none", attempt)
                    return commit
                self._pushed = None
                delay = random.uniform(0.0, min(2.0, 0.05 * 2**attempt))
                log.info("publish raced: branch=%s attempt=%d retry_in=%.2fs", self.branch, attempt, delay)
                time.sleep(delay)
        raise StaleWriteError(f"status branch {self.branch} moved under every one of {self.max_attempts} pushes")

    def read_one(self, cluster_id: str | None = None) -> StatusTree | None:
        """The tip of ``cluster_id``'s status branch (this cluster's by default); None when absent."""
        cid = cluster_id or self.cluster_id
        with self._cache.lock:
            self._start()
            tip = self._remote_tip(cid)
            if tip is None:
                return None
            return read_trees(self._cache, {cid: tip}).get(cid)

    def _start(self) -> None:
        self._cache.ensure(sweep=not self._started)
        self._started = True
        if self._generation != self._cache.generation:
            self._trees.clear()
            self._blobs.clear()
            self._pushed = None  # a rebuilt cache holds none of our commits
            self._generation = self._cache.generation

    def _tree_of(self, commit: str) -> str:
        if commit not in self._trees:
            self._trees[commit] = self._cache.local(["rev-parse", f"{commit}^{{tree}}"]).decode().strip()
        return self._trees[commit]

    def _write(self, blobs: Mapping[str, bytes], shas: Mapping[str, str], want: str) -> None:
        """Blobs not written yet by this object, then the trees; checks git agrees on the root."""
        new = {shas[p]: data for p, data in sorted(blobs.items()) if shas[p] not in self._blobs}
        write_blobs(self._cache, new)
        self._blobs.update(new)
        tree = mktree(self._cache, shas)
        if tree != want:
            raise RetryableError(f"git mktree made {tree}, expected {want}", reason="StatusCacheError")

    def _remember(self, commit: str, tree: str) -> None:
        self._trees[commit] = tree
        try:  # best effort: the tracking ref only helps the next fetch negotiate
            self._cache.local(["update-ref", f"{TRACK}{self.cluster_id}", commit])
        except RetryableError as exc:
            log.warning("track tip failed: branch=%s error=%s", self.branch, exc)

    def _remote_tip(self, cluster_id: str) -> str | None:
        """The remote tip of a status branch with its objects in the cache, or None."""
        branch = f"refs/heads/{self.prefix}{cluster_id}"
        out = run_remote(self._cache, ["ls-remote", "--", self.url, branch], self._auth)
        if out.rc != 0:
            raise remote_error("ls-remote", self.url, out)
        tips = [line.split("\t") for line in out.stdout.decode().splitlines()]
        tip = next((sha for sha, ref in tips if ref == branch), None)
        if tip is None or tip in self._trees or self._cache.has_commit(tip):
            return tip
        out = run_remote(self._cache, ["fetch", "-q", "--no-tags", "--no-write-fetch-head", "--", self.url,
                                       f"+{branch}:{TRACK}{cluster_id}"], self._auth)
        if out.rc != 0:
            if "couldn't find remote ref" in out.stderr:
                return None
            raise fetch_error(self._cache, self.url, out)
        return self._cache.ref(f"{TRACK}{cluster_id}")

    def _commit(self, tree: str, parent: str | None, message: str) -> str:
        args = ["commit-tree", "--no-gpg-sign", tree, *(["-p", parent] if parent else []), "-F", "-"]
        body = message if message.endswith("\n") else message + "\n"
        return self._cache.local(args, stdin=body.encode("utf-8"), env=self._ident).decode().strip()

    def _push(self, commit: str) -> bool:
        """Push as a fast-forward; False when refused because the tip moved (retry)."""
        out = run_remote(self._cache, ["push", "--porcelain", "--no-verify", "--", self.url,
                                       f"{commit}:refs/heads/{self.branch}"], self._auth)
        if out.rc == 0:
            return True
        report = out.stdout.decode("utf-8", "replace") + "\n" + out.stderr
        refused = [line for line in report.splitlines() if line.startswith("!")]
        if refused and all(any(word in line for word in _RACE) for line in refused):
            return False
        if refused:  # a hook, a protected branch, a read-only key: the server's own words are kept
            said = [line.strip() for line in out.stderr.splitlines() if line.startswith("remote:")]
            raise PermanentError(f"git push declined: url={sanitize(self.url)} branch={self.branch} "
                                 f"error={tail(' '.join([*said, *refused]))} (fix: {FIXES['PushDeclined']})",
                                 reason="PushDeclined")
        raise remote_error("push", self.url, out)


def read_all(url: str, *, workdir: Path, timeout: float = 30.0, prefix: str = DEFAULT_PREFIX,
             auth: GitAuth | None = None) -> dict[str, StatusTree]:
    """Every status branch on ``url`` with one ``git fetch``: {cluster id: StatusTree}."""
    cache = StatusCache(Path(workdir) / READ_CACHE, timeout)
    with cache.lock:
        cache.ensure(sweep=True)
        out = run_remote(cache, ["fetch", "-q", "--prune", "--no-tags", "--no-write-fetch-head", "--", url,
                                 f"+refs/heads/{prefix}*:{TRACK}*"], auth)
        if out.rc != 0:
            raise fetch_error(cache, url, out)
        listing = cache.local(["for-each-ref", "--format=%(objectname) %(refname)", TRACK]).decode()
        tips = {ref[len(TRACK):]: sha for sha, ref in (line.split(" ", 1) for line in listing.splitlines())}
        trees = read_trees(cache, tips)
    log.debug("read status branches: url=%s branches=%d", sanitize(url), len(trees))
    return trees
