"""Status branches: one per cluster, ``gitdns-status/<cluster-id>`` (ARCHITECTURE.md §6).

    StatusBranch(url, cluster_id, workdir=...)
        .publish(files, message) -> sha | None   commit exactly ``files``; None when unchanged
        .read_one(cluster_id=None) -> StatusTree | None
    read_all(url, workdir=...) -> {cluster_id: StatusTree}

Commits are built with git plumbing (``hash-object -w``, ``mktree``, ``commit-tree``) in a
bare cache repository below ``workdir``: no work tree, no index.  A push is a plain
``git push <url> <sha>:refs/heads/<branch>``: never forced, so the remote only ever moves
forward, and never to any branch but this cluster's status branch.  The first commit is an
orphan.  When the push is refused because the tip moved (a second writer with the same
cluster id; the lease should prevent it), the commit is rebuilt on the new tip, same tree,
and retried a bounded number of times with jitter.

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

import contextlib
import hashlib
import logging
import os
import random
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gitdns.adapters.gitauth import GitAuth, auth_env
from gitdns.core.statusdoc import StatusTree
from gitdns.errors import (
    AuthError,
    ConfigError,
    GitdnsError,
    PermanentError,
    RetryableError,
    StaleWriteError,
    UnreachableError,
)

log = logging.getLogger(__name__)

DEFAULT_PREFIX = "gitdns-status/"
TRACK = "refs/status/"  # the cache's copy of each status branch tip
PUBLISH_CACHE = "status-publish.git"
TMP_DIR = "gitdns-tmp"  # blob contents on their way into hash-object, inside the cache
READ_CACHE = "status-read.git"
_RACE = ("fetch first", "non-fast-forward", "stale info", "failed to lock", "cannot lock ref",
         "failed to update ref", "incorrect old value", "reference already exists", "but expected")
_AUTH = ("authentication failed", "permission denied", "could not read username", "returned error: 401",
         "returned error: 403", "access denied", "invalid credentials")
_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
_CLUSTER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_CACHE_CONFIG = ("[gc]\n\tauto = 0\n[maintenance]\n\tauto = false\n[core]\n\tlogAllRefUpdates = false\n"
                 "[fetch]\n\twriteCommitGraph = false\n")
_locks: dict[Path, threading.Lock] = {}
_generations: dict[Path, int] = {}
_locks_guard = threading.Lock()


# -- running git -----------------------------------------------------------------------------


def sanitize(text: str) -> str:
    """``text`` without URL credentials (``https://user:token@host`` -> ``https://***@host``)."""
    return _CREDENTIALS.sub(r"\g<scheme>***@", text)


@dataclass(frozen=True, slots=True)
class _Out:
    rc: int
    stdout: bytes
    stderr: str


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "LANGUAGE": "C", "GIT_NO_REPLACE_OBJECTS": "1"})
    env.update(extra or {})
    return env


def _git(args: Sequence[str], *, cwd: Path | None, timeout: float, stdin: bytes | None = None,
         env: Mapping[str, str] | None = None) -> _Out:
    """Run ``git args``; kill its process group after ``timeout`` seconds (UnreachableError)."""
    cmd = ["git", *args]
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(env),
                                start_new_session=True)
    except FileNotFoundError:
        raise ConfigError("the git executable was not found on PATH") from None
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):  # a daemonised grandchild may hold the pipes
            proc.communicate(timeout=5)
        raise UnreachableError(f"git {args[0]} timed out after {timeout:g}s") from None
    return _Out(proc.returncode, out, err.decode("utf-8", "replace"))


def _remote_env(auth: GitAuth | None, cache: _Cache) -> dict[str, str]:
    """The transport of one remote operation: the configured key, token or CA (read now, so a
    rotated token file is used at once), else the ambient git configuration."""
    if auth is None or not auth.configured:
        return {}
    env, _ = auth_env(auth, cache.path.parent, cache.timeout)
    return env


def _tail(text: str, limit: int = 400) -> str:
    text = sanitize(" ".join(text.split()))
    return text if len(text) <= limit else "..." + text[-limit:]


def _remote_error(op: str, url: str, out: _Out) -> GitdnsError:
    detail = _tail(out.stderr)
    message = f"git {op} failed: url={sanitize(url)} rc={out.rc} error={detail}"
    if any(word in out.stderr.lower() for word in _AUTH):
        return AuthError(message)
    return UnreachableError(message)


def _fetch_error(cache: _Cache, url: str, out: _Out) -> GitdnsError:
    """A failed fetch: the cache's fault (a lock left behind) resets it, else the remote's."""
    if ".lock" in out.stderr or "cannot lock ref" in out.stderr:
        cache.reset()
        return RetryableError(f"git fetch could not update the status cache {cache.path}: {_tail(out.stderr)}",
                              reason="StatusCacheError")
    return _remote_error("fetch", url, out)


# -- the cache repository --------------------------------------------------------------------


class _Cache:
    """A bare repository used only as an object store and a record of remote tips."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.key = Path(os.path.abspath(path))
        self.timeout = timeout
        with _locks_guard:
            self.lock = _locks.setdefault(self.key, threading.Lock())

    @property
    def generation(self) -> int:
        """Bumped whenever this cache directory is thrown away (shared by every user in the process)."""
        return _generations.get(self.key, 0)

    def ensure(self, *, sweep: bool) -> None:
        """Create the cache if missing or half-made; with ``sweep`` (on start), remove what a
        killed process may have left: lock and temporary files.  Call with ``self.lock`` held."""
        if not self._valid():
            self._create()
        elif sweep:
            self._sweep()

    def _valid(self) -> bool:
        return all((self.path / name).exists() for name in ("HEAD", "config", "objects", "refs"))

    def _create(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            log.warning("reset cache: path=%s reason=incomplete", self.path)
            shutil.rmtree(self.path, ignore_errors=True)
        tmp = self.path.with_name(f"{self.path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        shutil.rmtree(tmp, ignore_errors=True)
        self._check(_git(["init", "--bare", "-q", str(tmp)], cwd=None, timeout=self.timeout), "init")
        with open(tmp / "config", "a", encoding="utf-8") as config:  # no gc: objects are never pruned mid-publish
            config.write(_CACHE_CONFIG)
        try:
            os.rename(tmp, self.path)  # atomic: a cache is complete or absent
        except OSError:  # another thread/process made it first
            shutil.rmtree(tmp, ignore_errors=True)
            if not self._valid():
                raise

    def _sweep(self) -> None:
        for path in self.path.rglob("*"):
            name = path.name
            if path.is_file() and (name.endswith(".lock") or name.startswith(("tmp_obj_", "tmp_pack_", "tmp_idx_"))):
                log.info("remove stale file: path=%s", path)
                with contextlib.suppress(OSError):
                    path.unlink()
        for tmp in [*self.path.parent.glob(f"{self.path.name}.tmp-*"), self.path / TMP_DIR]:
            shutil.rmtree(tmp, ignore_errors=True)

    def reset(self) -> None:
        """Throw the cache away (it is only a cache); the next use rebuilds it."""
        log.warning("reset cache: path=%s reason=local-git-error", self.path)
        shutil.rmtree(self.path, ignore_errors=True)
        with _locks_guard:
            _generations[self.key] = _generations.get(self.key, 0) + 1

    def run(self, args: Sequence[str], *, stdin: bytes | None = None, env: Mapping[str, str] | None = None) -> _Out:
        return _git(args, cwd=self.path, timeout=self.timeout, stdin=stdin, env=env)

    def local(self, args: Sequence[str], *, stdin: bytes | None = None, env: Mapping[str, str] | None = None) -> bytes:
        """A local plumbing command that must succeed; a failure resets the cache."""
        out = self.run(args, stdin=stdin, env=env)
        self._check(out, args[0])
        return out.stdout

    def _check(self, out: _Out, op: str) -> None:
        if out.rc != 0:
            if self._valid():
                self.reset()
            raise RetryableError(f"git {op} failed in the status cache {self.path}: {_tail(out.stderr)}",
                                 reason="StatusCacheError")

    def has_commit(self, sha: str) -> bool:
        return self.run(["cat-file", "-e", f"{sha}^{{commit}}"]).rc == 0

    def ref(self, name: str) -> str | None:
        out = self.run(["rev-parse", "-q", "--verify", f"{name}^{{commit}}"])
        if out.rc != 0:
            return None
        return out.stdout.decode().strip() or None


# -- reading objects -------------------------------------------------------------------------


def _cat(cache: _Cache, shas: Sequence[str]) -> dict[str, tuple[str, bytes]]:
    """Objects by sha through one ``git cat-file --batch``: sha -> (type, content)."""
    if not shas:
        return {}
    raw = cache.local(["cat-file", "--batch"], stdin="".join(f"{s}\n" for s in shas).encode())
    out: dict[str, tuple[str, bytes]] = {}
    pos = 0
    for sha in shas:
        end = raw.index(b"\n", pos)
        header = raw[pos:end].decode().split()
        pos = end + 1
        if len(header) < 3:  # "<sha> missing"
            continue
        size = int(header[2])
        out[sha] = (header[1], raw[pos:pos + size])
        pos += size + 1
    return out


def _parse_tree(data: bytes) -> list[tuple[str, str, str]]:
    """(mode, name, sha) entries of a raw tree object."""
    entries: list[tuple[str, str, str]] = []
    pos = 0
    while pos < len(data):
        space = data.index(b" ", pos)
        nul = data.index(b"\0", space)
        entries.append((data[pos:space].decode(), data[space + 1:nul].decode("utf-8", "replace"),
                        data[nul + 1:nul + 21].hex()))
        pos = nul + 21
    return entries


def _parse_commit(data: bytes) -> tuple[str, int, str]:
    """(tree sha, committer time, message) of a raw commit object."""
    head, _, body = data.partition(b"\n\n")
    tree, when = "", 0
    for line in head.decode("utf-8", "replace").splitlines():
        if line.startswith("tree "):
            tree = line[5:].strip()
        elif line.startswith("committer "):
            with contextlib.suppress(ValueError, IndexError):
                when = int(line.rsplit(" ", 2)[1])
    return tree, when, body.decode("utf-8", "replace")


def _read_trees(cache: _Cache, tips: Mapping[str, str]) -> dict[str, StatusTree]:
    """Commit, files and message of every tip (key -> commit sha), in a few cat-file rounds."""
    commits = _cat(cache, sorted(set(tips.values())))
    pending: list[tuple[str, str, str]] = []  # (key, directory prefix, tree sha)
    meta: dict[str, tuple[int, str]] = {}
    for key, sha in tips.items():
        kind, data = commits.get(sha, ("missing", b""))
        if kind != "commit":
            continue
        tree, when, message = _parse_commit(data)
        meta[key] = (when, message)
        pending.append((key, "", tree))
    files: dict[str, dict[str, str]] = {key: {} for key in meta}
    blobs: list[tuple[str, str, str]] = []
    depth = 0
    while pending and depth < 32:
        trees = _cat(cache, sorted({t for _, _, t in pending}))
        nxt: list[tuple[str, str, str]] = []
        for key, prefix, tree in pending:
            for mode, name, sha in _parse_tree(trees.get(tree, ("tree", b""))[1]):
                if mode == "40000":
                    nxt.append((key, f"{prefix}{name}/", sha))
                elif mode in ("100644", "100755"):
                    blobs.append((key, f"{prefix}{name}", sha))
        pending, depth = nxt, depth + 1
    contents = _cat(cache, sorted({sha for _, _, sha in blobs}))
    for key, path, sha in blobs:
        files[key][path] = contents.get(sha, ("blob", b""))[1].decode("utf-8", "replace")
    return {key: StatusTree(tips[key], dict(sorted(files[key].items())), meta[key][1], meta[key][0])
            for key in sorted(meta)}


# -- building trees --------------------------------------------------------------------------


def _blob_sha(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def _validated(files: Mapping[str, str]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for path, text in files.items():
        parts = path.split("/") if isinstance(path, str) else []
        if (not parts or any(p in ("", ".", "..") or p.lower() == ".git" for p in parts)
                or any(c in path for c in "\0\n\r\\")):
            raise ValueError(f"status file path {path!r} is not a relative posix path")
        if not isinstance(text, str):
            raise TypeError(f"status file {path!r}: content must be text")
        out[path] = text.encode("utf-8")
    for path in out:
        for i in range(1, path.count("/") + 1):
            if "/".join(path.split("/")[:i]) in out:
                raise ValueError(f"status file path {path!r} is below the file {'/'.join(path.split('/')[:i])!r}")
    return out


def _tree_sha(entries: Mapping[str, str]) -> str:
    """The sha git gives the tree of ``entries`` (path -> blob sha), computed here so that an
    unchanged status costs no git process."""
    here: dict[str, tuple[str, str]] = {}
    below: dict[str, dict[str, str]] = {}
    for path, sha in entries.items():
        head, sep, rest = path.partition("/")
        if sep:
            below.setdefault(head, {})[rest] = sha
        else:
            here[head] = ("100644", sha)
    for name, sub in below.items():
        here[name] = ("40000", _tree_sha(sub))
    body = b"".join(f"{mode} {name}".encode() + b"\0" + bytes.fromhex(sha)
                    for name, (mode, sha) in sorted(here.items(), key=lambda kv: (kv[0] + "/" if kv[1][0] == "40000"
                                                                                  else kv[0]).encode()))
    return hashlib.sha1(b"tree %d\0" % len(body) + body, usedforsecurity=False).hexdigest()


def _write_blobs(cache: _Cache, blobs: Mapping[str, bytes]) -> None:
    """Write blobs (sha -> content) with one ``git hash-object -w --stdin-paths``."""
    if not blobs:
        return
    tmp = cache.path / TMP_DIR
    tmp.mkdir(exist_ok=True)
    try:
        for sha, data in blobs.items():
            (tmp / sha).write_bytes(data)
        paths = "".join(f"{tmp / sha}\n" for sha in blobs).encode()
        written = cache.local(["hash-object", "-w", "--no-filters", "--stdin-paths"], stdin=paths).decode().split()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if written != list(blobs):
        raise RetryableError("git hash-object wrote other objects than asked", reason="StatusCacheError")


def _mktree(cache: _Cache, entries: Mapping[str, str]) -> str:
    here: list[bytes] = []
    below: dict[str, dict[str, str]] = {}
    for path, sha in entries.items():
        head, sep, rest = path.partition("/")
        if sep:
            below.setdefault(head, {})[rest] = sha
        else:
            here.append(f"100644 blob {sha}\t{head}".encode() + b"\0")
    for name, sub in below.items():
        here.append(f"040000 tree {_mktree(cache, sub)}\t{name}".encode() + b"\0")
    return cache.local(["mktree", "-z"], stdin=b"".join(sorted(here))).decode().strip()


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
        self._cache = _Cache(Path(workdir) / PUBLISH_CACHE, timeout)
        self._auth = auth  # the same transport as the desired branch's fetch (key, token, CA)
        self._started = False  # the first use sweeps stale locks left by a killed predecessor
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
        blobs = _validated(files)
        shas = {path: _blob_sha(data) for path, data in blobs.items()}
        want = _tree_sha(shas)
        with self._cache.lock:
            self._start()
            for attempt in range(1, self.max_attempts + 1):
                tip = self._remote_tip(self.cluster_id)
                if tip is not None and self._tree_of(tip) == want:
                    log.debug("publish unchanged: branch=%s tip=%s", self.branch, tip[:7])
                    return None
                self._write(blobs, shas, want)
                commit = self._commit(want, tip, message)
                if self._push(commit):
                    self._remember(commit, want)
                    log.info("published: branch=%s commit=%s parent=%s attempt=%d", self.branch, commit[:7],
                             tip[:7] if tip else "none", attempt)
                    return commit
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
            return _read_trees(self._cache, {cid: tip}).get(cid)

    def _start(self) -> None:
        self._cache.ensure(sweep=not self._started)
        self._started = True
        if self._generation != self._cache.generation:
            self._trees.clear()
            self._blobs.clear()
            self._generation = self._cache.generation

    def _tree_of(self, commit: str) -> str:
        if commit not in self._trees:
            self._trees[commit] = self._cache.local(["rev-parse", f"{commit}^{{tree}}"]).decode().strip()
        return self._trees[commit]

    def _write(self, blobs: Mapping[str, bytes], shas: Mapping[str, str], want: str) -> None:
        """Blobs not written yet by this object, then the trees; checks git agrees on the root."""
        new = {shas[p]: data for p, data in sorted(blobs.items()) if shas[p] not in self._blobs}
        _write_blobs(self._cache, new)
        self._blobs.update(new)
        tree = _mktree(self._cache, shas)
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
        out = self._cache.run(["ls-remote", "--", self.url, branch], env=_remote_env(self._auth, self._cache))
        if out.rc != 0:
            raise _remote_error("ls-remote", self.url, out)
        tips = [line.split("\t") for line in out.stdout.decode().splitlines()]
        tip = next((sha for sha, ref in tips if ref == branch), None)
        if tip is None or tip in self._trees or self._cache.has_commit(tip):
            return tip
        out = self._cache.run(["fetch", "-q", "--no-tags", "--no-write-fetch-head", "--", self.url,
                               f"+{branch}:{TRACK}{cluster_id}"], env=_remote_env(self._auth, self._cache))
        if out.rc != 0:
            if "couldn't find remote ref" in out.stderr:
                return None
            raise _fetch_error(self._cache, self.url, out)
        return self._cache.ref(f"{TRACK}{cluster_id}")

    def _commit(self, tree: str, parent: str | None, message: str) -> str:
        args = ["commit-tree", "--no-gpg-sign", tree, *(["-p", parent] if parent else []), "-F", "-"]
        body = message if message.endswith("\n") else message + "\n"
        return self._cache.local(args, stdin=body.encode("utf-8"), env=self._ident).decode().strip()

    def _push(self, commit: str) -> bool:
        """Push as a fast-forward; False when refused because the tip moved (retry)."""
        out = self._cache.run(["push", "--porcelain", "--no-verify", "--", self.url,
                               f"{commit}:refs/heads/{self.branch}"], env=_remote_env(self._auth, self._cache))
        if out.rc == 0:
            return True
        report = out.stdout.decode("utf-8", "replace") + "\n" + out.stderr
        refused = [line for line in report.splitlines() if line.startswith("!")]
        if refused and all(any(word in line for word in _RACE) for line in refused):
            return False
        if refused:
            raise PermanentError(f"git push refused: url={sanitize(self.url)} branch={self.branch} "
                                 f"error={_tail(' '.join(refused))}", reason="StatusPushRefused")
        raise _remote_error("push", self.url, out)


def read_all(url: str, *, workdir: Path, timeout: float = 30.0, prefix: str = DEFAULT_PREFIX,
             auth: GitAuth | None = None) -> dict[str, StatusTree]:
    """Every status branch on ``url`` with one ``git fetch``: {cluster id: StatusTree}."""
    cache = _Cache(Path(workdir) / READ_CACHE, timeout)
    with cache.lock:
        cache.ensure(sweep=True)
        out = cache.run(["fetch", "-q", "--prune", "--no-tags", "--no-write-fetch-head", "--", url,
                         f"+refs/heads/{prefix}*:{TRACK}*"], env=_remote_env(auth, cache))
        if out.rc != 0:
            raise _fetch_error(cache, url, out)
        listing = cache.local(["for-each-ref", "--format=%(objectname) %(refname)", TRACK]).decode()
        tips = {ref[len(TRACK):]: sha for sha, ref in (line.split(" ", 1) for line in listing.splitlines())}
        trees = _read_trees(cache, tips)
    log.debug("read status branches: url=%s branches=%d", sanitize(url), len(trees))
    return trees
